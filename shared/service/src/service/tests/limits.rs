//! Service-level tests of the limits' failure paths and races: a store that fails under the
//! bucket row, a lease that loses its race to another process, a lease the store applied and
//! then reported as failed, many writers in two processes, and the records' expiry and deletion.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};

use crate::access::Access;
use crate::adapters::clock::{Clock, ManualClock};
use crate::error::Error;
use crate::ids::RoomId;
use crate::limits::Write;
use crate::messages::send::NewMessage;
use crate::service::Chat;
use crate::service::limits::LimitSettings;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{RangeQuery, StoreError, Tables};
use crate::store::Schema;

fn start() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn limited(chat: Chat, clock: &ManualClock) -> Chat {
    chat.with_limits(LimitSettings {
        thresholds: crate::trust::Thresholds::defaults(Duration::zero()),
        clock: Arc::new(clock.clone()),
    })
}

/// Another process on the same store: a service of its own, with its own leases.
async fn another_process(tables: Tables, clock: &ManualClock) -> Chat {
    let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
    limited(chat, clock)
}

async fn alices_access(chat: &Chat, room: &RoomId) -> Access {
    chat.access.access(room, &alice().user_id).await.unwrap()
}

/// The tokens alice's bucket row holds.
async fn alices_row_tokens(chat: &Chat) -> f64 {
    let row = chat
        .wiring
        .store
        .tables
        .get(&chat.wiring.store.schema.limits, "user:alice", "writes")
        .await
        .unwrap()
        .expect("alice's bucket row");
    row.i64("tokens").unwrap() as f64 / 1e6
}

#[tokio::test]
async fn a_bucket_row_the_store_cannot_reach_refuses_the_write_as_unavailable() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let limits = chat.wiring.store.schema.limits.clone();
    faults.fail_operation("get", Some(&limits), 1, StoreError::unavailable("down"));
    let refused = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("hello"))
        .await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    let page = chat
        .reading
        .read_messages(&alice(), &room, Default::default())
        .await
        .unwrap();
    assert!(
        page.messages.iter().all(|m| m.text != "hello"),
        "nothing was stored: the limits fail closed"
    );
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("hello"))
        .await
        .expect("the store is back: the same text is no repeat, since nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_loses_its_race_takes_from_what_the_winner_left() {
    let shared = store();
    let faults = FaultyTables::new(shared.clone());
    let clock = ManualClock::at(start());
    let (first, room) = chat_on(Tables::new(shared.clone())).await;
    let first = limited(first, &clock);
    let access = alices_access(&first, &room).await;
    first
        .limiter
        .check_write_limits(&access, Write::Reaction)
        .await
        .unwrap();
    assert_eq!(alices_row_tokens(&first).await, 30.0, "the first lease took 10 of 40");

    // The second process reads the row, then its write is held while a third leases.
    let second = another_process(Tables::new(faults.clone()), &clock).await;
    let limits = second.wiring.store.schema.limits.clone();
    faults.delay_operation("update", Some(&limits), 1, StdDuration::from_secs(2));
    let before = faults.calls();
    let racing = {
        let (second, access) = (second.clone(), access.clone());
        tokio::spawn(async move { second.limiter.check_write_limits(&access, Write::Reaction).await })
    };
    // Its two reads are done once its write has been entered (the wrapper counts it).
    while faults.calls() < before + 3 {
        tokio::task::yield_now().await;
    }
    let third = another_process(Tables::new(shared), &clock).await;
    third
        .limiter
        .check_write_limits(&access, Write::Reaction)
        .await
        .unwrap();
    assert_eq!(alices_row_tokens(&first).await, 20.0);

    racing
        .await
        .unwrap()
        .expect("the loser re-reads and leases from what is left");
    assert_eq!(
        alices_row_tokens(&first).await,
        10.0,
        "three leases of 10: none granted twice, none lost"
    );
}

