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
    chat.sending
        .send_message(&alice(), room, NewMessage::text(text))
        .await
        .unwrap();
    faults.calls() - before
}

#[tokio::test]
async fn a_send_costs_the_same_whatever_its_rooms_members_and_three_calls_for_each_member_who_looked() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = chat.with_local_hub("chat");
    let members: Vec<_> = (0..50).map(|i| user(&format!("m{i}"))).collect();
    for member in &members[..5] {
        chat.rooms.join_room(member, &room).await.unwrap();
    }
    send_cost(&chat, &faults, &room, "warm".into()).await;
    let few = send_cost(&chat, &faults, &room, "five members".into()).await;
    for member in &members[5..] {
        chat.rooms.join_room(member, &room).await.unwrap();
    }
    send_cost(&chat, &faults, &room, "warm".into()).await;
    let many = send_cost(&chat, &faults, &room, "fifty members".into()).await;
    assert_eq!(few, many, "fifty members cost what five do");

    // Three members look (read the room): the next send tells each of them, at a member read,
    // a range read of their unread messages and the removal of their armed row each, plus
    // one read of the room row; the send after it costs what it did before.
    for member in &members[..3] {
        chat.members
            .mark_read(member, &room, MarkRead::default())
            .await
            .unwrap();
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
    chat.rooms.join_room(&bob, &room).await.unwrap();
    chat.wiring.store.live.arm_notice(&room, &bob.user_id).await.unwrap();
    let read = chat.wiring.store.live.lookers(&room, Utc::now()).await.unwrap();
    assert_eq!(read.armed.len(), 1);
    // bob reads the room again while the notice from `read` goes out.
    chat.wiring.store.live.arm_notice(&room, &bob.user_id).await.unwrap();
    chat.wiring
        .store
        .live
        .disarm_notice(&room, &read.armed[0])
        .await
        .unwrap();
    let now = chat.wiring.store.live.lookers(&room, Utc::now()).await.unwrap();
    assert_eq!(now.armed.len(), 1, "the later look stays");
    chat.wiring
        .store
        .live
        .disarm_notice(&room, &now.armed[0])
        .await
        .unwrap();
    assert!(
        chat.wiring
            .store
            .live
            .lookers(&room, Utc::now())
            .await
            .unwrap()
            .armed
            .is_empty()
    );
}

