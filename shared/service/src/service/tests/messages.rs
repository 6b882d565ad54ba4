//! Service-level tests of the send and read paths on a real embedded store, with faults
//! injected where a failure path needs one.

use std::collections::HashSet;

use crate::ids::RoomId;
use crate::keys::Ticks;
use crate::messages::cursor::Order;
use crate::messages::read::ReadMessages;
use crate::messages::send::NewMessage;
use crate::service::Chat;
use crate::service::testing::{alice, chat_on, store};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, RangeQuery, StoreError, Tables};
use crate::store::schema::Schema;

fn text(t: &str) -> NewMessage {
    NewMessage::text(t)
}

async fn all_ids(chat: &Chat, room: &RoomId, order: Order) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let request = ReadMessages {
            order: Some(order),
            limit: Some(7),
            cursor,
            around: None,
        };
        let page = chat.reading.read_messages(&alice(), room, request).await.unwrap();
        ids.extend(page.messages.into_iter().map(|m| m.id));
        if !page.has_more {
            return ids;
        }
        cursor = page.next_cursor;
    }
}

/// Every message id, newest first and oldest first: a stored message without its index row
/// shows in the first and not in the second.
async fn both_orders(chat: &Chat, room: &RoomId) -> (Vec<String>, Vec<String>) {
    (
        all_ids(chat, room, Order::NewestFirst).await,
        all_ids(chat, room, Order::OldestFirst).await,
    )
}

/// Every send starts at the same tick, as two processes with equal clocks would: each must
/// detect the taken key and move to the next free one, never overwriting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_in_the_same_tick_are_all_stored() {
    fn frozen() -> Ticks {
        Ticks::from_datetime(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap())
    }
    let shared = store();
    let (first, room) = chat_on(Tables::new(shared.clone())).await;
    let first = first.with_ticks(crate::keys::TickSource::Frozen(frozen()));
    let second = Chat::open(Tables::new(shared), Schema::with_prefix("").unwrap())
        .await
        .unwrap()
        .with_ticks(crate::keys::TickSource::Frozen(frozen()));
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (chat, room) = (if i % 2 == 0 { first.clone() } else { second.clone() }, room.clone());
        sends.spawn(async move {
            chat.sending
                .send_message(&alice(), &room, text(&format!("m{i}")))
                .await
                .unwrap()
        });
    }
    let sent: Vec<_> = sends.join_all().await;
    let ids: HashSet<String> = sent.iter().map(|s| s.message.id.clone()).collect();
    assert_eq!(ids.len(), 20);
    let texts: HashSet<String> = sent.iter().map(|s| s.message.text.clone()).collect();
    assert_eq!(texts.len(), 20, "no message overwrote another");
    let desc = all_ids(&first, &room, Order::NewestFirst).await;
    let mut asc = all_ids(&first, &room, Order::OldestFirst).await;
    asc.reverse();
    assert_eq!(desc.len(), 20);
    assert_eq!(desc, asc);
}

/// A message write that fails mid-way leaves nothing readable: the index row is deleted again.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_message_write_is_compensated() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let err = chat
        .sending
        .send_message(&alice(), &room, text("lost"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE");
    let (index, _) = chat
        .wiring
        .store
        .tables
        .query_up_to(
            &chat.wiring.store.schema.ascending,
            &RangeQuery::partition(room.as_str(), 10),
            10,
        )
        .await
        .unwrap();
    assert!(index.is_empty(), "the index row was removed");
    assert!(all_ids(&chat, &room, Order::OldestFirst).await.is_empty());
    chat.sending.send_message(&alice(), &room, text("kept")).await.unwrap();
    assert_eq!(all_ids(&chat, &room, Order::NewestFirst).await.len(), 1);
}

/// When the compensation fails too, the orphan index row is skipped by ascending reads, and
/// the cursor moves past it, so paging ends.
#[tokio::test(flavor = "multi_thread")]
async fn an_orphan_index_row_is_skipped_and_passed() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    chat.sending
        .send_message(&alice(), &room, text("before"))
        .await
        .unwrap();
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("write lost"),
    );
    faults.fail_operation(
        "delete",
        Some(&chat.wiring.store.schema.ascending),
        1,
        StoreError::unavailable("cleanup lost"),
    );
    assert!(chat.sending.send_message(&alice(), &room, text("lost")).await.is_err());
    chat.sending.send_message(&alice(), &room, text("after")).await.unwrap();

    let mut cursor = None;
    let mut seen = Vec::new();
    for _ in 0..10 {
        let request = ReadMessages {
            order: Some(Order::OldestFirst),
            limit: Some(1),
            cursor: cursor.clone(),
            around: None,
        };
        let page = chat.reading.read_messages(&alice(), &room, request).await.unwrap();
        seen.extend(page.messages.iter().map(|m| m.text.clone()));
        assert_ne!(page.next_cursor, cursor, "the cursor always advances");
        if !page.has_more {
            break;
        }
        cursor = page.next_cursor;
    }
    assert_eq!(seen, ["before", "after"]);
}

