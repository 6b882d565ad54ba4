//! Stage 2 of the one door: the durable write.
//!
//! The message row, its change-feed row, its idempotency record, its thread index row and
//! (when events are published) its outbox event go in one entity-group transaction with the
//! room's version counter (`store::ledger`); alongside it, in the same round trip, go the
//! ascending index row at the message's tick and the sender's read position. The message row
//! is inserted, never overwritten: a 409 on it means another send, in this process or
//! another, took the tick, and the send takes the next one. If the transaction fails, the
//! index row this send created is deleted again (on its own version, so a row re-written for
//! another send's message at that tick stays), so a failed send leaves nothing readable —
//! unless the store cannot tell whether it committed: a message that may be stored keeps its
//! index row. A stored message whose index row could not be written, or was found already
//! there, writes it again (an upsert of a key-only row).

use super::Sending;
use super::publish::Committed;
use crate::error::{Error, Result};
use crate::events::MessageEvent;
use crate::ids::{RoomId, UserId};
use crate::keys::{MessageKey, Ticks};
use crate::members::Member;
use crate::messages::Message;
use crate::messages::send::Post;
use crate::store::messages::{IndexRow, Inserted, NotInserted};
use crate::store::stored_time;

/// Ticks tried before a send gives up on finding a free one. Each collision means another send
/// took that exact 100 ns tick, so even a handful in a row is extraordinary.
const MAX_TICK_ATTEMPTS: usize = 64;

/// Writes of a stored message's index row tried before it is given up (and logged).
const INDEX_ROW_ATTEMPTS: usize = 3;

/// What admission read that the write depends on.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Prefetched {
    /// The room stamp of the kept copy of the room row admission used
    /// (`RoomAccess::access_for_send`): the message commits only under it. None when admission
    /// read the row itself, or read none (a server line; a webhook's message, whose row the
    /// caller read).
    pub(super) room_stamp: Option<u64>,
}

/// How a commit ended.
pub(super) enum Stored {
    /// This send stored its message.
    New(Committed),
    /// A concurrent attempt of the same send (the same client id) stored its message first.
    Repeat(Message),
    /// The room row changed since admission read it: nothing was stored; admit it again.
    RoomChanged,
}

impl Sending {
    /// Stores `post` as a new message of `room` at the next free tick.
    pub(super) async fn commit(&self, room: &RoomId, post: Post, known: Prefetched) -> Result<Stored> {
        let mut ticks = self.ticks.at(self.time.now());
        let client = post.idempotency.as_ref().map(|(user, client_id)| (user, client_id));
        let replier = post.reader.as_ref().filter(|_| post.thread_id.is_some());
        let mut outbox_marked = false;
        for _ in 0..MAX_TICK_ATTEMPTS {
            let mut message = post.message_at(room, ticks.message_key(), stored_time(ticks.to_datetime()));
            // The notification event commits with the message (the outbox), so it cannot be lost.
            let event = match self.outbox.publishes_events() {
                true => MessageEvent::of(&message).map(|mut event| {
                    // Never for a webhook's or an automation's message: nothing can loop.
                    event.automation =
                        self.automation.is_some() && post.public_room && message.origin.triggers_automations();
                    event
                }),
                false => None,
            };
            if event.is_some() && !outbox_marked {
                self.store.outbox.mark_outbox(room).await?;
                outbox_marked = true;
            }
            let insert = self.store.messages.insert_message(
                room,
                &message,
                client,
                event.as_ref(),
                replier,
                known.room_stamp,
                post.counted.as_ref(),
            );
            let index = self.store.messages.insert_index_row(room, ticks);
            // The index row and the sender's read position are written alongside the message's
            // transaction, not before or after it, so they add no round trip to the send.
            // Moved for a send that then fails, the position only marks read what its sender
            // had seen anyway.
            let (index, inserted) = match &post.reader {
                Some(reader) => {
                    let key = ticks.message_key();
                    let known = post.reader_row.as_ref();
                    let (index, inserted, ()) =
                        tokio::join!(index, insert, self.move_read_position(room, reader, known, &key));
                    (index, inserted)
                }
                None => tokio::join!(index, insert),
            };
            match inserted {
                Ok(Inserted::Committed(version)) => {
                    message.version = version;
                    self.settle_index_row(room, ticks, index).await;
                    return Ok(Stored::New(Committed {
                        room: room.clone(),
                        message,
                        event,
                        replier: replier.cloned(),
                    }));
                }
                // Another send took the tick: its message keeps the index row, and this one
                // takes the next tick.
                Ok(Inserted::TickTaken) => ticks = ticks.next(),
                Ok(Inserted::RoomChanged) => {
                    if let Ok(row) = index {
                        self.store.messages.release_index_row(room, ticks, row).await;
                    }
                    return Ok(Stored::RoomChanged);
                }
                // A concurrent retry with the same client id stored its message first: answer
                // with that one, as for any repeat.
                Ok(Inserted::ClientIdTaken) => {
                    if let Ok(row) = index {
                        self.store.messages.release_index_row(room, ticks, row).await;
                    }
                    if let Some((user, client_id)) = client
                        && let Some(first) = self.store.messages.sent_with_client_id(room, user, client_id).await?
                    {
                        return Ok(Stored::Repeat(first));
                    }
                    return Err(Error::Internal(format!(
                        "the idempotency record of a send in {room} names no message"
                    )));
                }
                Err(NotInserted { may_be_stored, error }) => {
                    match (may_be_stored, index) {
                        (false, Ok(row)) => self.store.messages.release_index_row(room, ticks, row).await,
                        (false, Err(_)) => {}
                        // A message that may be stored keeps (or gets) its index row: without
                        // one it would be hidden from oldest-first reads for good.
                        (true, Ok(IndexRow::Created(_))) => {}
                        (true, _) => {
                            if let Err(e) = self.store.messages.ensure_index_row(room, ticks).await {
                                tracing::warn!(%room, error = %e, "a message that may be stored has no index row");
                            }
                        }
                    }
                    return Err(error);
                }
            }
        }
        Err(Error::Unavailable("no free message key; try again".into()))
    }

    /// A stored message's index row, once its transaction committed: nothing more when this
    /// send created it; written again when it was there already (a failed send at the same
    /// tick may be releasing it) or could not be written.
    async fn settle_index_row(
        &self,
        room: &RoomId,
        ticks: Ticks,
        index: std::result::Result<IndexRow, crate::store::error::Error>,
    ) {
        if let Ok(IndexRow::Created(_)) = index {
            return;
        }
        let mut last = None;
        for _ in 0..INDEX_ROW_ATTEMPTS {
            match self.store.messages.ensure_index_row(room, ticks).await {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            tracing::error!(%room, error = %e, "a stored message has no index row; oldest-first reads miss it");
        }
    }

    /// Moves `reader`'s read position forward to `key` (`MemberStore::move_read_position`). A
    /// side effect of the send: a failure is logged, never returned.
    async fn move_read_position(&self, room: &RoomId, reader: &UserId, known: Option<&Member>, key: &MessageKey) {
        if let Err(e) = self.store.members.move_read_position(room, reader, known, key).await {
            tracing::warn!(%room, error = %e, "could not move a sender's read position");
        }
    }
}
