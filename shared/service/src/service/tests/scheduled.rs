//! Scheduled messages at the service level, where a crash can be placed exactly: between the
//! claim and the send, and between the send and recording it; a store that commits the send
//! and then reports a failure; two processes' runs at once; and a run's cost, which grows with
//! the items due, not with those stored.

use std::sync::Arc;

use chrono::{Duration, Utc};

use crate::adapters::clock::ManualClock;
use crate::ids::RoomId;
use crate::messages::MessageType;
use crate::messages::read::ReadMessages;
use crate::scheduled::{CLAIM_LEASE, MAX_ATTEMPTS, MAX_PENDING_PER_MEMBER, NewScheduled, Scheduled, ScheduledStatus};
use crate::service::Chat;
use crate::service::testing::{alice, chat_on, store};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};
use crate::store::schema::Schema;

/// The service on a clock the test moves, over `tables`, with a room alice owns.
async fn chat_at(tables: Tables) -> (Chat, RoomId, ManualClock) {
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(tables).await;
    (chat.with_time(Arc::new(clock.clone())), room, clock)
}

async fn schedule(chat: &Chat, room: &RoomId, text: &str, in_seconds: i64) -> Scheduled {
    let input = NewScheduled {
        text: Some(text.into()),
        poll: None,
        attachments: None,
        send_at: chat.wiring.time.now() + Duration::seconds(in_seconds),
    };
    chat.scheduler.schedule_message(&alice(), room, input).await.unwrap()
}

/// The members' messages of the room (not the server's lines).
async fn texts(chat: &Chat, room: &RoomId) -> Vec<String> {
    let request = ReadMessages {
        order: None,
        limit: Some(100),
        cursor: None,
        around: None,
    };
    let page = chat.reading.read_messages(&alice(), room, request).await.unwrap();
    page.messages
        .into_iter()
        .filter(|m| m.kind == MessageType::Message)
        .map(|m| m.text)
        .collect()
}

async fn item(chat: &Chat, room: &RoomId, id: &str) -> Scheduled {
    chat.wiring
        .store
        .scheduled
        .scheduled(room, &alice().user_id, id)
        .await
        .unwrap()
        .unwrap()
        .0
}

