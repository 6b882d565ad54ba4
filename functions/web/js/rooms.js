// The sidebar: sections of rooms, newest activity first, each with its unread and mention
// badges, redrawn whenever the store's rooms change (a live `room.activity` notice, a read,
// a join). A section is
//
//   sidebar.addSection({ id, title, order, items: () => [...], renderItem: (item) => <li> });
//
// and `roomItem(room)` draws a room the standard way, so a new section (starred rooms,
// threads, …) lists what it likes without touching the others.

export function createSidebar({ store, bus, me }) {
  const container = document.getElementById("sidebar-sections");
  const sections = [];
  /** What other modules add to a room's entry (presence.js: a dot): `(room, link) => void`. */
  const decorators = [];
  let current = null;

  /** A direct conversation is named after the other person (its own name is empty). */
  function roomName(room) {
    if (!room.direct) return room.name;
    for (const m of store.members(room.id).values()) if (m.userId !== me.userId) return m.nickname ?? m.name;
    return room.lastMessage?.authorId && room.lastMessage.authorId !== me.userId
      ? room.lastMessage.authorName
      : "Direct conversation";
  }

  function roomItem(room) {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = `#/rooms/${room.id}`;
    a.className = "room-link";
    a.dataset.testid = "room-link";
    a.dataset.roomId = room.id;
    if (room.id === current) a.setAttribute("aria-current", "page");
    const name = document.createElement("span");
    name.className = "room-name";
    name.textContent = roomName(room);
    a.append(name);
    const unread = room.id === current ? 0 : room.unreadCount;
    if (unread > 0) {
      a.classList.add("unread");
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.dataset.testid = "unread-badge";
      const count = `${unread}${room.unreadCapped ? "+" : ""}`;
      badge.textContent = count;
      badge.setAttribute("aria-label", `${count} unread`);
      a.append(badge);
    }
    if (room.id !== current && room.mentionCount > 0) {
      const badge = document.createElement("span");
      badge.className = "badge mention";
      badge.dataset.testid = "mention-badge";
      badge.textContent = `@${room.mentionCount}`;
      badge.setAttribute("aria-label", `${room.mentionCount} mentioning you`);
      a.append(badge);
    }
    // The other person of a direct conversation typing shows wherever one looks.
    if (room.direct && room.id !== current && store.typing(room.id).length) {
      const note = document.createElement("span");
      note.className = "typing-note";
      note.dataset.testid = "typing-note";
      note.textContent = "typing…";
      a.append(note);
    }
    for (const decorate of decorators) decorate(room, a);
    li.append(a);
    return li;
  }

  function draw() {
    const focused = document.activeElement?.closest?.("#sidebar") ? document.activeElement.dataset.roomId : null;
    const parts = [];
    for (const section of [...sections].sort((a, b) => a.order - b.order)) {
      const items = section.items();
      if (!items.length && section.hideWhenEmpty) continue;
      const wrap = document.createElement("section");
      wrap.className = "sidebar-section";
      wrap.dataset.testid = `section-${section.id}`;
      const heading = document.createElement("h2");
      heading.id = `section-${section.id}-title`;
      heading.textContent = section.title;
      const ul = document.createElement("ul");
      ul.setAttribute("aria-labelledby", heading.id);
      ul.append(...items.map((item) => (section.renderItem ?? roomItem)(item)));
      wrap.append(heading, ul);
      parts.push(wrap);
    }
    container.replaceChildren(...parts);
    if (focused) container.querySelector(`[data-room-id="${CSS.escape(focused)}"]`)?.focus();
  }

  bus.on("rooms:changed", draw);
  bus.on("typing:changed", ({ roomId }) => store.rooms.get(roomId)?.direct && roomId !== current && draw());

  return {
    addSection(section) {
      sections.push({ order: 50, ...section });
      draw();
    },
    setCurrent(roomId) {
      current = roomId;
      draw();
    },
    roomItem,
    roomName,
    draw,
    decorate(fn) {
      decorators.push(fn);
      draw();
    },
  };
}

export function addDefaultSections(sidebar, store) {
  sidebar.addSection({ id: "rooms", title: "Rooms", order: 10, items: () => store.roomsByActivity().filter((r) => !r.direct) });
  sidebar.addSection({ id: "direct", title: "Direct messages", order: 20, items: () => store.roomsByActivity().filter((r) => r.direct) });
}
