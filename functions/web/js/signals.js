// What each live signal does to the store. One handler per signal type, registered on the
// bus (`live:<type>`, said by live.js); a new signal gets its handler the same way:
//
//   bus.on("live:message.voted", (data) => …);
//
// Signals are hints (the wire never becomes a second copy of state): a signal
// that carries a message is upserted by version; a nudge (a reaction, a pin, a vote, a
// preview) re-reads the message, whose companion data changed without a new version.

import { tombstone } from "./store.js";

const TYPING_SHOWN_MS = 6000;

export function handleSignals({ api, store, bus, me, rooms }) {
  // A message from someone the page has not seen in the room yet (a new member's first
  // line is the server's join line), or under another name than the list says (a rename):
  // the member list, which mentions suggest from and names are shown from, is old. Read
  // again once per name a message carries, so a name the list never shows costs one read.
  const refreshing = new Set();
  const refreshedFor = new Set();
  const knowAuthor = (roomId, authorId, authorName) => {
    // A webhook's messages have an author that is never a member: nothing to refresh.
    if (!authorId || authorId.startsWith("webhook:") || refreshing.has(roomId)) return;
    const member = store.members(roomId).get(authorId);
    const named = `${roomId}|${authorId}|${authorName}`;
    if (member && (!authorName || (member.nickname || member.name) === authorName || refreshedFor.has(named))) return;
    if (member) refreshedFor.add(named);
    refreshing.add(roomId);
    api
      .listMembers(roomId)
      .then((m) => store.setMembers(roomId, m), () => {})
      .finally(() => refreshing.delete(roomId));
  };
  const upsert = ({ roomId, message }) => {
    if (!message) return;
    store.upsertMessages(roomId, [message]);
    knowAuthor(roomId, message.authorId, message.authorName);
    store.stopTyping(roomId, message.authorId);
    const room = store.rooms.get(roomId);
    if (room && message.createdAt > room.lastActivityAt) {
      store.patchRoom(roomId, {
        lastActivityAt: message.createdAt,
        lastMessage: { messageId: message.id, authorId: message.authorId, authorName: message.authorName },
      });
    }
  };
  const reread = async ({ roomId, messageId }) => {
    if (!store.message(roomId, messageId)) return;
    try {
      store.upsertMessages(roomId, [await api.getMessage(roomId, messageId)]);
    } catch {
      // Gone or unreachable: the next read or catch-up shows its state.
    }
  };

  bus.on("live:message.created", upsert);
  bus.on("live:message.updated", upsert);
  bus.on("live:message.deleted", ({ roomId, messageId, moderated }) => {
    const held = store.message(roomId, messageId);
    if (!held) return;
    store.upsertMessages(roomId, [tombstone(held, moderated)]);
  });
  for (const nudge of ["message.reacted", "message.pinned", "message.voted", "message.previewed"]) {
    bus.on(`live:${nudge}`, reread);
  }
  bus.on("live:typing", ({ roomId, userId, userName }) => {
    if (userId === me.userId) return;
    store.setTyping(roomId, userId, userName, Date.now() + TYPING_SHOWN_MS);
    setTimeout(() => bus.emit("typing:changed", { roomId }), TYPING_SHOWN_MS + 50);
  });
  bus.on("live:read", ({ roomId, userId, upTo }) => store.setReceipt(roomId, userId, upTo));
  bus.on("live:room.activity", ({ roomId, unreadCount, unreadCapped, mentionCount }) => {
    const known = store.patchRoom(roomId, {
      unreadCount,
      unreadCapped,
      mentionCount,
      lastActivityAt: new Date().toISOString(),
    });
    // A room this page has not listed yet (a new direct conversation, an invitation
    // accepted elsewhere): list the rooms again.
    if (!known) rooms.reload();
  });
}