/// The index row is written alongside the message's transaction: when that write fails and
/// the message commits, the send writes the row again, so the message shows oldest first too.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_message_whose_index_row_write_failed_gets_it_written_again() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    faults.fail_operation(
        "insert",
        Some(&chat.wiring.store.schema.ascending),
        1,
        StoreError::unavailable("index write lost"),
    );
    let sent = chat.sending.send_message(&alice(), &room, text("kept")).await.unwrap();
    assert!(sent.created);
    let (newest_first, mut oldest_first) = both_orders(&chat, &room).await;
    oldest_first.reverse();
    assert!(newest_first.contains(&sent.message.id));
    assert_eq!(oldest_first, newest_first, "the message has its index row");
}

/// A stored message whose index row could not be written at all — the store refused it with
/// the commit and every write after it, as a process stopped between the commit and the
/// index row would leave it — is still read oldest first, in its place, whether it is the
/// room's newest message or between others on a page boundary, and gets its index row back.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_message_without_its_index_row_is_still_read_oldest_first() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    for n in 0..6 {
        chat.sending
            .send_message(&alice(), &room, text(&format!("before {n}")))
            .await
            .unwrap();
    }
    let ascending = chat.wiring.store.schema.ascending.clone();
    let lost = || StoreError::unavailable("index write lost");
    faults.fail_operation("insert", Some(&ascending), 1, lost());
    faults.fail_operation("upsert", Some(&ascending), 3, lost());
    let sent = chat
        .sending
        .send_message(&alice(), &room, text("unindexed"))
        .await
        .unwrap();
    assert!(sent.created);
    let index_row = || async {
        chat.wiring
            .store
            .tables
            .get(
                &ascending,
                room.as_str(),
                sent.message.key().ticks().ascending_key().as_str(),
            )
            .await
            .unwrap()
    };
    assert!(index_row().await.is_none(), "the index row was never written");
    let (newest_first, mut oldest_first) = both_orders(&chat, &room).await;
    oldest_first.reverse();
    assert_eq!(
        oldest_first, newest_first,
        "the room's newest message, read oldest first"
    );
    assert!(index_row().await.is_some(), "the read wrote its index row back");
    // Again with the message between others, across a page boundary (pages of 7).
    faults.fail_operation("insert", Some(&ascending), 1, lost());
    faults.fail_operation("upsert", Some(&ascending), 3, lost());
    let middle = chat
        .sending
        .send_message(&alice(), &room, text("unindexed too"))
        .await
        .unwrap();
    for n in 0..8 {
        chat.sending
            .send_message(&alice(), &room, text(&format!("after {n}")))
            .await
            .unwrap();
    }
    let (newest_first, mut oldest_first) = both_orders(&chat, &room).await;
    oldest_first.reverse();
    assert!(newest_first.contains(&middle.message.id));
    assert_eq!(oldest_first, newest_first, "every message once, in order");
}

