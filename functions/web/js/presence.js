// Presence. Each member shows a dot, online or away, with their custom status — in the room's
// member list (the side panel's "Members") and beside each direct conversation in the sidebar.
// `listMembers` carries every member's presence; a `presence` signal (a member's connection
// opened or their last one closed, or their status changed) updates that user wherever the
// page lists them, until the next listing, which is the server's word again.
//
// The person's own custom status is set and cleared from the top bar (setMyStatus,
// clearMyStatus) and shown beside their name. It is not optimistic: it shows once the server
// has stored it (its answer), so nothing has to be taken back.

export function addPresence({ api, store, bus, ctx, panel, sidebar, dialogs }) {
  const me = ctx.me;
  let mine = null;

  /** A member's presence as the page knows it. */
  const presenceOf = (member) => member?.presence ?? { state: "away", lastSeen: null, status: null };

  function statusText(status) {
    if (!status) return "";
    return [status.emoji, status.text].filter(Boolean).join(" ");
  }

  function dot(presence, name) {
    const span = document.createElement("span");
    span.className = `presence-dot ${presence.state}`;
    span.dataset.testid = "presence";
    span.dataset.state = presence.state;
    span.setAttribute("role", "img");
    span.setAttribute("aria-label", `${name} is ${presence.state === "online" ? "online" : "away"}`);
    span.title = presence.state === "online" ? "Online" : presence.lastSeen ? `Away, last seen ${new Date(presence.lastSeen).toLocaleString()}` : "Away";
    return span;
  }

  // ---- the direct conversations in the sidebar

  sidebar.decorate((room, link) => {
    if (!room.direct) return;
    const other = [...store.members(room.id).values()].find((m) => m.userId !== me.userId);
    if (!other) return;
    link.prepend(dot(presenceOf(other), other.nickname ?? other.name));
    const status = statusText(presenceOf(other).status);
    if (status) link.title = status;
  });

  // ---- the member list

  function drawMembers(roomId) {
    if (!panel.is("members", roomId)) return;
    const members = [...store.members(roomId).values()].sort((a, b) => {
      const online = (m) => (presenceOf(m).state === "online" ? 0 : 1);
      return online(a) - online(b) || (a.nickname ?? a.name).localeCompare(b.nickname ?? b.name);
    });
    const ul = document.createElement("ul");
    ul.className = "members";
    ul.dataset.testid = "members";
    ul.setAttribute("aria-label", "Members");
    for (const m of members) {
      const li = document.createElement("li");
      li.className = "member";
      li.dataset.testid = "member";
      li.dataset.userId = m.userId;
      const p = presenceOf(m);
      const name = document.createElement("span");
      name.className = "member-name";
      name.textContent = `${m.nickname ?? m.name}${m.userId === me.userId ? " (you)" : ""}`;
      li.append(dot(p, m.nickname ?? m.name), " ", name);
      if (Number.isInteger(m.trustLevel)) {
        // What the member may post here: links and files from 1, @everyone from 2 (docs/USING.md).
        const level = document.createElement("span");
        level.className = "member-trust";
        level.dataset.testid = "member-trust";
        level.textContent = `L${m.trustLevel}`;
        level.title = `Trust level ${m.trustLevel}${m.trustLevelSet ? ", set by a moderator" : ""}`;
        level.setAttribute("aria-label", level.title);
        li.append(" ", level);
      }
      const status = statusText(p.status);
      if (status) {
        const s = document.createElement("span");
        s.className = "member-status";
        s.dataset.testid = "member-status";
        s.textContent = status;
        li.append(" ", s);
      }
      ul.append(li);
    }
    panel.body.replaceChildren(ul);
  }

  function openMembers(roomId) {
    panel.open({ id: roomId, kind: "members", title: "Members", render: () => {} });
    drawMembers(roomId);
    api.listMembers(roomId).then((list) => store.setMembers(roomId, list), () => {});
  }

  const tools = document.querySelector(".room-tools");
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Members";
  button.dataset.testid = "members-toggle";
  button.hidden = true;
  button.setAttribute("aria-controls", "panel");
  button.addEventListener("click", () => (panel.is("members", ctx.roomId) ? panel.close() : openMembers(ctx.roomId)));
  tools.append(button);

  bus.on("room:open", ({ roomId }) => {
    button.hidden = false;
    if (panel.current?.kind === "members" && !panel.is("members", roomId)) openMembers(roomId);
  });
  bus.on("members:changed", ({ roomId }) => {
    drawMembers(roomId);
    if (store.rooms.get(roomId)?.direct) sidebar.draw();
  });
  bus.on("live:presence", ({ userId, state, lastSeen, status }) => {
    const presence = { state, lastSeen: lastSeen ?? null, status: status ?? null };
    let direct = false;
    for (const room of store.rooms.values()) {
      const member = store.members(room.id).get(userId);
      if (!member) continue;
      member.presence = presence;
      if (room.direct) direct = true;
      drawMembers(room.id);
    }
    if (userId === me.userId) showMine(presence);
    if (direct) sidebar.draw();
  });

  // ---- the person's own status

  const mineBox = document.createElement("span");
  mineBox.className = "my-status";
  mineBox.dataset.testid = "my-status";
  const edit = document.createElement("button");
  edit.type = "button";
  edit.textContent = "Status";
  edit.dataset.testid = "status-edit";
  edit.setAttribute("aria-label", "Set your status");
  document.getElementById("me").after(mineBox, edit);

  function showMine(presence) {
    mine = presence;
    mineBox.textContent = statusText(presence?.status);
  }

  edit.addEventListener("click", () => {
    const clear = document.createElement("button");
    clear.type = "button";
    clear.textContent = "Clear status";
    clear.dataset.testid = "status-clear";
    clear.disabled = !mine?.status;
    clear.addEventListener("click", async () => {
      try {
        showMine(await api.clearMyStatus());
        dialogs.close();
      } catch (e) {
        bus.emit("notice", { text: `Could not clear the status: ${e.message}` });
      }
    });
    dialogs.ask({
      title: "Your status",
      submitLabel: "Set status",
      fields: [
        { name: "emoji", label: "Emoji", value: mine?.status?.emoji ?? "" },
        { name: "text", label: "What are you up to?", value: mine?.status?.text ?? "" },
      ],
      content: clear,
      async submit({ emoji, text }) {
        if (!emoji && !text) throw new Error("Write a status or pick an emoji (or clear it).");
        showMine(await api.setMyStatus({ emoji: emoji || undefined, text: text || undefined }));
      },
    });
  });

  api.getMyStatus().then(showMine, () => {});

  return { openMembers, presenceOf };
}
