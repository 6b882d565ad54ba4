//! What one `listRooms` call (`Rooms::my_rooms`) costs the store, counted, not timed, on the
//! embedded store and on Azurite: `listRooms` for a member of 200 rooms costs a bounded number of reads.
//!
//! The bound, for a member of `N` rooms: `1 + 3·N` reads (the `UserRooms` range; per room its
//! room row and member row, and one `Messages` range of its activity row and unread messages),
//! plus one presence read for the whole listing when an unread `@here` needs it; in at most
//! `1 + 2·⌈N / ROOMS_IN_FLIGHT⌉` rounds (+1 for that presence read: the rooms are read in waves
//! of `ROOMS_IN_FLIGHT`, two rounds a wave), with never more than `2·ROOMS_IN_FLIGHT` calls in
//! flight. Rounds are the fault wrapper's (see
//! `round_trips.rs`); a latency on every call makes calls issued together overlap for sure.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};

use super::counting::{Backend, counting};
use crate::auth::Principal;
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::rooms::{NewRoom, RoomEntry, Visibility};
use crate::service::Chat;
use crate::service::rooms::ROOMS_IN_FLIGHT;
use crate::service::testing::{alice, user};
use crate::storage::Tables;
use crate::storage::faults::{FaultyTables, RecordedCall};
use crate::store::schema::Schema;

/// Long enough that calls issued together are all in flight before the first answers.
const LATENCY: Duration = Duration::from_millis(25);

/// More rooms than are read at once, so the listing needs several waves.
const ROOMS: usize = 2 * ROOMS_IN_FLIGHT + 6;

async fn service(tables: &FaultyTables, schema: &Schema) -> Chat {
    Chat::open(Tables::new(tables.clone()), schema.clone())
        .await
        .expect("Azurite must answer on 127.0.0.1:10002 (or TABLETALK_TEST_AZURITE)")
}

/// `text` as a mention of `id` (a user id, or `@here`).
fn mention(id: &str) -> String {
    format!(r#"<p>hi <span data-type="mention" data-id="{id}">@{id}</span></p>"#)
}

/// `n` public rooms of alice that bob has joined, each with one message of alice's after the
/// join naming bob — the first naming `@here` instead.
async fn rooms_of_bob(chat: &Chat, n: usize) -> Vec<RoomId> {
    let seeds: Vec<_> = (0..n)
        .map(|i| async move {
            let input = NewRoom {
                name: format!("room {i}"),
                description: None,
                visibility: Visibility::Public,
            };
            let room = chat.rooms.create_room(&alice(), input).await?;
            let room = RoomId::parse(&room.id)?;
            chat.rooms.join_room(&user("bob"), &room).await?;
            let text = if i == 0 { mention("@here") } else { mention("bob") };
            chat.sending
                .send_message(&alice(), &room, NewMessage::text(text))
                .await?;
            Ok::<_, crate::error::Error>(room)
        })
        .collect();
    futures::stream::iter(seeds)
        .buffer_unordered(8)
        .try_collect()
        .await
        .unwrap()
}

/// Bob's listing, with the store calls it made and the most of them in flight at once.
async fn counted_listing(
    chat: &Chat,
    tables: &FaultyTables,
    who: &Principal,
) -> (Vec<RoomEntry>, Vec<RecordedCall>, usize) {
    tables.set_latency(Some(LATENCY));
    tables.forget_calls();
    let listed = chat.rooms.my_rooms(who).await.unwrap();
    let calls = tables.calls_made();
    let most = tables.most_in_flight();
    tables.set_latency(None);
    (listed, calls, most)
}

fn count(calls: &[RecordedCall], operation: &str, table: &crate::storage::TableName) -> usize {
    let table = table.as_str().to_ascii_lowercase();
    calls
        .iter()
        .filter(|c| c.operation == operation && c.table == table)
        .count()
}

fn shown(calls: &[RecordedCall]) -> String {
    let lines: Vec<String> = calls
        .iter()
        .map(|c| format!("  round {}: {} {}", c.round, c.operation, c.table))
        .collect();
    lines.join("\n")
}

async fn listing_the_rooms_of_a_member_of_n_rooms_reads_one_plus_three_a_room_in_few_rounds(backend: Backend) {
    let (tables, schema) = counting(&backend, "rl");
    let chat = service(&tables, &schema).await;
    let rooms = rooms_of_bob(&chat, ROOMS).await;
    let (listed, calls, most) = counted_listing(&chat, &tables, &user("bob")).await;

    // Every field as before: each room once, newest activity first, alice's line unread and
    // mentioning bob (the `@here` one reaches him only while online, which he was not).
    assert_eq!(listed.len(), rooms.len());
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].last_activity_at >= w[1].last_activity_at)
    );
    for entry in &listed {
        assert_eq!(
            (entry.unread_count, entry.unread_capped),
            (1, false),
            "{}",
            entry.room.name
        );
        let expected = usize::from(entry.room.name != "room 0");
        assert_eq!(entry.mention_count, expected, "{}", entry.room.name);
        assert!(entry.last_message.is_some());
    }

    let n = rooms.len();
    let reads = calls.len();
    let shown = shown(&calls);
    eprintln!("{backend:?} listing of {n} rooms: {reads} calls, {most} at most in flight\n{shown}");
    assert_eq!(count(&calls, "query", &schema.user_rooms), 1, "{shown}");
    assert_eq!(
        count(&calls, "get", &schema.rooms),
        2 * n,
        "room row and member row: {shown}"
    );
    assert_eq!(count(&calls, "query", &schema.messages), n, "one range a room: {shown}");
    assert_eq!(
        count(&calls, "get", &schema.presence),
        1,
        "one presence read for @here: {shown}"
    );
    assert_eq!(reads, 1 + 3 * n + 1, "nothing else: {shown}");
    assert!(
        calls.iter().all(|c| matches!(c.operation, "get" | "query")),
        "no writes: {shown}"
    );

    let waves = n.div_ceil(ROOMS_IN_FLIGHT);
    let rounds = calls.iter().map(|c| c.round).max().unwrap();
    assert!(
        rounds <= 1 + 2 * waves + 1,
        "{rounds} rounds for {waves} waves:\n{shown}"
    );
    assert!(most <= 2 * ROOMS_IN_FLIGHT, "{most} calls in flight at once");
}

