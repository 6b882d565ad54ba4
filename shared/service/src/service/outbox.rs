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

use crate::error::Result;
use crate::events::MessageEvent;
use crate::ids::RoomId;
use crate::notify::NotificationState;
use crate::store::outbox::{Marker, event_row_key};
use chrono::Duration;
use chrono::{DateTime, Utc};

/// A pending event older than this is republished by the timer.
pub const REPUBLISH_AFTER: Duration = Duration::seconds(5);
/// A marker younger than this is never removed.
pub(crate) const MARK_EXPIRY: Duration = Duration::minutes(15);

/// The outbox: handing each committed event to its consumer, and the timer that republishes what
/// was not handed over. Holds what it uses: the store, the adapters and settings, and the
/// components it calls.
#[derive(Clone)]
pub struct Outbox {
    pub(crate) store: crate::store::Store,
    pub(crate) push: std::sync::Arc<crate::notify::PushSettings>,
    pub(crate) notifier: crate::notify::Notifier,
    pub(crate) events: Option<std::sync::Arc<dyn crate::adapters::events::EventSink>>,
    pub(crate) inline_events: bool,
    pub(crate) automation: Option<std::sync::Arc<crate::adapters::events::EventGrid>>,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
}

impl Outbox {
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
        self.tasks.spawn(async move {
            // Its row's clearing rides in a later commit (`delete_deferred`): on the embedded
            // store a send then costs one fsync, not two. Should the process stop first, the
            // timer finds the row and, the event being handled already, pushes nothing twice.
            let published = async {
                chat.hand_over(&event).await?;
                Ok::<_, crate::error::Error>(chat.store.outbox.clear_published(&room, &event_row_key(&event)).await?)
            };
            if let Err(e) = published.await {
                tracing::warn!(event = %event.id, error = %e, "an event was not published; the timer will retry");
            }
        });
    }

    /// Whether sends record events: when something consumes them (push here, or whatever
    /// the Event Grid topic delivers to).
    pub(crate) fn publishes_events(&self) -> bool {
        self.events.is_some() || self.automation.is_some()
    }

    /// Publishes one event and deletes its outbox row (`row_key`).
    async fn publish(&self, room: &RoomId, event: &MessageEvent, row_key: &str) -> Result<()> {
        self.hand_over(event).await?;
        Ok(self.store.outbox.clear_pending(room, row_key).await?)
    }

    /// Hands one event to its consumers.
    async fn hand_over(&self, event: &MessageEvent) -> Result<()> {
        // The automation event first: a notification consumer that has handled the event
        // (which lets the timer drop its row) implies the automation topic took it too.
        if event.automation
            && let Some(topic) = &self.automation
        {
            topic.publish_automation(event).await?;
        }
        if let Some(events) = &self.events {
            events.publish(event).await?;
        }
        Ok(())
    }

    /// The timer's part: republishes every event pending longer than [`REPUBLISH_AFTER`] and
    /// drops markers of rooms with nothing pending. Returns the events republished.
    pub async fn republish(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut republished = 0;
        for marker in self.store.outbox.outbox_markers().await? {
            match self.republish_room(&marker, now).await {
                Ok(n) => republished += n,
                Err(e) => tracing::warn!(room = %marker.room, error = %e, "republishing a room's events failed"),
            }
        }
        Ok(republished)
    }

    async fn republish_room(&self, marker: &Marker, now: DateTime<Utc>) -> Result<usize> {
        let room = &marker.room;
        let pending = self.store.outbox.pending_events(room).await?;
        let mut republished = 0;
        // One event that keeps failing never holds up the room's others.
        for row in &pending {
            if row.created_at.is_some_and(|at| now - at < REPUBLISH_AFTER) {
                continue;
            }
            // A change of a message whose word index job (rows that did not fit its
            // transaction, rows of words it dropped) its process stopped before doing.
            if let Some(message) = &row.words_of {
                if let Err(e) = self.store.messages.finish_words(room, message).await {
                    tracing::warn!(%room, message, error = %e, "completing a message's index rows failed; next run");
                }
                continue;
            }
            let Some(event) = &row.event else {
                tracing::error!(%room, row = %row.row_key, "an unreadable outbox row was dropped");
                self.store.outbox.clear_pending(room, &row.row_key).await?;
                continue;
            };
            // A run pushing it right now is left alone; one that is done needs no republishing.
            if self.push.sender.is_some() {
                match self.notifier.state(room, &event.message_id).await? {
                    NotificationState::Claimed => continue,
                    NotificationState::Done => {
                        self.store.outbox.clear_pending(room, &row.row_key).await?;
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
            self.store.outbox.remove_marker(marker).await?;
        }
        Ok(republished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Chat;
    use crate::adapters::push::PushSender;
    use crate::events::MessageEvent;
    use crate::ids::RoomId;
    use crate::messages::send::NewMessage;
    use crate::notify::PushSettings;
    use crate::service::testing::{alice, chat_on, store, user};
    use crate::storage::faults::FaultyTables;
    use crate::storage::{Entity, ErrorKind, RangeQuery, UpdateMode, Value};
    use crate::storage::{StoreError, Tables};
    use crate::store::schema::{OUTBOX_PARTITION, OUTBOX_PREFIX};
    use chrono::{DateTime, Utc};

    async fn pending(chat: &Chat, room: &RoomId) -> usize {
        let query = RangeQuery::prefix(room.as_str(), OUTBOX_PREFIX, 100);
        chat.wiring
            .store
            .tables()
            .query_up_to(&chat.wiring.store.schema().messages, &query, 100)
            .await
            .unwrap()
            .0
            .len()
    }

    /// The event commits with the message; when its first publication fails, the row stays
    /// and the timer publishes it, once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_whose_publication_failed_is_republished_by_the_timer() {
        let faults = FaultyTables::new(store());
        let (mut chat, room) = chat_on(Tables::new(faults.clone())).await;
        let key = crate::adapters::push::generate_vapid_key().unwrap().0;
        chat = chat.with_push(PushSettings {
            sender: Some(PushSender::new(&key, "mailto:test@example.com").unwrap()),
            allow_private_endpoints: true,
            ..PushSettings::default()
        });
        chat.rooms.join_room(&user("bob"), &room).await.unwrap();

        // The consumer's first read (its idempotency check) fails: the event is not accepted.
        let metadata = chat.wiring.store.schema().metadata.clone();
        faults.fail_operation(
            "get",
            Some(&metadata),
            1,
            StoreError::new(ErrorKind::Unavailable, "injected"),
        );
        chat.sending
            .send_message(&alice(), &room, NewMessage::text("hi"))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(pending(&chat, &room).await, 1, "the event waits in the outbox");

        // An unreadable row is dropped without holding up the room's others.
        let broken = Entity::new(room.as_str(), format!("{OUTBOX_PREFIX}1"))
            .with("event", Value::String("not json".into()))
            .with("createdAt", Value::datetime(Utc::now() - Duration::minutes(1)));
        chat.wiring
            .store
            .tables()
            .insert(&chat.wiring.store.schema().messages, &broken)
            .await
            .unwrap();
        assert_eq!(pending(&chat, &room).await, 2);

        // Too young to republish yet; then the timer publishes it.
        assert_eq!(chat.outbox.republish(Utc::now()).await.unwrap(), 0);
        assert_eq!(pending(&chat, &room).await, 1, "the broken row is gone");
        let later = Utc::now() + REPUBLISH_AFTER + Duration::seconds(1);
        assert_eq!(chat.outbox.republish(later).await.unwrap(), 1);
        assert_eq!(pending(&chat, &room).await, 0);
        assert_eq!(chat.outbox.republish(later).await.unwrap(), 0, "published once");

        // Nothing pending and the marker old: the room is no longer looked at.
        let much_later = later + MARK_EXPIRY + Duration::minutes(1);
        chat.outbox.republish(much_later).await.unwrap();
        let marker = chat
            .wiring
            .store
            .tables()
            .get(
                &chat.wiring.store.schema().housekeeping,
                OUTBOX_PARTITION,
                room.as_str(),
            )
            .await
            .unwrap();
        assert!(marker.is_none());
    }

    /// An event recorded pending by a delivery answered before its fan-out ended is left alone
    /// while its run holds the claim, dropped once it is done, and republished once the claim
    /// has lapsed (the run died).
    #[tokio::test]
    async fn the_timer_republishes_a_pending_fan_out_only_once_its_run_is_gone() {
        let (mut chat, room) = chat_on(Tables::new(store())).await;
        let key = crate::adapters::push::generate_vapid_key().unwrap().0;
        chat = chat.with_push(PushSettings {
            sender: Some(PushSender::new(&key, "mailto:test@example.com").unwrap()),
            ..PushSettings::default()
        });
        let later = Utc::now() + REPUBLISH_AFTER + Duration::seconds(1);
        let record = |message_id: &str, claimed: Option<(&str, DateTime<Utc>)>| {
            let (chat, room, message_id) = (chat.clone(), room.clone(), message_id.to_owned());
            let claimed = claimed.map(|(state, at)| (state.to_owned(), at));
            async move {
                let event = MessageEvent {
                    id: format!("{room}/{message_id}"),
                    room_id: room.to_string(),
                    message_id: message_id.clone(),
                    sender_id: "alice".into(),
                    sender_name: "alice".into(),
                    preview: "hi".into(),
                    mentions: Default::default(),
                    automation: false,
                };
                chat.wiring.store.outbox.record_fan_out(&room, &event).await.unwrap();
                if let Some((state, at)) = claimed {
                    let marker = Entity::new(room.as_str(), format!("{message_id}:n"))
                        .with("state", Value::String(state))
                        .with("claimedAt", Value::datetime(at));
                    chat.wiring
                        .store
                        .tables()
                        .upsert(&chat.wiring.store.schema().metadata, &marker, UpdateMode::Replace)
                        .await
                        .unwrap();
                }
            }
        };
        record("2516062669865313801", Some(("claimed", Utc::now()))).await;
        assert_eq!(
            chat.outbox.republish(later).await.unwrap(),
            0,
            "a live run is left alone"
        );
        assert_eq!(pending(&chat, &room).await, 1);

        record("2516062669865313801", Some(("done", Utc::now()))).await;
        assert_eq!(
            chat.outbox.republish(later).await.unwrap(),
            0,
            "a done event is not republished"
        );
        assert_eq!(pending(&chat, &room).await, 0, "and its row is dropped");

        let lapsed = Utc::now() - Duration::minutes(4);
        record("2516062669865313802", Some(("claimed", lapsed))).await;
        assert_eq!(
            chat.outbox.republish(later).await.unwrap(),
            1,
            "a dead run's event is republished"
        );
        assert_eq!(pending(&chat, &room).await, 0);
    }

    /// A send whose event publishes at once leaves nothing pending.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_event_leaves_no_row() {
        let (mut chat, room) = chat_on(Tables::new(store())).await;
        let key = crate::adapters::push::generate_vapid_key().unwrap().0;
        chat = chat.with_push(PushSettings {
            sender: Some(PushSender::new(&key, "mailto:test@example.com").unwrap()),
            allow_private_endpoints: true,
            ..PushSettings::default()
        });
        chat.sending
            .send_message(&alice(), &room, NewMessage::text("hi"))
            .await
            .unwrap();
        for _ in 0..50 {
            if pending(&chat, &room).await == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the outbox row was not cleared");
    }
}
