//! Service-level tests of the room list by activity: what listing costs, senders racing from
//! two services on one store, and a send that fails leaving the preview as it was.

use futures::future::join_all;

use crate::Chat;
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::rooms::{NewRoom, RoomEntry, Visibility};
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};
use crate::store::Schema;

fn new_room() -> NewRoom {
    NewRoom {
        name: "r".into(),
        description: None,
        visibility: Visibility::Public,
    }
}

fn entry<'a>(rooms: &'a [RoomEntry], room: &RoomId) -> &'a RoomEntry {
    rooms.iter().find(|e| e.room.id == room.as_str()).expect("listed")
}

#[tokio::test]
async fn listing_fifty_rooms_costs_one_index_read_and_three_reads_a_room() {
    let faults = FaultyTables::new(store());
    let (chat, first) = chat_on(Tables::new(faults.clone())).await;
    let mut rooms = vec![first];
    for _ in 1..50 {
        let room = chat.rooms.create_room(&alice(), new_room()).await.unwrap();
        rooms.push(RoomId::parse(&room.id).unwrap());
    }
    // Messages in an order unlike the rooms' creation.
    let order: Vec<usize> = (0..50).map(|i| (i * 7) % 50).collect();
    for &i in &order {
        chat.sending
            .send_message(&alice(), &rooms[i], NewMessage::text(format!("to {i}")))
            .await
            .unwrap();
    }

    faults.clear();
    let before = faults.calls();
    let listed = chat.rooms.my_rooms(&alice()).await.unwrap();
    let reads = faults.calls() - before;
    assert_eq!(
        reads,
        1 + 3 * 50,
        "the index, then a member row, a room row and one range read a room"
    );

    let listed_ids: Vec<&str> = listed.iter().map(|e| e.room.id.as_str()).collect();
    let newest_first: Vec<&str> = order.iter().rev().map(|&i| rooms[i].as_str()).collect();
    assert_eq!(listed_ids, newest_first, "the most recently active room first");
    for (entry, &i) in listed.iter().zip(order.iter().rev()) {
        let preview = entry.last_message.as_ref().expect("a preview");
        assert_eq!(preview.text.as_deref(), Some(format!("to {i}").as_str()));
        assert_eq!(entry.last_activity_at, preview.created_at);
    }
}

#[tokio::test]
async fn senders_racing_from_two_services_keep_the_newest_message_previewed() {
    let tables = Tables::new(store());
    let (one, room) = chat_on(tables.clone()).await;
    // A second service on the same store: its own ledger, so the two race for the counter as
    // two processes do.
    let two = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
    let senders: Vec<_> = (0..12).map(|i| user(&format!("u{i}"))).collect();
    for sender in &senders {
        one.rooms.join_room(sender, &room).await.unwrap();
    }
    for round in 0..3 {
        let sends = senders.iter().enumerate().map(|(i, sender)| {
            let chat = if i % 2 == 0 { &one } else { &two };
            let room = &room;
            async move {
                chat.sending
                    .send_message(sender, room, NewMessage::text(format!("{round}:{i}")))
                    .await
                    .unwrap()
                    .message
            }
        });
        let sent = join_all(sends).await;
        // Message ids sort newest first.
        let newest = sent.iter().map(|m| m.id.clone()).min().unwrap();
        let listed = one.rooms.my_rooms(&alice()).await.unwrap();
        let preview = entry(&listed, &room).last_message.clone().expect("a preview");
        assert_eq!(preview.message_id, newest, "round {round}: the newest send is shown");
    }
}

#[tokio::test]
async fn a_send_that_fails_leaves_the_preview_as_it_was() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let kept = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("kept"))
        .await
        .unwrap();
    let unavailable = StoreError::new(ErrorKind::Unavailable, "injected");
    faults.fail_operation("transact", Some(&chat.wiring.store.schema().messages), 1, unavailable);
    let failed = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("lost"))
        .await;
    assert_eq!(failed.unwrap_err().code(), "UNAVAILABLE");
    let listed = chat.rooms.my_rooms(&alice()).await.unwrap();
    let preview = entry(&listed, &room).last_message.clone().unwrap();
    assert_eq!(
        (preview.message_id.as_str(), preview.text.as_deref()),
        (kept.message.id.as_str(), Some("kept"))
    );
}
