// A small event bus: the modules talk through it instead of importing each other, so a new
// module (the offline cache, push, threads…) listens to what is already said without changing
// its sayers. Names in use: "live:<signal type>" (live.js: every signal the server sends, with
// its data), "live:status" ({state: connecting|connected|reconnecting|stopped}), "live:connected"
// ({connectionId, reconnected}), "room:open" ({roomId, messageId?}), "rooms:changed",
// "timeline:changed" ({roomId}), "receipts:changed" ({roomId}), "typing:changed" ({roomId}),
// "members:changed" ({roomId}).
// The history cache and catch-up (catch_up.js) add "room:opening" ({roomId, messageId?}: said
// before the timeline reads a room), "history:caught-up" ({roomIds}), "history:reset" and
// "history:no-access" ({roomId}).

export function createBus() {
  const listeners = new Map();
  return {
    /** Calls `fn(payload)` for each `type` said from now on; returns the unsubscribe. */
    on(type, fn) {
      if (!listeners.has(type)) listeners.set(type, new Set());
      listeners.get(type).add(fn);
      return () => listeners.get(type)?.delete(fn);
    },
    /** Says `type`; a listener that throws is reported and does not stop the others. */
    emit(type, payload) {
      for (const fn of listeners.get(type) ?? []) {
        try {
          fn(payload);
        } catch (e) {
          // A bug in one listener must not break the live connection or the others.
          console.warn(`listener of ${type} failed`, e);
        }
      }
    },
  };
}
