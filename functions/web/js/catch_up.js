// Catching up (docs/CATCHUP.md): the store of
// the server is the truth, live signals are hints, and the change feed (`messageChanges`) is
// how the page's copies become complete again, whatever it missed.
//
// When it runs:
//   - on start, for every room the history cache follows (history_cache.js);
//   - when a room is opened that the cache does not follow yet: an initial sync (cursor null);
//   - on every reconnect and when the browser says it is online again (network.js), for
//     every followed room — then the open room's messages on screen
//     are read again, since reactions, pins and previews are companion data the feed does not
//     carry (docs/CATCHUP.md);
//   - when a live signal about a message arrives (a hint): for that room, to record the
//     change at its version.
//
// One run at a time; rooms asked for meanwhile are run next. Each run follows the algorithm of
// docs/CATCHUP.md: ask with the stored cursors (at most 100 rooms a request), apply each change
// as an upsert by version to the cache and, for a loaded room, to the page's store; store the
// returned cursor; ask again at once for the rooms with `hasMore`.
//   RESET:       the room's cached copy (in IndexedDB and in memory) is dropped first, then the
//                changes are applied as in an initial sync; an open room is loaded again.
//   NO_ACCESS:   the room is no longer the caller's: its cached copy is dropped (a person
//                removed from a room keeps no copy of it on this device), it is no longer
//                synced, and the room list is read again (it leaves the sidebar).
//   UNAVAILABLE: the copy and the cursor are kept, and the room is asked for again later, with
//                growing waits (so is every room of a request that failed; a refused cursor,
//                400, makes its rooms sync again from the beginning).
//
// A change carries the message's current state without its companion data; merged into the
// held copy (which keeps its reactions) it is an upsert like any other. A deleted message is a
// tombstone: no text, no reactions, no files.

import { backoff } from "./api.js";

const PER_REQUEST = 100;
const HINT_DELAY_MS = 150;
/** Pages of the open room read again after a reconnect at most (of 100 messages each). */
const REFRESH_PAGES = 3;

/**
 * The page's shape of a message, from a change of the feed: the fields the feed carries (its
 * current state). Merged over a held copy, it keeps that copy's companion data (reactions,
 * pins, previews); a tombstone has none.
 */
export function fromChange(roomId, change) {
  const m = change.message;
  const deleted = m.isDeleted;
  return {
    id: m.id,
    roomId,
    type: m.type,
    authorId: m.authorId,
    authorName: m.authorName,
    // A feed from a server before `origin` leaves the held copy's.
    ...(m.origin ? { origin: m.origin } : {}),
    text: m.text ?? "",
    createdAt: m.sentAt,
    version: Number(change.version),
    editedAt: change.editedAt ?? undefined,
    // The feed says whether, not when: the time of the change's version is not known here.
    deletedAt: deleted ? (change.editedAt ?? m.sentAt) : undefined,
    moderated: m.moderated,
    replyTo: m.replyTo ?? undefined,
    threadId: m.threadId ?? undefined,
    attachments: m.attachments ?? [],
    ...(deleted ? { reactions: [], poll: undefined } : {}),
  };
}

/** A change over the held copy of its message: the change's fields, the copy's companion data
 *  (an attachment's `image`, its thumbnail, included). The store and the cache merge alike. */
export function merged(held, m) {
  const out = { ...held, ...m };
  if (held?.attachments?.length && m.attachments) {
    out.attachments = m.attachments.map((a) => ({ ...held.attachments.find((h) => h.id === a.id), ...a }));
  }
  return out;
}

