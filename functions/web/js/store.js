// The page's state in memory: the rooms, each room's loaded messages keyed by message id, its
// members, read positions (receipts), who is typing, and the sends not yet stored (the outbox's
// pending entries). It holds data and the rules of merging it — nothing here draws or fetches.
//
// Merging messages (docs/CATCHUP.md): an upsert keyed by message id keeps the copy with the
// higher `version`. Reactions, pins and link previews are companion data that do not bump the
// version, so a copy of the SAME version replaces the held one too (it was read later).
// Message ids are 19-digit reverse ticks: a newer message has a smaller id, so ids compare as
// strings and "oldest first" is descending id order.

/** Oldest first. */
export const byAge = (a, b) => (a === b ? 0 : a > b ? -1 : 1);

/** A message as deleted, at the next version: the stored tombstone (read later) has at least it. */
export function tombstone(held, moderated = false) {
  return { ...held, text: "", reactions: [], attachments: [], deletedAt: new Date().toISOString(), moderated, version: held.version + 1 };
}

export function createStore(bus) {
  const rooms = new Map();
  const timelines = new Map();
  const members = new Map();
  const receipts = new Map();
  const typing = new Map();
  const pending = new Map();

  function timeline(roomId) {
    if (!timelines.has(roomId)) {
      timelines.set(roomId, {
        byId: new Map(),
        /** Loaded message ids, oldest first; a contiguous run of the room's history. */
        order: [],
        loaded: false,
        hasOlder: false,
        olderCursor: null,
        /** Set after a jump into the past: newer pages remain before the live end. */
        hasNewer: false,
        newerCursor: null,
      });
    }
    return timelines.get(roomId);
  }

  /** Keeps `message` unless a newer version is held; returns whether anything changed. */
  function put(t, message) {
    const held = t.byId.get(message.id);
    if (held && held.version > message.version) return false;
    t.byId.set(message.id, message);
    if (!held) t.order.push(message.id);
    return true;
  }

  return {
    rooms,
    timeline,

    setRooms(list) {
      rooms.clear();
      for (const room of list) rooms.set(room.id, room);
      bus.emit("rooms:changed");
    },
    /** Merges `changes` into a room's entry (its counts, activity time…). */
    patchRoom(roomId, changes) {
      const room = rooms.get(roomId);
      if (!room) return false;
      Object.assign(room, changes);
      bus.emit("rooms:changed");
      return true;
    },
    /** Rooms newest activity first. */
    roomsByActivity() {
      return [...rooms.values()].sort((a, b) => (a.lastActivityAt < b.lastActivityAt ? 1 : -1));
    },

    /** Upserts messages (by version) into a room's loaded run; returns the changed ones. */
    upsertMessages(roomId, messages) {
      const t = timeline(roomId);
      const changed = messages.filter((m) => put(t, m));
      if (changed.length) {
        t.order.sort(byAge);
        // A stored message replaces its optimistic entry (matched by clientId).
        const list = pending.get(roomId);
        if (list) {
          const ids = new Set(changed.map((m) => m.clientId).filter(Boolean));
          pending.set(roomId, list.filter((p) => !ids.has(p.clientId)));
        }
        bus.emit("timeline:changed", { roomId, changed });
      }
      return changed;
    },
    message(roomId, id) {
      return timelines.get(roomId)?.byId.get(id);
    },
    /** Forgets a room's loaded run (before loading another, e.g. around a permalink). */
    resetTimeline(roomId) {
      timelines.delete(roomId);
    },

    setMembers(roomId, list) {
      members.set(roomId, new Map(list.map((m) => [m.userId, m])));
      bus.emit("members:changed", { roomId });
    },
    members(roomId) {
      return members.get(roomId) ?? new Map();
    },

    setReceipts(roomId, list) {
      receipts.set(roomId, new Map(list.map((r) => [r.userId, r.upTo])));
      bus.emit("receipts:changed", { roomId });
    },
    /** A read position moved; positions only move forward here (smaller id = newer). */
    setReceipt(roomId, userId, upTo) {
      if (!receipts.has(roomId)) receipts.set(roomId, new Map());
      const held = receipts.get(roomId).get(userId);
      if (held && held <= upTo) return;
      receipts.get(roomId).set(userId, upTo);
      bus.emit("receipts:changed", { roomId });
    },
    /** Who other than `me` has read `messageId` (their position is at or before it). */
    seenBy(roomId, messageId, me) {
      const seen = [];
      for (const [userId, upTo] of receipts.get(roomId) ?? []) {
        if (userId !== me && messageId >= upTo) seen.push(userId);
      }
      return seen;
    },

    /** Someone is typing in a room until `until` (ms since epoch). */
    setTyping(roomId, userId, name, until) {
      if (!typing.has(roomId)) typing.set(roomId, new Map());
      typing.get(roomId).set(userId, { name, until });
      bus.emit("typing:changed", { roomId });
    },
    stopTyping(roomId, userId) {
      if (typing.get(roomId)?.delete(userId)) bus.emit("typing:changed", { roomId });
    },
    typing(roomId, now = Date.now()) {
      return [...(typing.get(roomId) ?? new Map()).entries()].filter(([, t]) => t.until > now);
    },

    pending(roomId) {
      return pending.get(roomId) ?? [];
    },
    addPending(roomId, entry) {
      pending.set(roomId, [...this.pending(roomId), entry]);
      bus.emit("timeline:changed", { roomId, changed: [] });
    },
    updatePending(roomId, clientId, changes) {
      const entry = this.pending(roomId).find((p) => p.clientId === clientId);
      if (entry) Object.assign(entry, changes);
      bus.emit("timeline:changed", { roomId, changed: [] });
      return entry;
    },
    removePending(roomId, clientId) {
      pending.set(roomId, this.pending(roomId).filter((p) => p.clientId !== clientId));
      bus.emit("timeline:changed", { roomId, changed: [] });
    },
  };
}