#[tokio::test]
async fn a_lease_applied_but_reported_as_failed_refuses_the_write_and_spends_its_tokens() {
    let shared = store();
    let faults = FaultyTables::new(shared.clone());
    let clock = ManualClock::at(start());
    let (first, room) = chat_on(Tables::new(shared)).await;
    let first = limited(first, &clock);
    let access = alices_access(&first, &room).await;
    first
        .limiter
        .check_write_limits(&access, Write::Reaction)
        .await
        .unwrap();

    let second = another_process(Tables::new(faults.clone()), &clock).await;
    let limits = second.wiring.store.schema.limits.clone();
    faults.fail_operation_after_applying("update", Some(&limits), 1, StoreError::unavailable("timed out"));
    let refused = second.limiter.check_write_limits(&access, Write::Reaction).await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    assert_eq!(
        alices_row_tokens(&first).await,
        20.0,
        "the lease landed: its tokens count as spent"
    );
    second
        .limiter
        .check_write_limits(&access, Write::Reaction)
        .await
        .unwrap();
    assert_eq!(alices_row_tokens(&first).await, 10.0, "never re-applied: one new lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writers_in_two_processes_never_spend_more_than_one_burst() {
    let shared = store();
    let clock = ManualClock::at(start());
    let (first, room) = chat_on(Tables::new(shared.clone())).await;
    let first = limited(first, &clock);
    let second = another_process(Tables::new(shared), &clock).await;
    let access = alices_access(&first, &room).await;
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..120 {
        let chat = if i % 2 == 0 { first.clone() } else { second.clone() };
        let access = access.clone();
        writes.spawn(async move { chat.limiter.check_write_limits(&access, Write::Reaction).await });
    }
    let outcomes = writes.join_all().await;
    let passed = outcomes.iter().filter(|o| o.is_ok()).count();
    assert!((1..=40).contains(&passed), "{passed} writes passed with a frozen clock");
    for outcome in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(outcome, Error::TooManyRequests { .. } | Error::Unavailable(_)),
            "{outcome:?}"
        );
    }
}

#[tokio::test]
async fn housekeeping_expires_repeat_records_after_ten_minutes_and_a_deleted_room_leaves_none() {
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(store())).await;
    let chat = limited(chat, &clock);
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("hello"))
        .await
        .unwrap();
    let partition = RangeQuery::partition(format!("room:{room}"), 100);
    let rows = || async {
        let (rows, _) = chat
            .wiring
            .store
            .tables
            .query_up_to(&chat.wiring.store.schema.limits, &partition, 1000)
            .await
            .unwrap();
        rows.len()
    };
    assert_eq!(rows().await, 1, "the repeat-text record");
    let now = clock.now();
    let early = chat.housekeeping(now + Duration::minutes(9)).await.unwrap();
    assert_eq!((early.limit_records_expired, rows().await), (0, 1));
    let late = chat
        .housekeeping(now + Duration::minutes(10) + Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!((late.limit_records_expired, rows().await), (1, 0));

    chat.sending
        .send_message(&alice(), &room, NewMessage::text("hello again"))
        .await
        .unwrap();
    assert_eq!(rows().await, 1);
    chat.rooms.delete_room(&alice(), &room).await.unwrap();
    assert_eq!(rows().await, 0, "the room's limits partition went with it");
}

/// The calls `faults` recorded on the `Limits` table since it last forgot them.
fn limits_calls(chat: &Chat, faults: &FaultyTables) -> Vec<&'static str> {
    let limits = chat.wiring.store.schema.limits.as_str().to_ascii_lowercase();
    faults
        .calls_made()
        .into_iter()
        .filter(|call| call.table == limits)
        .map(|call| call.operation)
        .collect()
}

