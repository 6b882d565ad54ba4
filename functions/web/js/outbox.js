// Sending safely: each send gets a clientId made here and
// shows at once as a pending entry. It is sent, and sent again with the SAME clientId after
// growing waits (with jitter) while the answer is a network failure or "try again" (429/5xx) —
// the server stores one message per clientId, so a repeat answers with the first one. The entry
// is immutable, so what is sent again is always the text first sent; to change it the person
// discards the entry and writes anew (a new clientId). While the browser is offline the next
// try waits for it to come back. The stored message replaces the entry (store.js matches the
// clientId), whether it comes in the answer or first through the live connection.
// A refusal (4xx) stops the retries: the entry shows the reason, and Retry or Discard.

import { backoff } from "./api.js";

const online = () =>
  navigator.onLine ? Promise.resolve() : new Promise((r) => addEventListener("online", r, { once: true }));

export function createOutbox({ api, store }) {
  async function deliver(roomId, entry) {
    for (let attempt = 0; ; attempt++) {
      if (!store.pending(roomId).includes(entry)) return; // discarded
      await online();
      try {
        const body = { text: entry.text, clientId: entry.clientId };
        if (entry.replyTo) body.replyTo = entry.replyTo;
        // More of the body (attachments; a poll's type and poll); a field set to undefined
        // leaves it out (a poll has no text: its entry's `text` is only what the entry shows).
        if (entry.fields) Object.assign(body, entry.fields);
        const message = await api.createMessage(roomId, body);
        store.upsertMessages(roomId, [message]);
        store.removePending(roomId, entry.clientId);
        return;
      } catch (e) {
        if (!e.transient) {
          store.updatePending(roomId, entry.clientId, { state: "failed", error: e.message });
          return;
        }
        store.updatePending(roomId, entry.clientId, { state: "retrying", attempts: attempt + 1 });
        await new Promise((r) => setTimeout(r, backoff(attempt, 1000, 30000)));
      }
    }
  }

  return {
    /** Shows `text` (HTML) as pending in `roomId` and sends it until stored or refused. */
    send(roomId, { text, replyTo, author, fields }) {
      const entry = Object.freeze({
        clientId: crypto.randomUUID(),
        text,
        replyTo: replyTo ?? null,
        fields: fields ? Object.freeze({ ...fields }) : null,
        author,
        createdAt: new Date().toISOString(),
      });
      store.addPending(roomId, { ...entry, state: "sending", attempts: 0, error: null });
      const held = store.pending(roomId).find((p) => p.clientId === entry.clientId);
      deliver(roomId, held);
      return entry.clientId;
    },
    /** A failed entry tried again: same clientId, same text. */
    retry(roomId, clientId) {
      const entry = store.updatePending(roomId, clientId, { state: "sending", error: null });
      if (entry) deliver(roomId, entry);
    },
    discard(roomId, clientId) {
      store.removePending(roomId, clientId);
    },
  };
}
