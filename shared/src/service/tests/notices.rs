//! Service-level tests of tiered live delivery: what a send costs in store calls as a room's
//! members grow (nothing more) and as members look (three calls each, once), and a look that
//! lands while its member's notice goes out arming them again.

use chrono::Utc;

use crate::Chat;
use crate::ids::RoomId;
use crate::members::MarkRead;
use crate::messages::send::NewMessage;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::Tables;
use crate::storage::faults::FaultyTables;

/// The store calls one send of alice's costs.
async fn send_cost(chat: &Chat, faults: &FaultyTables, room: &RoomId, text: String) -> usize {
    let before = faults.calls();
    chat.send_message(&alice(), room, NewMessage::text(text)).await.unwrap();
    faults.calls() - before
}

#[tokio::test]
async fn a_send_costs_the_same_whatever_its_rooms_members_and_three_calls_for_each_member_who_looked() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = chat.with_local_hub("chat");
    let members: Vec<_> = (0..50).map(|i| user(&format!("m{i}"))).collect();
    for member in &members[..5] {
        chat.join_room(member, &room).await.unwrap();
    }
    send_cost(&chat, &faults, &room, "warm".into()).await;
    let few = send_cost(&chat, &faults, &room, "five members".into()).await;
    for member in &members[5..] {
        chat.join_room(member, &room).await.unwrap();
    }
    send_cost(&chat, &faults, &room, "warm".into()).await;
    let many = send_cost(&chat, &faults, &room, "fifty members".into()).await;
    assert_eq!(few, many, "fifty members cost what five do");

    // Three members look (read the room): the next send tells each of them, at a member read,
    // a range read of their unread messages and the removal of their armed row each, plus
    // one read of the room row; the send after it costs what it did before.
    for member in &members[..3] {
        chat.mark_read(member, &room, MarkRead::default()).await.unwrap();
    }
    let told = send_cost(&chat, &faults, &room, "three looked".into()).await;
    assert_eq!(told, many + 1 + 3 * 3);
    let after = send_cost(&chat, &faults, &room, "told already".into()).await;
    assert_eq!(after, many, "each look buys one notice");
}

#[tokio::test]
async fn a_look_while_its_notice_goes_out_arms_the_member_again() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let bob = user("bob");
    chat.join_room(&bob, &room).await.unwrap();
    chat.store.arm_notice(&room, &bob.user_id).await.unwrap();
    let read = chat.store.lookers(&room, Utc::now()).await.unwrap();
    assert_eq!(read.armed.len(), 1);
    // bob reads the room again while the notice from `read` goes out.
    chat.store.arm_notice(&room, &bob.user_id).await.unwrap();
    chat.store.disarm_notice(&room, &read.armed[0]).await.unwrap();
    let now = chat.store.lookers(&room, Utc::now()).await.unwrap();
    assert_eq!(now.armed.len(), 1, "the later look stays");
    chat.store.disarm_notice(&room, &now.armed[0]).await.unwrap();
    assert!(chat.store.lookers(&room, Utc::now()).await.unwrap().armed.is_empty());
}