/// A send whose tick already holds another message (a send elsewhere took it) takes the next
/// tick; the first message keeps the index row, and no orphan row is left.
async fn a_send_whose_tick_holds_a_message_takes_the_next_tick(tables: Tables, schema: Schema) {
    fn frozen() -> Ticks {
        Ticks::from_datetime(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap())
    }
    let chat = Chat::open(tables, schema).await.unwrap();
    let room = chat
        .rooms
        .create_room(
            &alice(),
            crate::rooms::NewRoom {
                name: "r".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let room = RoomId::parse(&room.id).unwrap();
    let chat = chat.with_ticks(crate::keys::TickSource::Frozen(frozen()));
    let first = chat.sending.send_message(&alice(), &room, text("first")).await.unwrap();
    let second = chat
        .sending
        .send_message(&alice(), &room, text("second"))
        .await
        .unwrap();
    assert_eq!(first.message.id, frozen().message_key().as_str());
    assert_eq!(second.message.id, frozen().next().message_key().as_str());
    let (newest_first, mut oldest_first) = both_orders(&chat, &room).await;
    oldest_first.reverse();
    assert_eq!(oldest_first, newest_first);
    let (index, _) = chat
        .wiring
        .store
        .tables
        .query_up_to(
            &chat.wiring.store.schema.ascending,
            &RangeQuery::partition(room.as_str(), 100),
            100,
        )
        .await
        .unwrap();
    assert_eq!(index.len(), newest_first.len(), "one index row per message, no orphan");
}

mod a_send_whose_tick_holds_a_message {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn takes_the_next_tick_on_the_embedded_store() {
        a_send_whose_tick_holds_a_message_takes_the_next_tick(Tables::new(store()), Schema::with_prefix("").unwrap())
            .await
    }

    /// Azurite names the failing operation of a transaction as Azure does: the message row's.
    #[tokio::test(flavor = "multi_thread")]
    async fn takes_the_next_tick_on_azurite() {
        let account = std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".into());
        let azurite = crate::storage::azure::AzureTables::from_connection_string(&account).unwrap();
        let prefix = format!("tk{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        a_send_whose_tick_holds_a_message_takes_the_next_tick(
            Tables::new(azurite),
            Schema::with_prefix(&prefix).unwrap(),
        )
        .await
    }
}

/// Two sends at one tick: the one whose transaction failed deletes the index row only on the
/// version it wrote, so the row the stored one wrote again (having found it there) stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_send_releases_only_the_index_row_version_it_wrote() {
    use crate::store::messages::IndexRow;
    let (chat, room) = chat_on(Tables::new(store())).await;
    let ticks = Ticks::from_datetime(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap());
    let failing = chat.wiring.store.messages.insert_index_row(&room, ticks).await.unwrap();
    let stored = chat.wiring.store.messages.insert_index_row(&room, ticks).await.unwrap();
    assert!(
        matches!(failing, IndexRow::Created(_)),
        "the first insert wrote the row"
    );
    assert_eq!(stored, IndexRow::Found, "the second found it there");
    chat.wiring.store.messages.ensure_index_row(&room, ticks).await.unwrap();
    chat.wiring
        .store
        .messages
        .release_index_row(&room, ticks, failing)
        .await;
    let row = chat
        .wiring
        .store
        .tables
        .get(
            &chat.wiring.store.schema.ascending,
            room.as_str(),
            ticks.ascending_key().as_str(),
        )
        .await
        .unwrap();
    assert!(row.is_some(), "the stored message keeps its index row");
    // Released before the stored one writes it again, the row comes back.
    let fresh = ticks.next();
    let failing = chat.wiring.store.messages.insert_index_row(&room, fresh).await.unwrap();
    chat.wiring
        .store
        .messages
        .release_index_row(&room, fresh, failing)
        .await;
    chat.wiring.store.messages.ensure_index_row(&room, fresh).await.unwrap();
    let row = chat
        .wiring
        .store
        .tables
        .get(
            &chat.wiring.store.schema.ascending,
            room.as_str(),
            fresh.ascending_key().as_str(),
        )
        .await
        .unwrap();
    assert!(row.is_some());
}

/// A store failing on the idempotency lookup fails the send cleanly, with nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_store_fails_the_send_before_writing() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    faults.fail_operation("get", None, 1, StoreError::new(ErrorKind::Unavailable, "timeout"));
    let retry = NewMessage {
        client_id: Some("c1".into()),
        ..NewMessage::text("x")
    };
    assert_eq!(
        chat.sending
            .send_message(&alice(), &room, retry.clone())
            .await
            .unwrap_err()
            .code(),
        "UNAVAILABLE"
    );
    assert!(all_ids(&chat, &room, Order::NewestFirst).await.is_empty());
    let sent = chat.sending.send_message(&alice(), &room, retry).await.unwrap();
    assert!(sent.created);
}