/// A send by someone this process has not stored a message of claims its text only after its
/// checks: a stranger's refused sends cost no write.
#[tokio::test]
async fn a_strangers_send_claims_no_text() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let private = crate::rooms::RoomChange {
        visibility: Some(crate::rooms::Visibility::Private),
        ..Default::default()
    };
    chat.rooms.update_room(&alice(), &room, private).await.unwrap();
    faults.forget_calls();
    let refused = chat
        .sending
        .send_message(&user("mallory"), &room, NewMessage::text("spam spam spam"))
        .await;
    assert!(matches!(refused, Err(Error::NotFound(_))), "{refused:?}");
    assert_eq!(limits_calls(&chat, &faults), Vec::<&str>::new());
}

/// A known sender's send claims its text in its first round; refused by a later check (the
/// room turned read-only), it takes the claim back, so the text is no repeat once it can be sent.
#[tokio::test]
async fn a_text_claimed_ahead_of_a_refused_send_is_taken_back() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    chat.sending
        .send_message(&bob, &room, NewMessage::text("hello all"))
        .await
        .unwrap();
    let read_only = |on| crate::rooms::RoomChange {
        read_only: Some(on),
        ..Default::default()
    };
    chat.rooms.update_room(&alice(), &room, read_only(true)).await.unwrap();
    faults.forget_calls();
    let refused = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("second line"))
        .await;
    assert!(matches!(refused, Err(Error::Forbidden(_))), "{refused:?}");
    let calls = limits_calls(&chat, &faults);
    assert!(
        calls.first() == Some(&"insert") && calls.contains(&"delete"),
        "claimed ahead, then taken back: {calls:?}"
    );
    chat.rooms.update_room(&alice(), &room, read_only(false)).await.unwrap();
    chat.sending
        .send_message(&bob, &room, NewMessage::text("second line"))
        .await
        .expect("the refused send's claim was taken back");
    let repeat = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("second line"))
        .await;
    assert!(matches!(repeat, Err(Error::TooManyRequests { .. })), "{repeat:?}");
}

/// A send with a client id, as a client retrying it sends it again.
fn attempt(client_id: &str, text: &str) -> NewMessage {
    NewMessage {
        client_id: Some(client_id.into()),
        ..NewMessage::text(text)
    }
}

/// Two attempts of one send (one client id, edited in between) both pass their idempotency
/// lookups before either commits: the one answered with the other's message gives back the
/// text it claimed, so that text is no repeat — and the stored one's still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_retry_answered_with_the_first_message_gives_back_the_text_it_claimed() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let messages = chat.wiring.store.schema.messages.clone();
    faults.delay_operation("transact", Some(&messages), 2, StdDuration::from_millis(300));
    let (a, b) = tokio::join!(
        chat.sending.send_message(&bob, &room, attempt("c1", "first wording")),
        chat.sending.send_message(&bob, &room, attempt("c1", "second wording")),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.message.id, b.message.id, "one message for one send");
    assert_ne!(a.created, b.created, "one stored it, the other was answered with it");
    let stored = a.message.text.clone();
    let other = match stored.as_str() {
        "first wording" => "second wording",
        _ => "first wording",
    };
    chat.sending
        .send_message(&bob, &room, attempt("c2", other))
        .await
        .expect("the text of the attempt answered with the other's message was given back");
    let repeat = chat.sending.send_message(&bob, &room, attempt("c3", &stored)).await;
    assert!(matches!(repeat, Err(Error::TooManyRequests { .. })), "{repeat:?}");
}

