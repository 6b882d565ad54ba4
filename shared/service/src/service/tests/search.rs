//! Search on both stores, where HTTP cannot reach: a crash between a long message's two index
//! writes, the index rows a change leaves (none of what a message no longer says), and the
//! store requests a query costs, counted.

use super::counting::{Backend, counting};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::changes::Edit;
use crate::messages::send::NewMessage;
use crate::rooms::{NewRoom, Visibility};
use crate::search::page::{Position, ROOMS_PER_PAGE, SearchCursor, SearchPage, SearchParams};
use crate::service::Chat;
use crate::service::testing::{alice, user};
use crate::storage::faults::{FaultyTables, RecordedCall};
use crate::storage::{ErrorKind, RangeQuery, StoreError, TableBackend, Tables, text};
use crate::store::schema::{Schema, WORD_PREFIX, word_bucket_prefix};

async fn service(tables: &FaultyTables, schema: &Schema) -> Chat {
    Chat::open(Tables::new(tables.clone()), schema.clone())
        .await
        .expect("Azurite must answer on 127.0.0.1:10002 (or TABLETALK_TEST_AZURITE)")
}

async fn room(chat: &Chat, name: &str) -> RoomId {
    let room = chat
        .rooms
        .create_room(
            &alice(),
            NewRoom {
                name: name.into(),
                description: None,
                visibility: Visibility::Public,
            },
        )
        .await
        .unwrap();
    RoomId::parse(&room.id).unwrap()
}

async fn search(chat: &Chat, q: &str, cursor: Option<String>) -> SearchPage {
    search_as(chat, "alice", q, cursor).await
}

async fn search_as(chat: &Chat, who: &str, q: &str, cursor: Option<String>) -> SearchPage {
    let params = SearchParams {
        q: q.into(),
        room_id: None,
        cursor,
        limit: Some(50),
    };
    chat.searching.search(&user(who), params).await.unwrap()
}

/// The buckets the room's word index holds, each as often as a message has it: the keys of
/// its bucket rows, and the words of its messages' text rows (the embedded store's).
async fn index_buckets(tables: &FaultyTables, schema: &Schema, room: &RoomId) -> Vec<String> {
    let read = |prefix: &str| {
        let query = RangeQuery::prefix(room.as_str(), prefix, 1000);
        async move {
            let tables = Tables::new(tables.clone());
            tables.query_up_to(&schema.messages, &query, 100_000).await.unwrap().0
        }
    };
    let mut buckets: Vec<String> = read(WORD_PREFIX)
        .await
        .iter()
        .map(|row| {
            let rest = &row.row_key[WORD_PREFIX.len()..];
            rest[..rest.rfind(' ').unwrap()].to_owned()
        })
        .collect();
    for row in read(text::ROW_PREFIX).await {
        buckets.extend(row.str(text::WORDS).unwrap_or("").split_whitespace().map(str::to_owned));
    }
    buckets.sort();
    buckets
}

/// Range reads among `calls`: of rows, or of the tables' own text index.
fn range_reads<'a>(calls: impl IntoIterator<Item = &'a RecordedCall>) -> usize {
    calls
        .into_iter()
        .filter(|c| c.operation == "query" || c.operation == "text_query")
        .count()
}

fn bucket_keys(buckets: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = buckets
        .iter()
        .map(|bucket| {
            let prefix = word_bucket_prefix(bucket);
            prefix[WORD_PREFIX.len()..prefix.len() - 1].to_owned()
        })
        .collect();
    keys.sort();
    keys
}

async fn edit(chat: &Chat, room: &RoomId, id: &str, text: &str) {
    let key = MessageKey::of_message(id).unwrap();
    chat.editing
        .edit_message(&alice(), room, &key, Edit::text(text))
        .await
        .unwrap();
}

async fn found(chat: &Chat, q: &str) -> usize {
    search(chat, q, None).await.results.len()
}

/// The `i`th of 500 words whose first three letters differ (`aaaxq`, `aabxq`, …).
fn word(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{}{}{}xq", letter(i / 676), letter(i / 26), letter(i))
}

