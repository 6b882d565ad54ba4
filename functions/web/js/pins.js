// Pins. A "Pin" / "Unpin" action on a message (its author, or someone who may manage messages:
// the server decides, and a refusal is shown), and the room's pinned messages as a list in the
// side panel (listPins, newest message first, a page at a time), each a link to the message.
//
// The action is optimistic with revert: the message shows pinned at once, the
// server's answer replaces it, and a refusal puts back what was held — unless something newer
// came meanwhile, which stays. The list follows the `message.pinned` signal (the other side's
// pins and unpins, and this page's own echo) by reading the first page again: a pin is a set
// operation, so reading it twice changes nothing.

import { memberName } from "./message_view.js";
import { roomHref } from "./router.js";
import { toText } from "./text.js";

export function addPins({ api, store, bus, ctx, panel, actions, messageParts }) {
  const pinnable = (m) => !m.deletedAt && ["Message", "Poll", "Webhook"].includes(m.type);
  const mayPin = (m, c) => m.authorId === c.me.userId || store.rooms.get(c.roomId)?.ownerId === c.me.userId;

  async function setPinned(m, pinned, c) {
    const roomId = c.roomId;
    const held = store.message(roomId, m.id) ?? m;
    const optimistic = { ...held, isPinned: pinned };
    store.upsertMessages(roomId, [optimistic]);
    try {
      const answer = await (pinned ? api.pinMessage(roomId, m.id) : api.unpinMessage(roomId, m.id));
      if (answer?.id === m.id) store.upsertMessages(roomId, [answer]);
      if (panel.is("pins", roomId)) load(roomId);
    } catch (e) {
      if (store.message(roomId, m.id) === optimistic) store.upsertMessages(roomId, [held]);
      bus.emit("notice", { text: `Could not ${pinned ? "pin" : "unpin"}: ${e.message}` });
    }
  }

  actions.add({
    id: "pin",
    label: "Pin",
    when: (m, c) => pinnable(m) && !m.isPinned && mayPin(m, c),
    run: (m, c) => setPinned(m, true, c),
  });
  actions.add({
    id: "unpin",
    label: "Unpin",
    when: (m, c) => pinnable(m) && m.isPinned && mayPin(m, c),
    run: (m, c) => setPinned(m, false, c),
  });
  messageParts.push((m) => {
    if (!m.isPinned || m.deletedAt) return null;
    const mark = document.createElement("span");
    mark.className = "pinned-mark";
    mark.dataset.testid = "pinned";
    mark.textContent = "📌 Pinned";
    return mark;
  });

  // ---- the list

  let pins = [];
  let more = null;
  let generation = 0;

  // A pin shows its author's name as it is now.
  bus.on("members:changed", ({ roomId }) => draw(roomId));

  function draw(roomId) {
    if (!panel.is("pins", roomId)) return;
    const list = document.createElement("ul");
    list.className = "pins";
    list.dataset.testid = "pins";
    list.setAttribute("aria-label", "Pinned messages");
    list.dataset.count = pins.length;
    for (const m of pins) {
      const li = document.createElement("li");
      li.className = "pin";
      li.dataset.testid = "pin";
      li.dataset.messageId = m.id;
      const a = document.createElement("a");
      a.href = roomHref(roomId, m.id);
      a.textContent = `${memberName(store, roomId, m.authorId, m.authorName)}: ${toText(m.text || "").slice(0, 120) || (m.poll ? `📊 ${m.poll.question}` : "…")}`;
      li.append(a);
      list.append(li);
    }
    const parts = [list];
    if (!pins.length) {
      const empty = document.createElement("p");
      empty.className = "hint";
      empty.dataset.testid = "pins-empty";
      empty.textContent = "No pinned messages yet.";
      parts.push(empty);
    }
    if (more) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Show more";
      b.addEventListener("click", () => load(roomId, more));
      parts.push(b);
    }
    panel.body.replaceChildren(...parts);
  }

  async function load(roomId, cursor = null) {
    const mine = ++generation;
    try {
      const page = await api.listPins(roomId, { cursor });
      if (mine !== generation || !panel.is("pins", roomId)) return;
      pins = cursor ? [...pins, ...page.messages.filter((m) => !pins.some((p) => p.id === m.id))] : page.messages;
      more = page.hasMore ? page.nextCursor : null;
      draw(roomId);
    } catch (e) {
      if (mine === generation) bus.emit("notice", { text: `Could not list the pins: ${e.message}` });
    }
  }

  function openPins(roomId) {
    pins = [];
    more = null;
    panel.open({ id: roomId, kind: "pins", title: "Pinned messages", render: () => {} });
    draw(roomId);
    panel.body.closest("aside").querySelector("button")?.focus();
    load(roomId);
  }

  const tools = document.querySelector(".room-tools");
  const button = document.createElement("button");
  button.type = "button";
  button.id = "pins-toggle";
  button.textContent = "Pins";
  button.dataset.testid = "pins-toggle";
  button.hidden = true;
  button.setAttribute("aria-controls", "panel");
  button.addEventListener("click", () => (panel.is("pins", ctx.roomId) ? panel.close() : openPins(ctx.roomId)));
  tools.append(button);

  bus.on("room:open", ({ roomId }) => {
    button.hidden = false;
    if (panel.current?.kind === "pins" && !panel.is("pins", roomId)) openPins(roomId);
  });
  bus.on("live:message.pinned", ({ roomId }) => panel.is("pins", roomId) && load(roomId));
  bus.on("live:message.deleted", ({ roomId }) => panel.is("pins", roomId) && load(roomId));
  bus.on("live:connected", ({ reconnected }) => reconnected && panel.current?.kind === "pins" && load(panel.current.id));

  return { open: openPins };
}
