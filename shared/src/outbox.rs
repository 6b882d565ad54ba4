//! The outbox's windows. How events wait, are published and republished is
//! `crate::service::outbox`; their rows are `crate::store::outbox`.

use chrono::Duration;

/// A pending event older than this is republished by the timer.
pub const REPUBLISH_AFTER: Duration = Duration::seconds(5);
/// A marker younger than this is never removed.
pub(crate) const MARK_EXPIRY: Duration = Duration::minutes(15);

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
        chat.store
            .tables()
            .query_up_to(&chat.store.schema().messages, &query, 100)
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
        chat.join_room(&user("bob"), &room).await.unwrap();

        // The consumer's first read (its idempotency check) fails: the event is not accepted.
        let metadata = chat.store.schema().metadata.clone();
        faults.fail_operation(
            "get",
            Some(&metadata),
            1,
            StoreError::new(ErrorKind::Unavailable, "injected"),
        );
        chat.send_message(&alice(), &room, NewMessage::text("hi"))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(pending(&chat, &room).await, 1, "the event waits in the outbox");

        // An unreadable row is dropped without holding up the room's others.
        let broken = Entity::new(room.as_str(), format!("{OUTBOX_PREFIX}1"))
            .with("event", Value::String("not json".into()))
            .with("createdAt", Value::datetime(Utc::now() - Duration::minutes(1)));
        chat.store
            .tables()
            .insert(&chat.store.schema().messages, &broken)
            .await
            .unwrap();
        assert_eq!(pending(&chat, &room).await, 2);

        // Too young to republish yet; then the timer publishes it.
        assert_eq!(chat.republish(Utc::now()).await.unwrap(), 0);
        assert_eq!(pending(&chat, &room).await, 1, "the broken row is gone");
        let later = Utc::now() + REPUBLISH_AFTER + Duration::seconds(1);
        assert_eq!(chat.republish(later).await.unwrap(), 1);
        assert_eq!(pending(&chat, &room).await, 0);
        assert_eq!(chat.republish(later).await.unwrap(), 0, "published once");

        // Nothing pending and the marker old: the room is no longer looked at.
        let much_later = later + MARK_EXPIRY + Duration::minutes(1);
        chat.republish(much_later).await.unwrap();
        let marker = chat
            .store
            .tables()
            .get(&chat.store.schema().housekeeping, OUTBOX_PARTITION, room.as_str())
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
                };
                chat.store.record_fan_out(&room, &event).await.unwrap();
                if let Some((state, at)) = claimed {
                    let marker = Entity::new(room.as_str(), format!("{message_id}:n"))
                        .with("state", Value::String(state))
                        .with("claimedAt", Value::datetime(at));
                    chat.store
                        .tables()
                        .upsert(&chat.store.schema().metadata, &marker, UpdateMode::Replace)
                        .await
                        .unwrap();
                }
            }
        };
        record("2516062669865313801", Some(("claimed", Utc::now()))).await;
        assert_eq!(chat.republish(later).await.unwrap(), 0, "a live run is left alone");
        assert_eq!(pending(&chat, &room).await, 1);

        record("2516062669865313801", Some(("done", Utc::now()))).await;
        assert_eq!(
            chat.republish(later).await.unwrap(),
            0,
            "a done event is not republished"
        );
        assert_eq!(pending(&chat, &room).await, 0, "and its row is dropped");

        let lapsed = Utc::now() - Duration::minutes(4);
        record("2516062669865313802", Some(("claimed", lapsed))).await;
        assert_eq!(
            chat.republish(later).await.unwrap(),
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
        chat.send_message(&alice(), &room, NewMessage::text("hi"))
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
