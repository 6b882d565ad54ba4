//! Search on both stores, where HTTP cannot reach: a crash between a long message's two index
//! writes, and the store requests a query costs, counted.

use super::counting::{Backend, counting};
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::rooms::{NewRoom, Visibility};
use crate::search::page::{ROOMS_PER_PAGE, SearchPage, SearchParams};
use crate::service::Chat;
use crate::service::testing::alice;
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};
use crate::store::schema::Schema;

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
    let params = SearchParams {
        q: q.into(),
        room_id: None,
        cursor,
        limit: Some(50),
    };
    chat.searching.search(&alice(), params).await.unwrap()
}

async fn found(chat: &Chat, q: &str) -> usize {
    search(chat, q, None).await.results.len()
}

/// The `i`th of 500 words whose first three letters differ (`aaaxq`, `aabxq`, …).
fn word(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{}{}{}xq", letter(i / 676), letter(i / 26), letter(i))
}

/// A message with more distinct words than one transaction holds index rows for, whose
/// process stops after the message's transaction and before the rest of its rows: found by
/// its first words at once, by its last once the outbox timer completed it.
async fn the_timer_completes_the_index_of_a_long_message_after_a_crash(backend: Backend) {
    let (tables, schema) = counting(&backend, "sr");
    let chat = service(&tables, &schema).await;
    let room = room(&chat, "long").await;
    // The process knows the room's counter, as a running one does: the send's own requests
    // read nothing of `Messages`, and the follow-up's first read is the one that fails.
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("warm"))
        .await
        .unwrap();
    // Each word in a bucket of its own (its first three letters): 500 index rows.
    let text: Vec<String> = (0..500).map(word).collect();
    tables.fail_operation(
        "get",
        Some(&schema.messages),
        1,
        StoreError::new(ErrorKind::Unavailable, "the process stopped"),
    );
    chat.sending
        .send_message(&alice(), &room, NewMessage::text(text.join(" ")))
        .await
        .unwrap();
    assert_eq!(
        found(&chat, &word(0)).await,
        1,
        "{backend:?}: the rows of its own transaction"
    );
    assert_eq!(
        found(&chat, &word(499)).await,
        0,
        "{backend:?}: the rest waits for the timer"
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
    let (queries, gets) = (count("query"), count("get"));
    eprintln!(
        "{backend:?}: a two-word query over 3 rooms: {queries} range reads, {gets} point reads, {} in all",
        calls.len()
    );
    // The user's room list, then two words × three rooms.
    assert_eq!(queries, 1 + 2 * 3, "{backend:?}: {calls:?}");
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
        let reads = tables.calls_made().iter().filter(|c| c.operation == "query").count();
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

on_both_backends!(
    the_timer_completes_the_index_of_a_long_message_after_a_crash,
    a_query_reads_a_bounded_number_of_rows_counted,
);