export function createCatchUp({ api, store, bus, cache, timeline, rooms }) {
  const serverId = globalThis.TABLETALK?.serverId ?? "default";
  /** Rooms answered NO_ACCESS: not synced again until they are listed again. */
  const gone = new Set();
  let running = null;
  const queued = new Set();
  const deferred = new Set();
  let refreshOpen = false;
  let retries = 0;
  let retryTimer = null;
  const hintTimers = new Map();

  /** Applies a room's gathered changes to the page's store, if it holds the room. */
  function applyToStore(roomId, changes) {
    const t = store.timeline(roomId);
    if (!t.loaded || !changes.length) return;
    const oldest = t.order[0];
    const newest = t.order[t.order.length - 1];
    // The loaded run is a contiguous stretch of the room, from its oldest message to the live
    // end (or to its newest, after a jump into the past). The feed holds every change since
    // the cursor, so a message inside that stretch fills it (or updates a held one); an older
    // one stays in the cache only, so the run stays contiguous (scroll-back reads it by
    // cursor). Ids are reverse ticks: a smaller id is newer.
    const inside = (id) => !oldest || (id < oldest && (!t.hasNewer || id > newest));
    const take = changes.filter((m) => t.byId.has(m.id) || inside(m.id)).map((m) => merged(t.byId.get(m.id), m));
    if (take.length) store.upsertMessages(roomId, take);
  }

  /** One pass of the algorithm over `roomIds`; returns the rooms that could not be read. */
  async function pass(roomIds) {
    const ask = new Map();
    for (const id of roomIds) if (!gone.has(id)) ask.set(id, await cache.cursor(id));
    const gathered = new Map();
    const reset = new Set();
    const unavailable = new Set();
    while (ask.size) {
      const batch = [...ask].slice(0, PER_REQUEST);
      // A read: safe to repeat, so the API's retries of a network failure apply.
      const reply = await api.request(
        "POST",
        "/api/messageChanges",
        { input: { serverId, conversations: batch.map(([conversationId, after]) => ({ conversationId, after })) } },
        { retries: 2 },
      );
      for (const entry of reply.messageChanges) {
        const roomId = entry.conversationId;
        ask.delete(roomId);
        if (entry.status === "NO_ACCESS") {
          gone.add(roomId);
          gathered.delete(roomId);
          await cache.drop(roomId);
          store.resetTimeline(roomId);
          bus.emit("history:no-access", { roomId });
          continue;
        }
        if (entry.status === "UNAVAILABLE") {
          unavailable.add(roomId);
          continue;
        }
        if (entry.status === "RESET") {
          await cache.drop(roomId);
          reset.add(roomId);
          gathered.set(roomId, new Map());
        }
        const held = gathered.get(roomId) ?? new Map();
        gathered.set(roomId, held);
        const messages = entry.changes.map((change) => fromChange(roomId, change));
        await cache.record(roomId, messages, entry.cursor);
        for (const m of messages) held.set(m.id, m);
        if (entry.hasMore) ask.set(roomId, entry.cursor);
      }
    }
    for (const [roomId, changes] of gathered) {
      if (reset.has(roomId)) {
        // The copy in memory may hold what the server no longer has: read the room afresh.
        store.resetTimeline(roomId);
        if (timeline.roomId === roomId) await timeline.open(roomId);
        bus.emit("history:reset", { roomId });
        continue;
      }
      applyToStore(roomId, [...changes.values()]);
    }
    bus.emit("history:caught-up", { roomIds: [...roomIds] });
    return unavailable;
  }

  /** Reads the open room's messages on screen again: their reactions, pins and previews. */
  async function refreshShown() {
    const roomId = timeline.roomId;
    if (!roomId) return;
    const t = store.timeline(roomId);
    if (!t.loaded) return;
    const shown = [...document.querySelectorAll("#messages [data-message-id]")].map((el) => el.dataset.messageId);
    if (!shown.length) return;
    const oldest = shown.reduce((a, b) => (a > b ? a : b));
    if (t.hasNewer) {
      const page = await api.readAround(roomId, shown[Math.floor(shown.length / 2)], 100);
      if (timeline.roomId === roomId) store.upsertMessages(roomId, page.messages.filter((m) => t.byId.has(m.id)));
      return;
    }
    let cursor;
    for (let pages = 0; pages < REFRESH_PAGES; pages++) {
      const page = await api.readMessages(roomId, { cursor, limit: 100 });
      if (timeline.roomId !== roomId) return;
      // Held ones get their companion data; the page is the newest stretch of the room, so
      // what is not older than the run's oldest message belongs in the run.
      const oldestHeld = store.timeline(roomId).order[0];
      store.upsertMessages(roomId, page.messages.filter((m) => !oldestHeld || m.id <= oldestHeld));
      if (!page.hasMore || page.messages.some((m) => m.id >= oldest)) return;
      cursor = page.nextCursor;
    }
  }

  async function drain() {
    while (queued.size) {
      const roomIds = [...queued];
      queued.clear();
      const refresh = refreshOpen;
      refreshOpen = false;
      try {
        const unavailable = await pass(roomIds);
        if (refresh) await refreshShown();
        retries = 0;
        if (unavailable.size) later(unavailable, false);
      } catch (e) {
        // A cursor the server refuses (VALIDATION: not one it issued for that room) cannot
        // get better: those rooms sync again from the beginning.
        if (e.status === 400) for (const id of roomIds) await cache.drop(id);
        // Otherwise the request failed (the network went again): ask again later.
        later(roomIds, refresh);
      }
    }
  }

  /** Rooms asked for again after a wait that grows with each failure in a row (with jitter). */
  function later(roomIds, refresh) {
    for (const id of roomIds) deferred.add(id);
    refreshOpen ||= refresh;
    if (retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      for (const id of deferred) queued.add(id);
      deferred.clear();
      kick();
    }, backoff(retries++, 1000, 30000));
  }

  function kick() {
    if (running) return running;
    running = drain().finally(() => {
      running = null;
      // Asked for while the last pass ran.
      if (queued.size && !retryTimer) kick();
    });
    return running;
  }

  /** Catches up `roomIds`; resolves when they (and whatever was asked for meanwhile) are done. */
  function catchUp(roomIds, { refresh = false } = {}) {
    for (const id of roomIds) queued.add(id);
    refreshOpen ||= refresh;
    return kick();
  }

  async function followed() {
    const ids = new Set((await cache.rooms()).map((r) => r.roomId));
    if (timeline.roomId) ids.add(timeline.roomId);
    return [...ids];
  }

  // A live signal about a message is a hint: record the change at its version, soon (the
  // signals of a burst are asked for together).
  const hint = ({ roomId }) => {
    if (!roomId || gone.has(roomId) || hintTimers.has(roomId)) return;
    hintTimers.set(
      roomId,
      setTimeout(() => {
        hintTimers.delete(roomId);
        catchUp([roomId]);
      }, HINT_DELAY_MS),
    );
  };
  for (const type of ["message.created", "message.updated", "message.deleted"]) bus.on(`live:${type}`, hint);

  // Every message the page learns goes into the cache (by version; the cursor stays).
  bus.on("timeline:changed", ({ roomId, changed }) => {
    if (changed?.length && !gone.has(roomId)) cache.put(roomId, changed);
  });
  bus.on("room:open", ({ roomId }) => {
    gone.delete(roomId);
    cache.cursor(roomId).then((cursor) => cursor === null && catchUp([roomId]));
  });
  // After the server knows what this connection views: a reconnect catches up every followed
  // room; a first connection the open room, which may have been read before the view.
  bus.on("live:viewing", async ({ reconnected, roomId }) => {
    if (reconnected) catchUp(await followed(), { refresh: true });
    else if (roomId) catchUp([roomId]);
  });
  bus.on("history:no-access", () => rooms.reload().catch(() => {}));

  return {
    catchUp,
    /** Catches up every followed room (what a reconnect does), then reads the open room again. */
    async all() {
      return catchUp(await followed(), { refresh: true });
    },
    /** Resolves once no pass is running or queued (for tests). */
    async settled() {
      while (running || queued.size || deferred.size) await (running ?? new Promise((r) => setTimeout(r, 50)));
    },
    async start() {
      const ids = await followed();
      if (ids.length) catchUp(ids);
    },
  };
}
