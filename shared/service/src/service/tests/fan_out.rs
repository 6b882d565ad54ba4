//! What a listing of many rooms puts on the store at once, counted, not timed, on the embedded
//! store and on Azurite: the caller's pending invitations, followed threads and a change feed
//! of many conversations are each read a wave of rooms at a time (`ROOMS_IN_FLIGHT`), as
//! `listRooms` is (`room_list.rs`), never all at once. And nobody can fill another user's
//! invitations past `MAX_PENDING_PER_USER`.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};

use super::counting::{Backend, counting};
use crate::error::Error;
use crate::ids::RoomId;
use crate::messages::feed::{MessageChangeCursorInput, MessageChangesInput};
use crate::messages::send::NewMessage;
use crate::rooms::invitations::{MAX_PENDING_PER_USER, NewInvitation};
use crate::rooms::{NewRoom, Visibility};
use crate::service::Chat;
use crate::service::rooms::ROOMS_IN_FLIGHT;
use crate::service::testing::{alice, user};
use crate::storage::Tables;
use crate::storage::faults::FaultyTables;

/// Long enough that calls issued together are all in flight before the first answers.
const LATENCY: Duration = Duration::from_millis(25);

/// More rooms than are read at once, so that reading them all together would put more than
/// four waves' worth of calls on the store.
const ROOMS: usize = 2 * ROOMS_IN_FLIGHT + 6;

/// `n` public rooms of alice's, each with one message of hers; `prepare` runs for each.
async fn rooms_of_alice(chat: &Chat, n: usize, name: &str) -> Vec<(RoomId, String)> {
    let seeds: Vec<_> = (0..n)
        .map(|i| async move {
            let input = NewRoom {
                name: format!("{name} {i}"),
                description: None,
                visibility: Visibility::Public,
            };
            let room = RoomId::parse(&chat.rooms.create_room(&alice(), input).await?.id)?;
            let sent = chat
                .sending
                .send_message(&alice(), &room, NewMessage::text("<p>hello</p>"))
                .await?;
            Ok::<_, Error>((room, sent.message.id))
        })
        .collect();
    futures::stream::iter(seeds)
        .buffer_unordered(8)
        .try_collect()
        .await
        .unwrap()
}

/// Runs `read` with a latency on every store call; the most calls it had in flight at once.
async fn most_in_flight<T>(tables: &FaultyTables, read: impl Future<Output = T>) -> (T, usize) {
    tables.set_latency(Some(LATENCY));
    tables.forget_calls();
    let answer = read.await;
    let most = tables.most_in_flight();
    tables.set_latency(None);
    (answer, most)
}

async fn chat(tables: &FaultyTables, schema: &crate::store::schema::Schema) -> Chat {
    Chat::open(Tables::new(tables.clone()), schema.clone()).await.unwrap()
}

async fn pending_invitations_are_capped_and_read_a_wave_at_a_time(backend: Backend) {
    let (tables, schema) = counting(&backend, "fi");
    let chat = chat(&tables, &schema).await;
    let rooms = rooms_of_alice(&chat, MAX_PENDING_PER_USER + 1, "invited").await;
    let invite = async |room: &RoomId| {
        let input = NewInvitation {
            user_id: Some("bob".into()),
            ..NewInvitation::default()
        };
        chat.rooms.create_invitation(&alice(), room, input).await
    };
    for (room, _) in &rooms[..MAX_PENDING_PER_USER] {
        invite(room).await.unwrap();
    }
    let (last, _) = &rooms[MAX_PENDING_PER_USER];
    assert!(
        matches!(invite(last).await, Err(Error::Conflict(_))),
        "one invitation past the cap"
    );
    // Inviting again into a room already waiting replaces that invitation: not one more.
    invite(&rooms[0].0).await.unwrap();
    // One that no longer waits (bob joined that room by its id) makes room for another: a
    // full list is looked through, so it cannot be kept full with invitations bob never sees.
    chat.rooms.join_room(&user("bob"), &rooms[1].0).await.unwrap();
    invite(last).await.unwrap();

    let (pending, most) = most_in_flight(&tables, chat.rooms.my_invitations(&user("bob"))).await;
    assert_eq!(pending.unwrap().len(), MAX_PENDING_PER_USER);
    assert!(most <= 3 * ROOMS_IN_FLIGHT, "{most} calls in flight at once");
}

async fn followed_threads_are_read_a_wave_at_a_time(backend: Backend) {
    let (tables, schema) = counting(&backend, "ft");
    let chat = chat(&tables, &schema).await;
    for (room, root) in rooms_of_alice(&chat, ROOMS, "threads").await {
        chat.rooms.join_room(&user("bob"), &room).await.unwrap();
        chat.reading
            .follow_thread(&user("bob"), &room, &crate::keys::MessageKey::parse(&root).unwrap())
            .await
            .unwrap();
    }
    let (threads, most) = most_in_flight(&tables, chat.reading.my_threads(&user("bob"))).await;
    assert_eq!(threads.unwrap().len(), ROOMS);
    assert!(most <= 4 * ROOMS_IN_FLIGHT, "{most} calls in flight at once");
}

async fn a_change_feed_of_many_conversations_is_read_a_wave_at_a_time(backend: Backend) {
    let (tables, schema) = counting(&backend, "fc");
    let chat = chat(&tables, &schema).await;
    let mut conversations = Vec::new();
    for (room, _) in rooms_of_alice(&chat, ROOMS, "feed").await {
        chat.rooms.join_room(&user("bob"), &room).await.unwrap();
        conversations.push(MessageChangeCursorInput {
            conversation_id: room.to_string(),
            after: None,
        });
    }
    let input = MessageChangesInput {
        server_id: "default".into(),
        conversations,
        limit: None,
    };
    let (answer, most) = most_in_flight(&tables, chat.reading.message_changes(&user("bob"), input)).await;
    assert_eq!(answer.unwrap().message_changes.len(), ROOMS);
    assert!(most <= 4 * ROOMS_IN_FLIGHT, "{most} calls in flight at once");
}

on_both_backends!(
    pending_invitations_are_capped_and_read_a_wave_at_a_time,
    followed_threads_are_read_a_wave_at_a_time,
    a_change_feed_of_many_conversations_is_read_a_wave_at_a_time,
);
