// A room opened before the network answers shows what the history cache holds of it (the
// cache is what makes a reload or a slow network show history at once). The page's
// first read of the room (timeline.js) then replaces it with the server's newest page; when
// that read fails (offline), the cached messages stay on screen.
//
// It runs on "room:opening", said just before the timeline reads the room, and only for a
// room the page has not loaded yet in this tab.

/** How many of the newest cached messages are drawn (the timeline's first page is 50). */
const SHOWN = 50;

export function showCachedFirst({ store, bus, cache, timeline }) {
  bus.on("room:opening", async ({ roomId, messageId }) => {
    if (messageId || store.timeline(roomId).loaded) return;
    const cached = await cache.messages(roomId);
    // The server may have answered meanwhile (its page is newer than the cache), or another
    // room may be open now.
    const t = store.timeline(roomId);
    if (!cached.length || t.loaded || timeline.roomId !== roomId) return;
    t.loaded = true;
    t.fromCache = true;
    store.upsertMessages(roomId, cached.slice(-SHOWN));
  });
}