/// Sends queued behind a slow commit go out as groups. Two sends of one new client id cannot
/// share a group (they write the same record); the later ones meet in a group of their own,
/// where each fails on its own record: that change is answered as a repeat and the rest of
/// its group still commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_change_leaves_its_group_committed() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let before = chat.wiring.store.ledger.counter(&room).await.unwrap().version;

    faults.set_latency(Some(std::time::Duration::from_millis(30)));
    let mut sends = tokio::task::JoinSet::new();
    let client_ids = [None, Some("x"), None, Some("x"), Some("y"), None, Some("y")];
    for (i, client_id) in client_ids.into_iter().enumerate() {
        let (chat, room) = (chat.clone(), room.clone());
        sends.spawn(async move {
            let input = NewMessage {
                client_id: client_id.map(str::to_owned),
                ..text(&format!("m{i}"))
            };
            (
                client_id,
                chat.sending.send_message(&alice(), &room, input).await.unwrap(),
            )
        });
    }
    let sent = sends.join_all().await;
    faults.set_latency(None);

    for client_id in ["x", "y"] {
        let same: Vec<_> = sent
            .iter()
            .filter(|(c, _)| *c == Some(client_id))
            .map(|(_, s)| s)
            .collect();
        assert_eq!(same[0].message.id, same[1].message.id, "{client_id}: one message");
        assert_eq!(same.iter().filter(|s| s.created).count(), 1, "{client_id}: stored once");
    }
    let versions: HashSet<u64> = sent
        .iter()
        .filter(|(_, s)| s.created)
        .map(|(_, s)| s.message.version)
        .collect();
    assert_eq!(versions.len(), 5, "each new message has its own version");
    assert_eq!(
        chat.wiring.store.ledger.counter(&room).await.unwrap().version,
        before + 5,
        "no version was skipped"
    );
    assert_eq!(all_ids(&chat, &room, Order::NewestFirst).await.len(), 5);
}

/// Housekeeping expires idempotency records after their window: the client id can be used
/// again, and the message it protected stays.
#[tokio::test]
async fn idempotency_records_expire_after_their_window() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let once = NewMessage {
        client_id: Some("c1".into()),
        ..text("once")
    };
    let first = chat.sending.send_message(&alice(), &room, once.clone()).await.unwrap();
    let report = chat.housekeeping(chrono::Utc::now()).await.unwrap();
    assert_eq!(report.idempotency_records_expired, 0, "inside the window");
    assert!(
        !chat
            .sending
            .send_message(&alice(), &room, once.clone())
            .await
            .unwrap()
            .created
    );

    let later = chrono::Utc::now() + crate::service::housekeeping::IDEMPOTENCY_WINDOW + chrono::Duration::minutes(1);
    let report = chat.housekeeping(later).await.unwrap();
    assert_eq!(report.idempotency_records_expired, 1);
    let again = chat.sending.send_message(&alice(), &room, once).await.unwrap();
    assert!(again.created && again.message.id != first.message.id);
    assert!(
        chat.reading
            .get_message(&alice(), &room, &first.message.key())
            .await
            .is_ok()
    );
}

/// A delete writes three rows (its message, its old feed row's removal, its new feed row):
/// groups are sized by what their changes really build, so many concurrent deletes in one room
/// never make a transaction of more than 100 operations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_deletes_in_one_room_all_succeed() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let sent = chat
            .sending
            .send_message(&alice(), &room, text(&format!("m{i}")))
            .await
            .unwrap();
        ids.push(sent.message.id);
    }
    let before = chat.wiring.store.ledger.counter(&room).await.unwrap().version;

    faults.set_latency(Some(std::time::Duration::from_millis(30)));
    let mut deletes = tokio::task::JoinSet::new();
    for id in ids.clone() {
        let (chat, room) = (chat.clone(), room.clone());
        deletes.spawn(async move {
            chat.editing
                .delete_message(&alice(), &room, &crate::keys::MessageKey::parse(&id).unwrap())
                .await
        });
    }
    let outcomes = deletes.join_all().await;
    faults.set_latency(None);

    let failed: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(failed.is_empty(), "every delete succeeds: {failed:?}");
    assert_eq!(
        chat.wiring.store.ledger.counter(&room).await.unwrap().version,
        before + 40
    );
    for id in &ids {
        let gone = chat
            .reading
            .get_message(&alice(), &room, &crate::keys::MessageKey::parse(id).unwrap())
            .await
            .unwrap_err();
        assert_eq!(gone.code(), "NOT_FOUND", "{id} is a tombstone");
    }
}

