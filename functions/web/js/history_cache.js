// The history cache (docs/CATCHUP.md): every message the page learns, kept in IndexedDB keyed by
// room and message id, so a reload shows a room's history before the network answers and a
// reconnect asks the change feed only for what changed. One database per signed-in user
// (IndexedDB is shared by the origin's tabs, and two tabs may be two people).
//
// Two object stores:
//   messages  key [roomId, id]: the message as the page draws it (the API's Message shape)
//   rooms     key roomId: {roomId, cursor} — the cursor the change feed last returned for it.
//
// Writes are upserts by version: a held copy with a HIGHER version is kept; one of the same
// version is replaced (reactions and previews are companion data read later without a new
// version, as store.js does). Only the change feed (catch_up.js) moves a room's cursor: a
// message read or pushed live is stored, but the feed still has to say the room is complete
// up to a point, so a missed signal never leaves the cache behind.
//
// Signing out deletes the user's database: a shared device keeps no one's history after it.
//
// Every method resolves even when IndexedDB is missing or refuses (a private window, a full
// disk): the cache is a speed-up and never a reason for the page to fail.

import { merged } from "./catch_up.js";

const VERSION = 1;

function promised(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = tx.onerror = () => reject(tx.error);
  });
}

/** The key range of one room's messages. */
const roomRange = (roomId) => IDBKeyRange.bound([roomId, ""], [roomId, "\uffff"]);

export function openHistoryCache(userId) {
  const opening = new Promise((resolve) => {
    if (!globalThis.indexedDB) return resolve(null);
    const request = indexedDB.open(`tabletalk-history-${userId}`, VERSION);
    request.onupgradeneeded = () => {
      const db = request.result;
      if (!db.objectStoreNames.contains("messages")) db.createObjectStore("messages", { keyPath: ["roomId", "id"] });
      if (!db.objectStoreNames.contains("rooms")) db.createObjectStore("rooms", { keyPath: "roomId" });
    };
    request.onsuccess = () => {
      // Another tab deleting the database (a sign-out there) must not wait for this one.
      request.result.onversionchange = () => request.result.close();
      resolve(request.result);
    };
    request.onerror = () => {
      console.warn("the history cache is unavailable", request.error);
      resolve(null);
    };
    request.onblocked = () => resolve(null);
  });

  /** Runs `work(tx)` in one transaction; resolves with its value, or `fallback` without a cache. */
  async function within(stores, mode, work, fallback) {
    const db = await opening;
    if (!db) return fallback;
    try {
      const tx = db.transaction(stores, mode);
      const value = await work(tx);
      await done(tx);
      return value;
    } catch (e) {
      console.warn("the history cache refused a request", e);
      return fallback;
    }
  }

  return {
    /** Upserts `messages` of `roomId` by version; resolves with the ones written. */
    put(roomId, messages) {
      if (!messages.length) return Promise.resolve([]);
      return within(["messages"], "readwrite", async (tx) => {
        const store = tx.objectStore("messages");
        const held = await Promise.all(messages.map((m) => promised(store.get([roomId, m.id]))));
        const written = [];
        messages.forEach((m, i) => {
          if (held[i] && held[i].version > m.version) return;
          store.put({ ...m, roomId });
          written.push(m);
        });
        return written;
      }, []);
    },
    /** A room's cached messages, oldest first (ids are reverse ticks: larger is older). */
    async messages(roomId) {
      const all = await within(["messages"], "readonly", (tx) => promised(tx.objectStore("messages").getAll(roomRange(roomId))), []);
      return all.sort((a, b) => (a.id === b.id ? 0 : a.id > b.id ? -1 : 1));
    },
    message(roomId, id) {
      return within(["messages"], "readonly", (tx) => promised(tx.objectStore("messages").get([roomId, id])), undefined);
    },
    /** The rooms the cache follows, with their cursors: [{roomId, cursor}]. */
    rooms() {
      return within(["rooms"], "readonly", (tx) => promised(tx.objectStore("rooms").getAll()), []);
    },
    async cursor(roomId) {
      const row = await within(["rooms"], "readonly", (tx) => promised(tx.objectStore("rooms").get(roomId)), undefined);
      return row?.cursor ?? null;
    },
    /**
     * Records what the feed returned for `roomId`: its changes (upserted, merged over the held
     * copies) and its cursor, in one transaction, so the cursor never runs ahead of the copy.
     */
    record(roomId, messages, cursor) {
      return within(["messages", "rooms"], "readwrite", async (tx) => {
        const store = tx.objectStore("messages");
        const held = await Promise.all(messages.map((m) => promised(store.get([roomId, m.id]))));
        // A change carries no companion data: merged over the held copy, that copy's stays.
        messages.forEach((m, i) => {
          if (!held[i] || held[i].version <= m.version) store.put({ ...merged(held[i], m), roomId });
        });
        tx.objectStore("rooms").put({ roomId, cursor });
      }, undefined);
    },
    /** Forgets everything of this user on this device (sign-out): the whole database. */
    async forget() {
      const db = await opening;
      db?.close();
      if (globalThis.indexedDB) indexedDB.deleteDatabase(`tabletalk-history-${userId}`);
    },
    /** Forgets a room: its messages and its cursor (RESET, NO_ACCESS). */
    drop(roomId) {
      return within(["messages", "rooms"], "readwrite", async (tx) => {
        tx.objectStore("messages").delete(roomRange(roomId));
        tx.objectStore("rooms").delete(roomId);
      }, undefined);
    },
  };
}