/// A `UserRooms` row whose membership is gone (a join whose member row was never written, or
/// a leave cut short) shows no room and costs its two point reads, no `Messages` read.
async fn a_listed_room_without_its_membership_is_left_out_for_two_reads(backend: Backend) {
    let (tables, schema) = counting(&backend, "rl");
    let chat = service(&tables, &schema).await;
    let rooms = rooms_of_bob(&chat, 2).await;
    let stale = &rooms[1];
    chat.wiring
        .store
        .members
        .remove_member(stale, &user("bob").user_id)
        .await
        .unwrap();
    chat.wiring
        .store
        .members
        .index_user_room(&user("bob").user_id, stale)
        .await
        .unwrap();

    let (listed, calls, _) = counted_listing(&chat, &tables, &user("bob")).await;
    let ids: Vec<&str> = listed.iter().map(|e| e.room.id.as_str()).collect();
    assert_eq!(ids, [rooms[0].as_str()], "only the room bob is in");
    let shown = shown(&calls);
    assert_eq!(count(&calls, "get", &schema.rooms), 4, "{shown}");
    assert_eq!(
        count(&calls, "query", &schema.messages),
        1,
        "none for the stale row: {shown}"
    );
}

/// A member of no rooms costs the one `UserRooms` read.
async fn a_member_of_no_rooms_costs_one_read(backend: Backend) {
    let (tables, schema) = counting(&backend, "rl");
    let chat = service(&tables, &schema).await;
    let (listed, calls, _) = counted_listing(&chat, &tables, &user("carol")).await;
    assert!(listed.is_empty());
    assert_eq!(calls.len(), 1, "{}", shown(&calls));
    assert_eq!(count(&calls, "query", &schema.user_rooms), 1);
}

on_both_backends!(
    listing_the_rooms_of_a_member_of_n_rooms_reads_one_plus_three_a_room_in_few_rounds,
    a_listed_room_without_its_membership_is_left_out_for_two_reads,
    a_member_of_no_rooms_costs_one_read,
);