/// A store that commits a send and then reports a timeout (it may have committed, and did):
/// the send is answered as stored, the message is readable in both orders exactly once, and
/// a retry of its client id is a repeat.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_committed_but_reported_as_failed_is_answered_as_stored() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let before = chat.wiring.store.ledger.counter(&room).await.unwrap().version;
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("operation timed out"),
    );
    let input = NewMessage {
        client_id: Some("c1".into()),
        ..text("kept")
    };
    let sent = chat.sending.send_message(&alice(), &room, input.clone()).await.unwrap();
    assert!(sent.created);
    assert_eq!(sent.message.version, before + 1);
    assert_eq!(
        chat.wiring.store.ledger.counter(&room).await.unwrap().version,
        before + 1,
        "committed once"
    );
    let id = sent.message.id.clone();
    let (newest_first, oldest_first) = both_orders(&chat, &room).await;
    assert_eq!(newest_first.iter().filter(|m| **m == id).count(), 1);
    assert_eq!(
        oldest_first.iter().filter(|m| **m == id).count(),
        1,
        "its index row was kept"
    );
    let again = chat.sending.send_message(&alice(), &room, input).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.message.id, id);
}

/// The same for an edit: answered as edited, with one version step, not re-applied as if the
/// message row's new ETag were someone else's write.
#[tokio::test(flavor = "multi_thread")]
async fn an_edit_committed_but_reported_as_failed_is_answered_as_edited() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let sent = chat.sending.send_message(&alice(), &room, text("first")).await.unwrap();
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("connection reset"),
    );
    let edit = crate::messages::changes::Edit::text("second");
    let edited = chat
        .editing
        .edit_message(&alice(), &room, &sent.message.key(), edit)
        .await
        .unwrap();
    assert_eq!(
        (edited.text.as_str(), edited.version),
        ("second", sent.message.version + 1)
    );
    assert_eq!(
        chat.wiring.store.ledger.counter(&room).await.unwrap().version,
        sent.message.version + 1
    );
}

/// When the store cannot tell whether a send committed (it reports a timeout, and the counter
/// cannot be read afterwards), the sender is told to retry, and a message that was stored
/// stays readable in both orders: its index row is never deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_of_unknown_outcome_keeps_its_index_row() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let lines = all_ids(&chat, &room, Order::NewestFirst).await.len();
    chat.sending.send_message(&alice(), &room, text("warm")).await.unwrap();
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("operation timed out"),
    );
    // The send reads nothing else from Messages before its commit (the counter is known from
    // the last one), so these fail the read of the counter along with the commit and the
    // read that looks for the commit.
    faults.fail_operation(
        "get",
        Some(&chat.wiring.store.schema.messages),
        2,
        StoreError::unavailable("still down"),
    );
    let err = chat
        .sending
        .send_message(&alice(), &room, text("maybe"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE");
    let (newest_first, oldest_first) = both_orders(&chat, &room).await;
    assert_eq!(newest_first.len(), lines + 2, "warm and maybe are stored");
    assert_eq!(oldest_first.len(), newest_first.len(), "no index row was deleted");
}

/// Idempotency keys cannot collide across users whose ids contain `:`, and the lookup comes
/// after the membership check: a non-member is never answered with a message of the room.
#[tokio::test(flavor = "multi_thread")]
async fn idempotency_keys_of_different_users_never_collide() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let (ab, a) = (crate::service::testing::user("a:b"), crate::service::testing::user("a"));
    chat.rooms.join_room(&ab, &room).await.unwrap();
    let first = chat
        .sending
        .send_message(
            &ab,
            &room,
            NewMessage {
                client_id: Some("c".into()),
                ..text("from a:b")
            },
        )
        .await
        .unwrap();
    let colliding = NewMessage {
        client_id: Some("b:c".into()),
        ..text("from a")
    };
    let outsider = chat
        .sending
        .send_message(&a, &room, colliding.clone())
        .await
        .unwrap_err();
    assert_eq!(outsider.code(), "NOT_FOUND", "a non-member learns nothing of the room");
    chat.rooms.join_room(&a, &room).await.unwrap();
    let own = chat.sending.send_message(&a, &room, colliding).await.unwrap();
    assert!(own.created, "a's client id is a's own");
    assert_ne!(own.message.id, first.message.id);
    assert_eq!(own.message.text, "from a");
}

