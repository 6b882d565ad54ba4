// Making and finding rooms: create a room, browse and join public rooms (the directory),
// open a direct conversation, invite someone to the open room, and the invitations waiting
// for the signed-in person (a sidebar section with Accept and Decline). Invitations have no
// live signal, so the section is read again when the page regains focus and every 30 s.

import { roomHref } from "./router.js";

const INVITATIONS_EVERY_MS = 30000;

export function addRoomCommands({ api, store, bus, dialogs, rooms, sidebar, ctx }) {
  const go = (roomId) => {
    location.hash = roomHref(roomId);
  };
  let invitations = [];

  async function loadInvitations() {
    try {
      invitations = await api.listMyInvitations();
    } catch {
      return;
    }
    sidebar.draw();
  }

  sidebar.addSection({
    id: "invitations",
    title: "Invitations",
    order: 5,
    hideWhenEmpty: true,
    items: () => invitations,
    renderItem(invite) {
      const li = document.createElement("li");
      li.className = "invitation";
      li.dataset.testid = "invitation";
      li.dataset.roomId = invite.roomId;
      const text = document.createElement("span");
      text.textContent = `${invite.roomName} (from ${invite.invitedBy})`;
      const accept = document.createElement("button");
      accept.type = "button";
      accept.textContent = "Accept";
      accept.dataset.testid = "invitation-accept";
      accept.setAttribute("aria-label", `Accept the invitation to ${invite.roomName}`);
      accept.addEventListener("click", async () => {
        await api.acceptInvitation(invite.roomId);
        invitations = invitations.filter((i) => i !== invite);
        await rooms.reload();
        go(invite.roomId);
      });
      const decline = document.createElement("button");
      decline.type = "button";
      decline.textContent = "Decline";
      decline.setAttribute("aria-label", `Decline the invitation to ${invite.roomName}`);
      decline.addEventListener("click", async () => {
        await api.request("POST", `/api/invites/${encodeURIComponent(invite.roomId)}/decline`);
        invitations = invitations.filter((i) => i !== invite);
        sidebar.draw();
      });
      li.append(text, " ", accept, " ", decline);
      return li;
    },
  });

  const on = (action, fn) => document.querySelector(`[data-action="${action}"]`).addEventListener("click", fn);

  on("create-room", () =>
    dialogs.ask({
      title: "New room",
      submitLabel: "Create",
      fields: [
        { name: "name", label: "Name", required: true },
        { name: "description", label: "Description" },
        { name: "public", label: "Public (listed in the directory)", type: "checkbox" },
      ],
      async submit({ name, description, public: listed }) {
        const room = await api.createRoom({ name, description, visibility: listed ? "public" : "private" });
        await rooms.reload();
        go(room.id);
      },
    }),
  );

  on("join-room", () => {
    const results = document.createElement("ul");
    results.className = "directory";
    results.dataset.testid = "directory";
    results.setAttribute("aria-label", "Public rooms");
    const search = document.createElement("input");
    search.type = "search";
    search.placeholder = "Search public rooms";
    search.setAttribute("aria-label", "Search public rooms");
    search.dataset.testid = "directory-search";
    const content = document.createElement("div");
    content.append(search, results);
    let searches = 0;
    const find = async () => {
      const asked = ++searches;
      const page = await api.roomDirectory(search.value.trim() || undefined).catch(() => ({ rooms: [] }));
      // An earlier search that answers late must not replace a later one's list.
      if (asked !== searches) return;
      results.replaceChildren(
        ...page.rooms.map((room) => {
          const li = document.createElement("li");
          const name = document.createElement("span");
          name.textContent = room.description ? `${room.name} — ${room.description}` : room.name;
          const member = store.rooms.has(room.id);
          const join = document.createElement("button");
          join.type = "button";
          join.dataset.testid = "directory-join";
          join.dataset.roomId = room.id;
          join.textContent = member ? "Open" : "Join";
          join.setAttribute("aria-label", `${member ? "Open" : "Join"} ${room.name}`);
          join.addEventListener("click", async () => {
            if (!member) await api.joinRoom(room.id);
            await rooms.reload();
            dialogs.close();
            go(room.id);
          });
          li.append(name, " ", join);
          return li;
        }),
      );
    };
    let timer = null;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(find, 200);
    });
    dialogs.ask({ title: "Browse public rooms", content, noSubmit: true });
    search.focus();
    find();
  });

  on("open-direct", () =>
    dialogs.ask({
      title: "Direct message",
      submitLabel: "Open",
      fields: [{ name: "userId", label: "User id", required: true }],
      async submit({ userId }) {
        const room = await api.openDirect(userId);
        await rooms.reload();
        go(room.id);
      },
    }),
  );

  on("invite", () =>
    dialogs.ask({
      title: "Invite to this room",
      submitLabel: "Invite",
      fields: [{ name: "userId", label: "User id", required: true }],
      async submit({ userId }) {
        await api.createInvitation(ctx.roomId, userId);
        bus.emit("notice", { text: `Invited ${userId}` });
      },
    }),
  );

  addEventListener("focus", loadInvitations);
  setInterval(loadInvitations, INVITATIONS_EVERY_MS);
  loadInvitations();
}