/// Of a member showing a room and a kick racing, the kick wins: the view is held between its
/// membership check and putting the connection in the group while the kick lands, and
/// whatever the order, the connection ends outside the room's group.
#[tokio::test]
async fn of_a_view_and_a_kick_racing_the_kick_wins() {
    use crate::adapters::live::local_hub::JSON_PROTOCOL;
    use crate::moderation::Kick;
    use crate::signals::ViewRoom;
    use crate::store::Schema;
    use std::time::Duration;

    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = chat.with_local_hub("chat");
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let url = chat.signals.negotiate(&bob, "http://localhost").await.unwrap().url;
    let token = url.split_once("access_token=").unwrap().1;
    let hub = chat.local_hub().unwrap().clone();
    let (session, mut queue) = hub.connect(token, JSON_PROTOCOL).unwrap();
    let connected: serde_json::Value = serde_json::from_str(&session.connected()).unwrap();
    let connection = connected["connectionId"].as_str().unwrap().to_owned();

    let user_rooms = Schema::with_prefix("").unwrap().user_rooms;
    faults.delay_operation("get", Some(&user_rooms), 1, Duration::from_millis(400));
    let view = chat.signals.view_room(
        &bob,
        ViewRoom {
            connection_id: connection,
            room_id: Some(room.to_string()),
        },
    );
    let kick = async {
        // Ordering only: the kick starts while the view is held.
        tokio::time::sleep(Duration::from_millis(100)).await;
        chat.moderation
            .kick(&alice(), &room, &bob.user_id, Kick::default())
            .await
    };
    let (viewed, kicked) = tokio::join!(view, kick);
    kicked.unwrap();
    // Which of the two answers first depends on the scheduler; the outcome must not.
    assert!(
        matches!(viewed, Ok(()) | Err(crate::error::Error::NotFound(_))),
        "{viewed:?}"
    );
    while queue.try_recv().is_ok() {}
    hub.send_to_group(&crate::adapters::live::room_group(room.as_str()), br#"{"probe":1}"#);
    assert!(queue.try_recv().is_err(), "bob's connection is not in the room's group");
    drop(session);
}

/// A member who is kicked leaves no row of theirs among the room's lookers: neither the
/// armed row negotiate wrote nor the row of their connection showing the room.
#[tokio::test]
async fn a_kicked_member_leaves_no_live_rows_in_the_room() {
    use crate::adapters::live::local_hub::JSON_PROTOCOL;
    use crate::moderation::Kick;
    use crate::signals::ViewRoom;

    let (chat, room) = chat_on(Tables::new(store())).await;
    let chat = chat.with_local_hub("chat");
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let url = chat.signals.negotiate(&bob, "http://localhost").await.unwrap().url;
    let hub = chat.local_hub().unwrap().clone();
    let (session, _queue) = hub
        .connect(url.split_once("access_token=").unwrap().1, JSON_PROTOCOL)
        .unwrap();
    let connected: serde_json::Value = serde_json::from_str(&session.connected()).unwrap();
    let view = ViewRoom {
        connection_id: connected["connectionId"].as_str().unwrap().to_owned(),
        room_id: None,
    };
    // Showing no room, then the room: armed by negotiate, and a viewer.
    chat.signals.view_room(&bob, view.clone()).await.unwrap();
    let shown = ViewRoom {
        room_id: Some(room.to_string()),
        ..view
    };
    chat.signals.view_room(&bob, shown).await.unwrap();
    let before = chat.wiring.store.live.lookers(&room, Utc::now()).await.unwrap();
    assert_eq!((before.viewers.len(), before.armed.len()), (1, 1));

    chat.moderation
        .kick(&alice(), &room, &bob.user_id, Kick::default())
        .await
        .unwrap();
    let after = chat.wiring.store.live.lookers(&room, Utc::now()).await.unwrap();
    assert!(after.viewers.is_empty() && after.armed.is_empty(), "{after:?}");
}

/// Of a member showing a room and their connection closing racing, the close wins: the view
/// is held after it put the connection in the group, before it records that the connection
/// shows the room, while the connection closes and its close is handled. Whatever the order,
/// no row is left saying the closed connection shows the room (which would hold back the
/// member's notices of it for an hour).
#[tokio::test]
async fn of_a_view_and_its_connection_closing_racing_the_close_wins() {
    use crate::adapters::live::local_hub::JSON_PROTOCOL;
    use crate::adapters::live::room_group;
    use crate::signals::ViewRoom;
    use crate::store::Schema;
    use std::time::Duration;

    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = chat.with_local_hub("chat");
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let url = chat.signals.negotiate(&bob, "http://localhost").await.unwrap().url;
    let token = url.split_once("access_token=").unwrap().1;
    let hub = chat.local_hub().unwrap().clone();
    let (session, mut queue) = hub.connect(token, JSON_PROTOCOL).unwrap();
    let connected: serde_json::Value = serde_json::from_str(&session.connected()).unwrap();
    let connection = connected["connectionId"].as_str().unwrap().to_owned();

    let rooms = Schema::with_prefix("").unwrap().rooms;
    faults.delay_operation("upsert", Some(&rooms), 1, Duration::from_millis(600));
    let view = chat.signals.view_room(
        &bob,
        ViewRoom {
            connection_id: connection.clone(),
            room_id: Some(room.to_string()),
        },
    );
    let close = async {
        // Once the connection is in the group (the view is then held), it closes.
        loop {
            hub.send_to_group(&room_group(room.as_str()), br#"{"probe":1}"#);
            if queue.try_recv().is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(session);
        chat.signals.connection_closed(bob.user_id.as_str(), &connection).await;
    };
    let (viewed, ()) = tokio::join!(view, close);
    assert!(
        matches!(viewed, Ok(()) | Err(crate::error::Error::NotFound(_))),
        "{viewed:?}"
    );
    let lookers = chat.wiring.store.live.lookers(&room, Utc::now()).await.unwrap();
    assert!(lookers.viewers.is_empty(), "the closed connection shows nothing");
    assert_eq!(
        chat.wiring
            .store
            .live
            .shown_room(&bob.user_id, &connection)
            .await
            .unwrap()
            .flatten(),
        None
    );
}