/// What a sender that stopped right after claiming left behind.
async fn claim_and_stop(chat: &Chat, room: &RoomId, id: &str) -> Scheduled {
    let (found, etag) = chat
        .wiring
        .store
        .scheduled
        .scheduled(room, &alice().user_id, id)
        .await
        .unwrap()
        .unwrap();
    let (claimed, _) = chat
        .scheduler
        .claim_scheduled(&found, &etag, chat.wiring.time.now())
        .await
        .unwrap()
        .expect("claimed");
    claimed
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_between_claim_and_send_is_sent_once_after_the_claim_lapses() {
    let (chat, room, clock) = chat_at(Tables::new(store())).await;
    let scheduled = schedule(&chat, &room, "later", 60).await;
    clock.advance(Duration::seconds(60));
    claim_and_stop(&chat, &room, &scheduled.id).await;

    let held = chat.scheduler.send_due_messages().await.unwrap();
    assert_eq!(
        (held.sent, held.skipped),
        (0, 1),
        "the claim holds while it may be running"
    );
    assert!(texts(&chat, &room).await.is_empty());
    clock.advance(CLAIM_LEASE);
    let run = chat.scheduler.send_due_messages().await.unwrap();
    assert_eq!(run.sent, 1, "{run:?}");
    assert_eq!(texts(&chat, &room).await, ["later"]);
    let done = item(&chat, &room, &scheduled.id).await;
    assert_eq!((done.status, done.attempts), (ScheduledStatus::Sent, 2));
    clock.advance(CLAIM_LEASE * 2);
    assert_eq!(
        chat.scheduler.send_due_messages().await.unwrap(),
        Default::default(),
        "nothing is due any more"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_after_the_send_records_the_first_message_and_sends_no_other() {
    let (chat, room, clock) = chat_at(Tables::new(store())).await;
    let scheduled = schedule(&chat, &room, "once", 10).await;
    clock.advance(Duration::seconds(10));
    let claimed = claim_and_stop(&chat, &room, &scheduled.id).await;
    // The stopped sender's send landed; recording it did not.
    let sent = chat
        .sending
        .send_message(&alice(), &room, claimed.message())
        .await
        .unwrap();
    clock.advance(CLAIM_LEASE);
    assert_eq!(chat.scheduler.send_due_messages().await.unwrap().sent, 1);
    assert_eq!(texts(&chat, &room).await, ["once"]);
    assert_eq!(
        item(&chat, &room, &scheduled.id).await.message_id,
        Some(sent.message.id)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_the_store_committed_and_reported_as_failed_is_sent_once() {
    let faults = FaultyTables::new(store());
    let (chat, room, clock) = chat_at(Tables::new(faults.clone())).await;
    let scheduled = schedule(&chat, &room, "committed", 5).await;
    clock.advance(Duration::seconds(5));
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "timeout after commit"),
    );
    let first = chat.scheduler.send_due_messages().await.unwrap();
    clock.advance(CLAIM_LEASE);
    let second = chat.scheduler.send_due_messages().await.unwrap();
    assert_eq!(first.sent + second.sent, 1, "{first:?} {second:?}");
    assert_eq!(texts(&chat, &room).await, ["committed"]);
    assert_eq!(item(&chat, &room, &scheduled.id).await.status, ScheduledStatus::Sent);
}

/// A send the store could not confirm on the item's last attempt (its commit still on its way,
/// and the store unable to tell: the counter could not be fenced) leaves the item waiting,
/// never refused: its message may land — here it does, a moment later — and the run after the
/// claim lapses finds it and records the item sent.
#[tokio::test(flavor = "multi_thread")]
async fn an_unconfirmed_send_on_the_last_attempt_is_not_refused() {
    let faults = FaultyTables::new(store());
    let (chat, room, clock) = chat_at(Tables::new(faults.clone())).await;
    let scheduled = schedule(&chat, &room, "maybe", 5).await;
    let (found, etag) = chat
        .wiring
        .store
        .scheduled
        .scheduled(&room, &alice().user_id, &scheduled.id)
        .await
        .unwrap()
        .unwrap();
    let spent = Scheduled {
        attempts: MAX_ATTEMPTS - 1,
        ..found.clone()
    };
    chat.wiring
        .store
        .scheduled
        .replace_scheduled(&found, &etag, &spent)
        .await
        .unwrap()
        .expect("every attempt but one spent");
    clock.advance(Duration::seconds(5));
    let messages = chat.wiring.store.schema.messages.clone();
    faults.fail_transaction_and_apply_later(
        Some(&messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "timeout"),
        std::time::Duration::from_millis(200),
    );
    faults.fail_operation(
        "update",
        Some(&messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "no fence"),
    );
    let _ = chat.scheduler.send_due_messages().await;
    let waiting = item(&chat, &room, &scheduled.id).await;
    assert_eq!(waiting.status, ScheduledStatus::Sending, "not refused: {waiting:?}");
    assert_eq!(waiting.attempts, MAX_ATTEMPTS);

    // The commit lands after all.
    for _ in 0..100 {
        if !texts(&chat, &room).await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    clock.advance(CLAIM_LEASE);
    chat.scheduler.send_due_messages().await.unwrap();
    let done = item(&chat, &room, &scheduled.id).await;
    assert_eq!(done.status, ScheduledStatus::Sent, "{done:?}");
    assert_eq!(texts(&chat, &room).await, ["maybe"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_running_at_once_send_each_message_once() {
    let tables = Tables::new(store());
    let (chat, room, clock) = chat_at(tables.clone()).await;
    let other = Chat::open(tables, Schema::with_prefix("").unwrap())
        .await
        .unwrap()
        .with_time(Arc::new(clock.clone()));
    for i in 0..12 {
        schedule(&chat, &room, &format!("message {i}"), 30).await;
    }
    clock.advance(Duration::seconds(30));
    let (a, b, c) = tokio::join!(
        chat.scheduler.send_due_messages(),
        other.scheduler.send_due_messages(),
        chat.scheduler.send_due_messages()
    );
    let sent = a.unwrap().sent + b.unwrap().sent + c.unwrap().sent;
    assert_eq!(sent, 12);
    let mut stored = texts(&chat, &room).await;
    stored.sort();
    stored.dedup();
    assert_eq!(stored.len(), 12);
    assert_eq!(texts(&chat, &room).await.len(), 12, "no message twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_costs_the_same_however_many_items_wait_for_later() {
    let faults = FaultyTables::new(store());
    let (chat, room, clock) = chat_at(Tables::new(faults.clone())).await;
    let cost_of_one_due = async |text: &str| {
        schedule(&chat, &room, text, 1).await;
        clock.advance(Duration::seconds(1));
        let before = faults.calls();
        assert_eq!(chat.scheduler.send_due_messages().await.unwrap().sent, 1);
        faults.calls() - before
    };
    // The room's first sends also set up its counter and the kept copy of its room row
    // (`RoomAccess::access_for_send`): measured from the third on.
    cost_of_one_due("first").await;
    cost_of_one_due("second").await;
    let alone = cost_of_one_due("alone").await;
    for i in 0..90 {
        schedule(&chat, &room, &format!("next year {i}"), 86_400 * 300).await;
    }
    let among_many = cost_of_one_due("among many").await;
    assert_eq!(alone, among_many, "a run reads only what is due");
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_items_are_listed_for_a_week_then_removed_and_waiting_ones_stay() {
    let (chat, room, clock) = chat_at(Tables::new(store())).await;
    let sent = schedule(&chat, &room, "sent", 10).await;
    let cancelled = schedule(&chat, &room, "cancelled", 10).await;
    let waiting = schedule(&chat, &room, "waiting", 86_400 * 30).await;
    clock.advance(Duration::seconds(10));
    chat.scheduler
        .cancel_scheduled(&alice(), &room, &cancelled.id)
        .await
        .unwrap();
    assert_eq!(chat.scheduler.send_due_messages().await.unwrap().sent, 1);
    let listed = chat.scheduler.list_scheduled(&alice(), &room).await.unwrap();
    let order: Vec<&str> = listed.iter().map(|i| i.text.as_deref().unwrap()).collect();
    assert_eq!(order.len(), 3);
    assert_eq!(order[2], "waiting", "soonest first");

    let now = crate::adapters::clock::Clock::now(&clock) + Duration::seconds(1);
    let report = chat
        .housekeeping(now + crate::scheduled::FINISHED_KEPT - Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(report.scheduled_expired, 0, "kept for a week");
    let report = chat.housekeeping(now + crate::scheduled::FINISHED_KEPT).await.unwrap();
    assert_eq!(report.scheduled_expired, 2);
    let listed = chat.scheduler.list_scheduled(&alice(), &room).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [waiting.id.as_str()]
    );
    assert!(
        chat.wiring
            .store
            .scheduled
            .scheduled(&room, &alice().user_id, &sent.id)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_erasure_deletes_the_users_scheduled_messages() {
    let (chat, room, clock) = chat_at(Tables::new(store())).await;
    let bob = crate::service::testing::user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let input = NewScheduled {
        text: Some("bob's secret plans".into()),
        poll: None,
        attachments: None,
        send_at: chat.wiring.time.now() + Duration::seconds(60),
    };
    let item = chat.scheduler.schedule_message(&bob, &room, input).await.unwrap();
    schedule(&chat, &room, "alice's", 60).await;
    let (_, run) = chat.eraser.begin_erasure(&bob).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    assert!(
        chat.scheduler
            .scheduled_item(&room, &bob.user_id, &item.id)
            .await
            .unwrap()
            .is_none()
    );
    clock.advance(Duration::seconds(60));
    let run = chat.scheduler.send_due_messages().await.unwrap();
    assert_eq!(
        (run.sent, run.skipped, run.failed),
        (1, 0, 0),
        "no row is left naming bob's item"
    );
    assert_eq!(texts(&chat, &room).await, ["alice's"]);
}

/// An erasure deletes every scheduled message of its user, however many: more than one
/// listing holds (items stored past the limit by schedules racing it, or by an older server).
#[tokio::test(flavor = "multi_thread")]
async fn an_erasure_deletes_all_of_the_users_scheduled_messages_beyond_one_listing() {
    let (chat, room, _) = chat_at(Tables::new(store())).await;
    let bob = crate::service::testing::user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let input = NewScheduled {
        text: Some("plan".into()),
        poll: None,
        attachments: None,
        send_at: chat.wiring.time.now() + Duration::seconds(60),
    };
    let first = chat.scheduler.schedule_message(&bob, &room, input).await.unwrap();
    for _ in 0..300 {
        let more = Scheduled {
            id: uuid::Uuid::new_v4().simple().to_string(),
            ..first.clone()
        };
        chat.wiring.store.scheduled.insert_scheduled(&more).await.unwrap();
    }
    let (_, run) = chat.eraser.begin_erasure(&bob).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    let left = chat
        .wiring
        .store
        .scheduled
        .scheduled_of(&room, &bob.user_id)
        .await
        .unwrap();
    assert_eq!(left.len(), 0, "items of bob's left after his erasure");
}

/// Cancelled items kept for their week never hide waiting ones from the count: with 200
/// cancelled and 100 waiting, the member schedules no more.
#[tokio::test(flavor = "multi_thread")]
async fn cancelled_items_never_let_a_member_keep_more_than_the_waiting_limit() {
    let (chat, room, _) = chat_at(Tables::new(store())).await;
    let mut refused = None;
    'rounds: for round in 0..3 {
        for i in 0..=100 {
            let input = NewScheduled {
                text: Some(format!("plan {round}.{i}")),
                poll: None,
                attachments: None,
                send_at: chat.wiring.time.now() + Duration::seconds(60),
            };
            match chat.scheduler.schedule_message(&alice(), &room, input).await {
                Ok(item) if round < 2 => {
                    chat.scheduler
                        .cancel_scheduled(&alice(), &room, &item.id)
                        .await
                        .unwrap();
                }
                Ok(_) => {}
                Err(e) => {
                    refused = Some(e);
                    break 'rounds;
                }
            }
        }
    }
    let waiting = chat
        .wiring
        .store
        .scheduled
        .scheduled_of(&room, &alice().user_id)
        .await
        .unwrap()
        .iter()
        .filter(|item| item.status.is_pending())
        .count();
    assert!(waiting <= MAX_PENDING_PER_MEMBER, "{waiting} items wait");
    assert_eq!(refused.expect("some schedule is refused").code(), "CONFLICT");
}