/// After a message "warm" (the process knows the room's counter, as a running one does: a
/// send's own requests then read nothing of `Messages`), sends one of 500 words each in a
/// bucket of its own (500 index rows) whose process stops right after its transaction: the
/// follow-up's first read fails, and the rest of its rows are the timer's.
async fn send_long_message_whose_process_stops(
    chat: &Chat,
    tables: &FaultyTables,
    schema: &Schema,
    room: &RoomId,
) -> crate::messages::send::Sent {
    chat.sending
        .send_message(&alice(), room, NewMessage::text("warm"))
        .await
        .unwrap();
    let text: Vec<String> = (0..500).map(word).collect();
    tables.fail_operation(
        "get",
        Some(&schema.messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "the process stopped"),
    );
    let sent = chat
        .sending
        .send_message(&alice(), room, NewMessage::text(text.join(" ")))
        .await
        .unwrap();
    // A store indexing text rows itself left no follow-up to stop.
    tables.clear();
    sent
}

/// A message with more distinct words than one transaction holds index rows for, whose
/// process stops after the message's transaction and before the rest of its rows: found by
/// its first words at once, by its last once the outbox timer completed it.
async fn the_timer_completes_the_index_of_a_long_message_after_a_crash(backend: Backend) {
    let (tables, schema) = counting(&backend, "sr");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "long").await;
    send_long_message_whose_process_stops(&chat, &tables, &schema, &room).await;
    assert_eq!(
        found(&chat, &word(0)).await,
        1,
        "{backend:?}: the rows of its own transaction"
    );
    // A store indexing text rows itself has the whole message's in its transaction.
    let whole = tables.indexes_text();
    assert_eq!(
        found(&chat, &word(499)).await,
        usize::from(whole),
        "{backend:?}: the rest waits for the timer, unless the transaction carried it"
    );

    let later = chrono::Utc::now() + chrono::Duration::minutes(1);
    chat.outbox.republish(later).await.unwrap();
    assert_eq!(found(&chat, &word(499)).await, 1, "{backend:?}: completed by the timer");
    let two = format!("{} {}", word(250), word(499));
    assert_eq!(found(&chat, &two).await, 1, "{backend:?}");
    // Nothing is left for the next run.
    chat.outbox.republish(later).await.unwrap();
    let pending = chat.wiring.store.outbox.pending_events(&room).await.unwrap();
    assert!(pending.is_empty(), "{backend:?}: {pending:?}");
}

