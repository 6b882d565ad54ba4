// Wires the modules together: the API, the in-memory store, the live connection, the sidebar,
// the timeline, the composer, dialogs and the router. This is the one place that knows all of
// them; each of them talks to the others through the store and the bus (events.js).
// `window.tabletalk` exposes the parts for later modules and for tests.

import { createApi } from "./api.js";
import { addDefaultActions, createActions } from "./actions.js";
import { createComposer } from "./composer.js";
import { createDialogs } from "./dialogs.js";
import { createBus } from "./events.js";
import { createLive } from "./live.js";
import { createOutbox } from "./outbox.js";
import { addDefaultSections, createSidebar } from "./rooms.js";
import { roomHref, watchRoutes } from "./router.js";
import { signOut } from "./session.js";
import { handleSignals } from "./signals.js";
import { createStore } from "./store.js";
import { createTimeline } from "./timeline.js";
import { addRoomCommands } from "./room_commands.js";
import { openHistoryCache } from "./history_cache.js";
import { createCatchUp } from "./catch_up.js";
import { showCachedFirst } from "./cache_first.js";
import { watchNetwork } from "./network.js";
import { addNotifications } from "./notifications.js";
import { createFiles } from "./files.js";
import { createRoomEmoji } from "./room_emoji.js";

// Threads, pins, polls, attachments and presence load beside the sign-in screen, not before it.
const loadingFeatures = import("./features.js");

const STATUS_TEXT = { connecting: "Connecting…", connected: "", reconnecting: "Reconnecting…", stopped: "Offline" };

export async function startApp(me) {
  const bus = createBus();
  const api = createApi({ token: me.token, onUnauthorized: signOut });
  const store = createStore(bus);
  const actions = createActions();
  addDefaultActions(actions, bus);
  const outbox = createOutbox({ api, store });
  const live = createLive({ api, bus });
  const files = createFiles(me);
  const roomEmoji = createRoomEmoji({ api, bus, files });

  /** What message views and actions are handed: who is signed in and the open room. */
  const ctx = {
    me,
    api,
    store,
    actions,
    outbox,
    roomId: null,
    composer: null,
    dialogs: null,
    files,
    roomEmoji,
    seenBy: (m) => store.seenBy(m.roomId, m.id, me.userId),
  };
  const composer = createComposer({ api, store, outbox, me, bus, roomEmoji });
  ctx.composer = composer;
  const timeline = createTimeline({ api, store, bus, ctx });
  const sidebar = createSidebar({ store, bus, me });
  const dialogs = createDialogs();
  ctx.dialogs = dialogs;

  const rooms = {
    async reload() {
      store.setRooms(await api.listRooms());
      // Direct conversations are named after the other member.
      await Promise.all(
        [...store.rooms.values()]
          .filter((r) => r.direct && !store.members(r.id).size)
          .map((r) => api.listMembers(r.id).then((m) => store.setMembers(r.id, m), () => {})),
      );
      sidebar.draw();
    },
  };
  handleSignals({ api, store, bus, me, rooms });
  // The history cache and catching up through the change feed (docs/CATCHUP.md).
  const history = openHistoryCache(me.userId);
  const catchUp = createCatchUp({ api, store, bus, cache: history, timeline, rooms });
  showCachedFirst({ store, bus, cache: history, timeline });
  document.getElementById("signout").addEventListener("click", () => history.forget());

  document.getElementById("app").hidden = false;
  document.getElementById("me").textContent = me.name;
  document.getElementById("signout").addEventListener("click", signOut);
  addNotifications({ api, me });
  const status = document.getElementById("connection-status");
  bus.on("live:status", ({ state }) => {
    status.textContent = STATUS_TEXT[state] ?? "";
    status.dataset.state = state;
  });
  bus.on("notice", ({ text }) => {
    status.textContent = text;
    setTimeout(() => status.textContent === text && (status.textContent = ""), 4000);
  });
  const typing = document.getElementById("typing");
  bus.on("typing:changed", ({ roomId }) => {
    if (roomId !== ctx.roomId) return;
    const names = store.typing(roomId).map(([, t]) => t.name);
    typing.textContent = names.length ? `${names.join(", ")} ${names.length > 1 ? "are" : "is"} typing…` : "";
  });
  document.querySelector(".skip-link").addEventListener("click", (e) => {
    e.preventDefault();
    document.getElementById("timeline").focus();
  });

  const title = document.getElementById("room-title");
  const invite = document.getElementById("invite");
  document.getElementById("jump-unread").addEventListener("click", () => timeline.jumpToFirstUnread());

  async function openRoom({ roomId, messageId }) {
    if (!store.rooms.has(roomId)) {
      await rooms.reload().catch(() => {});
      if (!store.rooms.has(roomId)) {
        bus.emit("notice", { text: "That room is not one of yours." });
        return;
      }
    }
    const room = store.rooms.get(roomId);
    const switching = ctx.roomId !== roomId;
    ctx.roomId = roomId;
    sidebar.setCurrent(roomId);
    title.textContent = sidebar.roomName(room);
    invite.hidden = room.direct;
    composer.setRoom(roomId);
    typing.textContent = "";
    const viewing = live.show(roomId);
    document.getElementById("sidebar").classList.remove("open");
    document.getElementById("sidebar-toggle").setAttribute("aria-expanded", "false");
    if (switching) {
      api.listMembers(roomId).then((m) => store.setMembers(roomId, m), () => {});
      api.listReceipts(roomId).then((r) => store.setReceipts(roomId, r), () => {});
    }
    // The cached copy shows at once; the server's is read once the live view is attached.
    bus.emit("room:opening", { roomId, messageId });
    await viewing;
    // Another room was opened meanwhile: that one is read, not this.
    if (ctx.roomId !== roomId) return;
    await timeline.open(roomId, { messageId, lastRead: room.unreadCount > 0 ? room.lastReadAt : null });
    bus.emit("room:open", { roomId, messageId });
  }

  addDefaultSections(sidebar, store);
  addRoomCommands({ api, store, bus, dialogs, rooms, sidebar, ctx, me });
  const features = (await loadingFeatures).addFeatures({ api, store, bus, ctx, actions, sidebar, dialogs, composer, outbox });

  const toggle = document.getElementById("sidebar-toggle");
  toggle.addEventListener("click", () => {
    const open = document.getElementById("sidebar").classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(open));
  });

  await rooms.reload();
  // Belt and braces: the room list is read again when the tab comes back into
  // view and after a reconnect, in case a notice was missed (a room made after this tab
  // connected is not due one until it is looked at).
  const refresh = () => rooms.reload().catch(() => {});
  document.addEventListener("visibilitychange", () => document.visibilityState === "visible" && refresh());
  addEventListener("focus", refresh);
  bus.on("live:connected", ({ reconnected }) => reconnected && refresh());
  live.start();
  catchUp.start();
  watchNetwork({ bus, live, catchUp });
  watchRoutes((route) => openRoom(route).catch((e) => bus.emit("notice", { text: e.message })));
  globalThis.tabletalk = { api, bus, store, live, timeline, composer, sidebar, dialogs, actions, rooms, ctx, openRoom, roomHref };
  Object.assign(globalThis.tabletalk, { history, catchUp });
  globalThis.tabletalk.features = features;
}