/// A transaction whose connection was reset while it was still on its way, and which the store
/// then applies: the send must not take its first look for the whole truth. It fences the
/// late commit out, so what the sender is told holds: "try again" means nothing was stored,
/// and every stored message is readable in both orders.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_whose_commit_would_land_after_its_error_is_fenced_out() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let lines = all_ids(&chat, &room, Order::NewestFirst).await.len();
    chat.sending.send_message(&alice(), &room, text("warm")).await.unwrap();
    faults.fail_transaction_and_apply_later(
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("connection reset"),
        std::time::Duration::from_millis(200),
    );
    let input = NewMessage {
        client_id: Some("late".into()),
        ..text("late")
    };
    let err = chat
        .sending
        .send_message(&alice(), &room, input.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (newest_first, oldest_first) = both_orders(&chat, &room).await;
    assert_eq!(
        newest_first.len(),
        lines + 1,
        "the late commit was fenced out: {newest_first:?}"
    );
    assert_eq!(
        oldest_first.len(),
        newest_first.len(),
        "every stored message has its index row"
    );
    let retried = chat.sending.send_message(&alice(), &room, input).await.unwrap();
    assert!(retried.created, "the retry stores it, once");
    assert_eq!(all_ids(&chat, &room, Order::OldestFirst).await.len(), lines + 2);
}

/// Azure reports a timed-out changeset on one of its parts: a 500 naming an operation may
/// still have committed, and is looked into like any other ambiguous answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_reported_as_timed_out_on_one_operation_is_answered_as_stored() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("0:Operation could not be completed within the specified time.").at_batch_index(0),
    );
    let sent = chat.sending.send_message(&alice(), &room, text("kept")).await.unwrap();
    assert!(sent.created);
    let id = sent.message.id.clone();
    let oldest_first = all_ids(&chat, &room, Order::OldestFirst).await;
    assert_eq!(
        oldest_first.iter().filter(|m| **m == id).count(),
        1,
        "readable oldest first"
    );
    assert_eq!(
        all_ids(&chat, &room, Order::NewestFirst)
            .await
            .iter()
            .filter(|m| **m == id)
            .count(),
        1
    );
}

/// An edit whose commit is confirmed by looking, and whose message row then cannot be read
/// back: the sender hears "try again", and the edit is not applied a second time as if its own
/// write had been someone else's.
#[tokio::test(flavor = "multi_thread")]
async fn an_edit_confirmed_but_not_read_back_is_not_applied_twice() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let sent = chat.sending.send_message(&alice(), &room, text("first")).await.unwrap();
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("connection reset"),
    );
    // The edit's calls: the room and the member (access), the message, the message again (the
    // conditional helper), the transaction (the counter is this process's, not read along),
    // the counter (the look that confirms the commit), and then the message row's read-back,
    // which fails.
    faults.fail_nth_call(7, StoreError::unavailable("still down"));
    let edit = crate::messages::changes::Edit::text("second");
    let err = chat
        .editing
        .edit_message(&alice(), &room, &sent.message.key(), edit)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE");
    assert_eq!(
        chat.wiring.store.ledger.counter(&room).await.unwrap().version,
        sent.message.version + 1,
        "one version step: the edit was applied once"
    );
    let stored = chat
        .reading
        .get_message(&alice(), &room, &sent.message.key())
        .await
        .unwrap();
    assert_eq!(
        (stored.text.as_str(), stored.version),
        ("second", sent.message.version + 1)
    );
}
