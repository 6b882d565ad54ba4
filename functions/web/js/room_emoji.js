// A room's own emoji (listRoomEmoji): the server marks `:name:` in Markdown as
// `<span data-type="emoji" data-id="name">:name:</span>`, and this shows the room's image in
// its place; a name the room no longer has (deleted) stays as written. The list is read once
// each time a room is opened, and offered by the composer's `:` suggestions.

export function createRoomEmoji({ api, bus, files }) {
  /** Per room: a promise of its emoji by name, and when it was asked. */
  const lists = new Map();
  bus.on("room:open", ({ roomId }) => lists.delete(roomId));
  /** A name the server marked but the list lacks asks again, at most this often. */
  const STALE_AFTER_MS = 10000;

  function list(roomId) {
    if (!lists.has(roomId)) {
      const got = api.listRoomEmoji(roomId).then(
        (emoji) => new Map(emoji.map((e) => [e.name, e])),
        () => (lists.delete(roomId), new Map()),
      );
      lists.set(roomId, { got, at: Date.now() });
    }
    return lists.get(roomId).got;
  }

  /** The room's emoji `name`: a name the list lacks may be one made since it was read. */
  async function find(roomId, name) {
    const known = (await list(roomId)).get(name);
    if (known || Date.now() - (lists.get(roomId)?.at ?? 0) < STALE_AFTER_MS) return known;
    lists.delete(roomId);
    return (await list(roomId)).get(name);
  }

  return {
    list,
    /** Reads the room's emoji again when next asked (one was added or deleted). */
    forget: (roomId) => lists.delete(roomId),
    /** Puts the room's image for the emoji `span` marks in its place, once it is known. */
    async show(span, roomId) {
      const name = span.dataset.id;
      // Only the mark the server writes (an HTML client's span may hold other text).
      if (span.textContent !== `:${name}:`) return;
      const emoji = await find(roomId, name);
      if (!emoji) return;
      const img = document.createElement("img");
      img.className = "custom-emoji";
      img.dataset.testid = "custom-emoji";
      img.alt = `:${name}:`;
      img.title = `:${name}:`;
      try {
        img.src = await files.blob(emoji.url);
        span.replaceChildren(img);
      } catch {
        // The image is gone (deleted meanwhile): the name stays.
      }
    },
  };
}