/// A long message's follow-up racing a delete of the message: the follow-up's batch held
/// back until after the delete and its own follow-up are done lands nowhere (each batch is
/// conditional on the message row), so no row of the deleted text is left.
async fn a_follow_up_racing_a_delete_leaves_no_row_of_the_text(backend: Backend) {
    let (tables, schema) = counting(&backend, "sd");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "race").await;
    let sent = send_long_message_whose_process_stops(&chat, &tables, &schema, &room).await;
    tables.delay_operation(
        "transact",
        Some(&schema.messages),
        1,
        std::time::Duration::from_millis(600),
    );
    let later = chrono::Utc::now() + chrono::Duration::minutes(1);
    let timer = {
        let chat = chat.clone();
        tokio::spawn(async move { chat.outbox.republish(later).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let key = MessageKey::of_message(&sent.message.id).unwrap();
    chat.editing.delete_message(&alice(), &room, &key).await.unwrap();
    timer.await.unwrap().unwrap();
    chat.outbox.republish(later).await.unwrap();
    assert_eq!(
        index_buckets(&tables, &schema, &room).await,
        bucket_keys(&["war"]),
        "{backend:?}: only the other message's row"
    );
    let pending = chat.wiring.store.outbox.pending_events(&room).await.unwrap();
    assert!(pending.is_empty(), "{backend:?}: {pending:?}");
}

/// A two-word query over three rooms: one range read per word and room, the membership
/// reads of the rooms with candidates, one read per candidate; a member of more rooms than a
/// page looks in gets the rest on the next pages.
async fn a_query_reads_a_bounded_number_of_rows_counted(backend: Backend) {
    let (tables, schema) = counting(&backend, "sq");
    let chat = service(&tables, &schema).await;
    let mut rooms = Vec::new();
    for i in 0..3 {
        let room = room(&chat, &format!("room {i}")).await;
        for text in ["lunch at noon", "the lunch menu is out", "menu only"] {
            chat.sending
                .send_message(&alice(), &room, NewMessage::text(text))
                .await
                .unwrap();
        }
        rooms.push(room);
    }
    tables.forget_calls();
    let page = search(&chat, "lunch menu", None).await;
    let calls = tables.calls_made();
    assert_eq!(page.results.len(), 3, "{backend:?}");
    let count = |operation: &str| calls.iter().filter(|c| c.operation == operation).count();
    let (queries, gets) = (range_reads(&calls), count("get"));
    eprintln!(
        "{backend:?}: a two-word query over 3 rooms: {queries} range reads, {gets} point reads, {} in all",
        calls.len()
    );
    // The user's room list, two words × three rooms, then each result's reactions and votes.
    assert_eq!(queries, 1 + 2 * 3 + 3, "{backend:?}: {calls:?}");
    // Per room with a candidate: its room and member rows, and the candidate.
    assert!(gets <= 3 * 3, "{backend:?}: {calls:?}");
    assert_eq!(
        calls.len(),
        queries + gets,
        "{backend:?}: a search writes nothing: {calls:?}"
    );

    // A member of more rooms than a page looks in: the first page reads the first window.
    for i in 3..ROOMS_PER_PAGE + 2 {
        let room = room(&chat, &format!("room {i}")).await;
        chat.sending
            .send_message(&alice(), &room, NewMessage::text("lunch menu"))
            .await
            .unwrap();
    }
    let mut pages = 0;
    let mut total = 0;
    let mut cursor = None;
    loop {
        tables.forget_calls();
        let page = search(&chat, "lunch menu", cursor).await;
        let reads = range_reads(&tables.calls_made());
        assert!(
            reads <= 1 + 2 * ROOMS_PER_PAGE * 3,
            "{backend:?}: {reads} range reads on one page"
        );
        pages += 1;
        total += page.results.len();
        if !page.has_more {
            break;
        }
        cursor = page.next_cursor;
        assert!(pages < 10, "{backend:?}: paging did not end");
    }
    assert_eq!(total, 3 + ROOMS_PER_PAGE - 1, "{backend:?}: every room's messages once");
    assert!(pages >= 2, "{backend:?}: more rooms than a window take another page");
}

/// Edits and deletes leave no row of a bucket the message no longer has — not an emptied
/// one, whose key would still tell the bucket — even when the process stops before the
/// change's follow-up, and even with the index turned off.
async fn what_a_message_no_longer_says_leaves_no_index_row(backend: Backend) {
    let (tables, schema) = counting(&backend, "sg");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "edits").await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("alpha bravo charlie"))
        .await
        .unwrap();
    let rows = || index_buckets(&tables, &schema, &room);
    assert_eq!(rows().await, bucket_keys(&["alp", "bra", "cha"]), "{backend:?}");
    edit(&chat, &room, &sent.message.id, "alpha delta").await;
    assert_eq!(rows().await, bucket_keys(&["alp", "del"]), "{backend:?}: after an edit");

    // The process stops right after the edit's commit: its follow-up is the timer's.
    tables.fail_operation(
        "query",
        Some(&schema.messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "the process stopped"),
    );
    edit(&chat, &room, &sent.message.id, "alpha echo").await;
    tables.clear();
    assert_eq!(
        found(&chat, "delta").await,
        0,
        "{backend:?}: the old word finds nothing"
    );
    assert_eq!(found(&chat, "echo").await, 1, "{backend:?}");
    let later = chrono::Utc::now() + chrono::Duration::minutes(1);
    chat.outbox.republish(later).await.unwrap();
    assert_eq!(
        rows().await,
        bucket_keys(&["alp", "ech"]),
        "{backend:?}: after the timer"
    );

    // With the index off, a change writes no rows but still removes the old ones.
    let unindexed = chat.clone().without_search_index();
    edit(&unindexed, &room, &sent.message.id, "foxtrot").await;
    assert_eq!(rows().await, Vec::<String>::new(), "{backend:?}: index off");

    let other = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("golf hotel"))
        .await
        .unwrap();
    let key = MessageKey::of_message(&other.message.id).unwrap();
    chat.editing.delete_message(&alice(), &room, &key).await.unwrap();
    assert_eq!(rows().await, Vec::<String>::new(), "{backend:?}: after a delete");
    let pending = chat.wiring.store.outbox.pending_events(&room).await.unwrap();
    assert!(pending.is_empty(), "{backend:?}: {pending:?}");
}