/// Two attempts of one send with the same text, both past their idempotency lookups before
/// either commits: the second is no repeat of the first — it is answered with the message
/// (not refused as a repeated text) — while a new send of the text is refused, also after
/// another retry of the send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_of_one_send_are_answered_with_its_message_not_refused_as_a_repeat() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    // bob is a known sender, so his next sends claim their text in their first round too.
    chat.sending
        .send_message(&bob, &room, NewMessage::text("warm up"))
        .await
        .unwrap();
    let messages = chat.wiring.store.schema.messages.clone();
    faults.delay_operation("transact", Some(&messages), 2, StdDuration::from_millis(300));
    let (a, b) = tokio::join!(
        chat.sending.send_message(&bob, &room, attempt("c1", "the same words")),
        chat.sending.send_message(&bob, &room, attempt("c1", "the same words")),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.message.id, b.message.id);
    assert_ne!(a.created, b.created);
    let again = chat
        .sending
        .send_message(&bob, &room, attempt("c1", "the same words"))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.message.id, a.message.id);
    let repeat = chat
        .sending
        .send_message(&bob, &room, attempt("c2", "the same words"))
        .await;
    assert!(
        matches!(repeat, Err(Error::TooManyRequests { .. })),
        "the text stays claimed: {repeat:?}"
    );
}

/// A repeat-text record the store wrote and then answered with an error is recognised as the
/// send's own: the send goes on, and the text is claimed — neither a failed send that leaves
/// its text blocked nor a stored message whose text is not.
#[tokio::test]
async fn a_text_claim_the_store_wrote_but_reported_as_failed_is_the_sends_own() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    chat.sending
        .send_message(&bob, &room, NewMessage::text("warm up"))
        .await
        .unwrap();
    let limits = chat.wiring.store.schema.limits.clone();
    faults.fail_operation_after_applying("insert", Some(&limits), 1, StoreError::unavailable("timed out"));
    let sent = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("hello again"))
        .await
        .expect("the claim the store wrote is the send's");
    assert!(sent.created);
    let repeat = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("hello again"))
        .await;
    assert!(matches!(repeat, Err(Error::TooManyRequests { .. })), "{repeat:?}");
}

/// A send whose commit the store could not confirm may be stored: its text stays claimed, so
/// a new send of it is refused, while a retry of the send (its client id) is no repeat.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_of_unknown_outcome_keeps_its_text_claimed() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    // The owner: her trust level is the top whatever she sent, so the send's read of her
    // tally (which the first fault below fails) fails nothing.
    let owner = user("alice");
    chat.sending
        .send_message(&owner, &room, NewMessage::text("warm up"))
        .await
        .unwrap();
    let messages = chat.wiring.store.schema.messages.clone();
    faults.fail_operation_after_applying("transact", Some(&messages), 1, StoreError::unavailable("timed out"));
    // The counter is known from the last commit: these fail the tally's read, the read along
    // with the commit and the look that would confirm it.
    faults.fail_operation("get", Some(&messages), 3, StoreError::unavailable("still down"));
    let err = chat
        .sending
        .send_message(&owner, &room, NewMessage::text("maybe stored"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE", "{err:?}");
    let repeat = chat
        .sending
        .send_message(&owner, &room, NewMessage::text("maybe stored"))
        .await;
    assert!(
        matches!(repeat, Err(Error::TooManyRequests { .. })),
        "the text of a message that is stored is claimed: {repeat:?}"
    );
}

/// The same across two processes on one store: the retry in the other process is answered
/// with the message, and the text stays claimed for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_of_one_send_in_two_processes_are_answered_with_its_message() {
    let shared = store();
    let faults = FaultyTables::new(shared);
    let clock = ManualClock::at(start());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = limited(chat, &clock);
    let other = another_process(Tables::new(faults.clone()), &clock).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let messages = chat.wiring.store.schema.messages.clone();
    faults.delay_operation("transact", Some(&messages), 2, StdDuration::from_millis(300));
    let (a, b) = tokio::join!(
        chat.sending.send_message(&bob, &room, attempt("c1", "the same words")),
        other.sending.send_message(&bob, &room, attempt("c1", "the same words")),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.message.id, b.message.id);
    assert_ne!(a.created, b.created);
    for process in [&chat, &other] {
        let repeat = process
            .sending
            .send_message(&bob, &room, attempt("c2", "the same words"))
            .await;
        assert!(matches!(repeat, Err(Error::TooManyRequests { .. })), "{repeat:?}");
    }
}
