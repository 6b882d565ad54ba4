//! The outbox: a send records its notification event in the same entity group transaction as
//! the message (`outbox:<message id>` in the room's `Messages` partition), so no event can be
//! lost between the durable write and its publication. After the write the event is
//! published — to the Event Grid topic when one is configured (accepted means the topic took
//! it), else straight to the in-process notification consumer — and its row is deleted once
//! accepted. A timer (`republishEvents` on Azure) republishes rows older than a few seconds; the
//! consumer is idempotent per event id, so a republished event that had in fact been handled
//! pushes nothing twice. A delivery the consumer answered before its fan-out ended records the
//! event here again (`outbox:<message id>:fanout`) until the pushes are done, so a run that
//! dies still gets its event republished; the timer skips an event whose claim a live run
//! holds, and drops the row of one already done.
//!
//! The timer finds pending rows through markers in `Housekeeping`'s `outbox` partition, one
//! per room that may hold pending events, so a run costs in rooms with pending events, never in
//! messages stored. A marker is written before a send's transaction (at most every
//! [`MARK_REFRESH`] per room and process), and removed by the timer only once its room has no
//! pending row and it is older than [`MARK_EXPIRY`] — longer than any process trusts its own
//! note of having written it.

use super::Chat;
use crate::error::Result;
use crate::events::MessageEvent;
use crate::ids::RoomId;
use crate::notify::NotificationState;
use crate::outbox::{MARK_EXPIRY, REPUBLISH_AFTER};
use crate::store::outbox::{Marker, event_row_key};
use chrono::{DateTime, Utc};

impl Chat {
    /// Hands a committed event to its consumer — in the background, or before returning where
    /// the process may be frozen once it answers (Lambda) — and clears its outbox row once
    /// accepted; a failure leaves the row for the timer.
    pub(crate) async fn dispatch(&self, room: &RoomId, event: MessageEvent) {
        if self.inline_events {
            if let Err(e) = self.publish(room, &event, &event_row_key(&event)).await {
                tracing::warn!(event = %event.id, error = %e, "an event was not published; it waits in the outbox");
            }
            return;
        }
        let (chat, room) = (self.clone(), room.clone());
        tokio::spawn(async move {
            if let Err(e) = chat.publish(&room, &event, &event_row_key(&event)).await {
                tracing::warn!(event = %event.id, error = %e, "an event was not published; the timer will retry");
            }
        });
    }

    /// Whether sends record events: when something consumes them (push here, or whatever
    /// the Event Grid topic delivers to).
    pub(crate) fn publishes_events(&self) -> bool {
        self.events.is_some()
    }

    /// Publishes one event and deletes its outbox row (`row_key`).
    async fn publish(&self, room: &RoomId, event: &MessageEvent, row_key: &str) -> Result<()> {
        if let Some(events) = &self.events {
            events.publish(event).await?;
        }
        self.store.clear_pending(room, row_key).await
    }

    /// The timer's part: republishes every event pending longer than [`REPUBLISH_AFTER`] and
    /// drops markers of rooms with nothing pending. Returns the events republished.
    pub async fn republish(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut republished = 0;
        for marker in self.store.outbox_markers().await? {
            match self.republish_room(&marker, now).await {
                Ok(n) => republished += n,
                Err(e) => tracing::warn!(room = %marker.room, error = %e, "republishing a room's events failed"),
            }
        }
        Ok(republished)
    }

    async fn republish_room(&self, marker: &Marker, now: DateTime<Utc>) -> Result<usize> {
        let room = &marker.room;
        let pending = self.store.pending_events(room).await?;
        let mut republished = 0;
        // One event that keeps failing never holds up the room's others.
        for row in &pending {
            if row.created_at.is_some_and(|at| now - at < REPUBLISH_AFTER) {
                continue;
            }
            let Some(event) = &row.event else {
                tracing::error!(%room, row = %row.row_key, "an unreadable outbox row was dropped");
                self.store.clear_pending(room, &row.row_key).await?;
                continue;
            };
            // A run pushing it right now is left alone; one that is done needs no republishing.
            if self.push.sender.is_some() {
                match self.notifier.state(room, &event.message_id).await? {
                    NotificationState::Claimed => continue,
                    NotificationState::Done => {
                        self.store.clear_pending(room, &row.row_key).await?;
                        continue;
                    }
                    NotificationState::Unclaimed => {}
                }
            }
            match self.publish(room, event, &row.row_key).await {
                Ok(()) => republished += 1,
                Err(e) => tracing::warn!(event = %event.id, error = %e, "republishing an event failed; next run"),
            }
        }
        let idle = pending.is_empty() && marker.marked_at.is_none_or(|at| now - at > MARK_EXPIRY);
        if idle {
            self.store.remove_marker(marker).await?;
        }
        Ok(republished)
    }
}