/// The longest message of distinct characters of an unspaced script: a bounded number of
/// rows, found by its first characters, and its delete (whose follow-up lists every row to
/// remove) goes through and leaves none.
async fn a_long_unspaced_message_costs_bounded_rows_and_can_be_deleted(backend: Backend) {
    let (tables, schema) = counting(&backend, "su");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "long").await;
    let text: String = (0..10_000u32).map(|i| char::from_u32(0x4E00 + i).unwrap()).collect();
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(text))
        .await
        .unwrap();
    let rows = index_buckets(&tables, &schema, &room).await;
    assert_eq!(rows.len(), crate::search::index::MAX_BUCKETS, "{backend:?}");
    assert_eq!(found(&chat, "一丁").await, 1, "{backend:?}");
    let key = MessageKey::of_message(&sent.message.id).unwrap();
    chat.editing.delete_message(&alice(), &room, &key).await.unwrap();
    assert!(index_buckets(&tables, &schema, &room).await.is_empty(), "{backend:?}");
}

/// A stranger naming a room reads nothing of its index; a page of candidates that all fail
/// stops at a bounded number checked and goes on on the next; a cursor past the last window
/// ends the search.
async fn a_page_reads_only_what_the_caller_may_and_checks_a_bounded_number(backend: Backend) {
    let (tables, schema) = counting(&backend, "sb");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "checks").await;
    for i in 0..210 {
        chat.sending
            .send_message(&alice(), &room, NewMessage::text(format!("lunch menu {i}")))
            .await
            .unwrap();
    }
    tables.forget_calls();
    let page = search_as(&chat, "mallory", &format!("lunch in:{room}"), None).await;
    assert!(page.results.is_empty() && !page.has_more, "{backend:?}: {page:?}");
    let calls = tables.calls_made();
    let messages = schema.messages.as_str().to_lowercase();
    let index_reads = range_reads(calls.iter().filter(|c| c.table == messages));
    assert_eq!(index_reads, 0, "{backend:?}: a stranger's search reads no index row");

    // Every candidate fails the exclusion: the first page checks at most 200 and goes on.
    tables.forget_calls();
    let first = search(&chat, "lunch -menu", None).await;
    let gets = tables.calls_made().iter().filter(|c| c.operation == "get").count();
    assert!(first.results.is_empty() && first.has_more, "{backend:?}: {first:?}");
    // The candidates checked, and the room's access reads.
    assert!(gets <= 200 + 8, "{backend:?}: {gets} point reads on one page");
    let second = search(&chat, "lunch -menu", first.next_cursor).await;
    assert!(second.results.is_empty() && !second.has_more, "{backend:?}: {second:?}");

    let past = SearchCursor {
        window: Some(RoomId::parse("ffffffff-ffff-ffff-ffff-ffffffffffff").unwrap()),
        after: Some(Position {
            key: MessageKey::of_message("0000000000000000001").unwrap(),
            room: None,
        }),
    };
    let page = search(&chat, "lunch", Some(past.encode())).await;
    assert!(page.results.is_empty() && !page.has_more, "{backend:?}: {page:?}");
}

on_both_backends!(
    the_timer_completes_the_index_of_a_long_message_after_a_crash,
    a_query_reads_a_bounded_number_of_rows_counted,
    what_a_message_no_longer_says_leaves_no_index_row,
    a_long_unspaced_message_costs_bounded_rows_and_can_be_deleted,
    a_page_reads_only_what_the_caller_may_and_checks_a_bounded_number,
    a_follow_up_racing_a_delete_leaves_no_row_of_the_text,
);
