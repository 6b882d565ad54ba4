//! Service-level presence: many connections at once across two processes on one store, events
//! repeated or out of order, a store failing mid-way, and the coalescing of presence signals
//! as a room member's real local-hub connection receives them.

use std::time::Duration;

use crate::adapters::live::local_hub::{HubEvent, JSON_PROTOCOL};
use crate::presence::PresenceState;
use crate::service::Chat;
use crate::service::testing::{chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};
use crate::store::Schema;

/// Two services on one store, as two server processes would be.
async fn two_processes() -> (Chat, Chat, crate::ids::RoomId) {
    let tables = Tables::new(store());
    let (first, room) = chat_on(tables.clone()).await;
    let second = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
    (first, second, room)
}

#[tokio::test]
async fn many_tabs_on_two_processes_flip_online_once_and_away_only_when_the_last_closes() {
    let (first, second, _) = two_processes().await;
    let bob = user("bob").user_id;
    let now = chrono::Utc::now();
    // Ten tabs open at once, half through each process; each settles after its own write.
    let opens = (0..10).map(|i| {
        let (chat, bob) = (if i % 2 == 0 { &first } else { &second }, &bob);
        async move {
            chat.wiring
                .store
                .presence
                .open_connection(bob, &format!("p{}.{i}", i % 2), now)
                .await
                .unwrap();
            chat.wiring.store.presence.settle_presence(bob, now).await.unwrap()
        }
    });
    let flips = futures::future::join_all(opens).await;
    assert_eq!(
        flips.iter().filter(|f| f.is_some()).count(),
        1,
        "one caller announces online"
    );
    assert_eq!(
        first.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Online
    );

    // Nine close at once: still online.
    let closes = (0..9).map(|i| {
        let (chat, bob) = (if i % 2 == 0 { &second } else { &first }, &bob);
        async move {
            chat.wiring
                .store
                .presence
                .close_connection(bob, &format!("p{}.{i}", i % 2), now)
                .await
                .unwrap();
            chat.wiring.store.presence.settle_presence(bob, now).await.unwrap()
        }
    });
    let flips = futures::future::join_all(closes).await;
    assert!(flips.iter().all(Option::is_none), "no flip while a tab is open");
    assert_eq!(
        second.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Online
    );

    // The last one closes (through the other process): away, last seen then.
    second
        .presence_keeper
        .connection_changed(&bob, "p1.9", false)
        .await
        .unwrap();
    let presence = first.wiring.store.presence.presence(&bob).await.unwrap();
    assert_eq!(presence.state, PresenceState::Away);
    assert!(presence.last_seen.is_some());
}

#[tokio::test]
async fn a_repeated_or_late_connected_event_never_brings_a_closed_connection_back() {
    let (chat, _) = chat_on(Tables::new(store())).await;
    let bob = user("bob").user_id;
    chat.presence_keeper.connection_changed(&bob, "c1", true).await.unwrap();
    chat.presence_keeper.connection_changed(&bob, "c1", true).await.unwrap();
    chat.presence_keeper
        .connection_changed(&bob, "c1", false)
        .await
        .unwrap();
    assert_eq!(
        chat.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Away
    );
    // A late (retried) connected of the same connection, and a repeated disconnected.
    chat.presence_keeper.connection_changed(&bob, "c1", true).await.unwrap();
    chat.presence_keeper
        .connection_changed(&bob, "c1", false)
        .await
        .unwrap();
    assert_eq!(
        chat.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Away
    );
    // A disconnected that overtook its connected leaves the user away too.
    chat.presence_keeper
        .connection_changed(&bob, "c2", false)
        .await
        .unwrap();
    chat.presence_keeper.connection_changed(&bob, "c2", true).await.unwrap();
    assert_eq!(
        chat.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Away
    );
}

#[tokio::test]
async fn a_presence_write_that_fails_is_settled_by_the_next_event() {
    let faults = FaultyTables::new(store());
    let (chat, _) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob").user_id;
    chat.presence_keeper.connection_changed(&bob, "c1", true).await.unwrap();
    // The close is recorded, but the presence row's conditional write fails.
    let table = chat.wiring.store.schema().presence.clone();
    faults.fail_operation(
        "update",
        Some(&table),
        1,
        StoreError::new(ErrorKind::Unavailable, "injected"),
    );
    let failed = chat.presence_keeper.connection_changed(&bob, "c1", false).await;
    assert_eq!(failed.unwrap_err().code(), "UNAVAILABLE");
    assert_eq!(
        chat.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Online
    );
    // Web PubSub does not retry a disconnected; the next event of that user settles it (here
    // a repeat, as a retry or another tab's close would be).
    chat.presence_keeper
        .connection_changed(&bob, "c1", false)
        .await
        .unwrap();
    assert_eq!(
        chat.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Away
    );
}

/// Reads presence signals about `user` from a hub connection's queue until `quiet` passes with
/// none; answers their states in order.
async fn presence_signals(
    queue: &mut tokio::sync::mpsc::Receiver<std::sync::Arc<str>>,
    user: &str,
    quiet: Duration,
) -> Vec<String> {
    let mut states = Vec::new();
    while let Ok(Some(frame)) = tokio::time::timeout(quiet, queue.recv()).await {
        let data: serde_json::Value = serde_json::from_str(&frame).unwrap();
        if data["type"] == "presence" && data["userId"] == user {
            states.push(data["state"].as_str().unwrap().to_owned());
        }
    }
    states
}

#[tokio::test]
async fn a_flapping_user_costs_a_room_one_signal_per_interval_and_the_last_state_wins() {
    let interval = Duration::from_millis(500);
    let (chat, room) = chat_on(Tables::new(store())).await;
    let chat = chat.with_local_hub("chat").with_presence_interval(interval);
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    // Alice watches the room over a real hub connection.
    let hub = chat.local_hub().unwrap().clone();
    let (url, _) = hub
        .client_url("http://localhost", "alice", &[room.to_string()], chrono::Utc::now())
        .unwrap();
    let token = url.split_once("access_token=").unwrap().1;
    let (mut session, mut queue) = hub.connect(token, JSON_PROTOCOL).unwrap();
    session.handle(&format!(r#"{{"type":"joinGroup","group":"room.{room}"}}"#));

    // Bob flaps: twenty changes in a row, ending away. The first one's signal goes at once
    // (it carries the state as stored when it is sent, so it is read before Bob goes on).
    let started = std::time::Instant::now();
    chat.presence_keeper
        .connection_changed(&bob.user_id, "c0", true)
        .await
        .unwrap();
    let mut states = presence_signals(&mut queue, "bob", interval / 5).await;
    for i in 0..10 {
        if i > 0 {
            chat.presence_keeper
                .connection_changed(&bob.user_id, &format!("c{i}"), true)
                .await
                .unwrap();
        }
        chat.presence_keeper
            .connection_changed(&bob.user_id, &format!("c{i}"), false)
            .await
            .unwrap();
    }
    let flapping = started.elapsed();
    states.extend(presence_signals(&mut queue, "bob", interval * 3).await);
    // One at once, then at most one per interval (however long the flapping took on this
    // machine), the last one carrying the last state.
    let most = 2 + (flapping.as_millis() / interval.as_millis()) as usize;
    assert!(states.len() >= 2 && states.len() <= most, "{states:?} in {flapping:?}");
    assert_eq!(states.first().map(String::as_str), Some("online"));
    assert_eq!(states.last().map(String::as_str), Some("away"), "the last state wins");
}

#[tokio::test]
async fn connections_a_stopped_process_left_open_are_closed_by_another_processs_sweep() {
    let (first, second, _) = two_processes().await;
    let (bob, carol) = (user("bob").user_id, user("carol").user_id);
    let now = chrono::Utc::now();
    let opened = |user: &crate::ids::UserId, connection: &str| HubEvent::Opened {
        user: user.to_string(),
        connection: connection.to_owned(),
    };
    // The first process's hub had two tabs of bob open when it stopped beating; the second's
    // hub, alive, has carol's.
    first
        .wiring
        .store
        .presence
        .beat_hub("stopped", now - chrono::Duration::seconds(1))
        .await
        .unwrap();
    first
        .presence_keeper
        .hub_event("stopped", opened(&bob, "local-1"))
        .await
        .unwrap();
    first
        .presence_keeper
        .hub_event("stopped", opened(&bob, "local-2"))
        .await
        .unwrap();
    second
        .wiring
        .store
        .presence
        .beat_hub("alive", now + chrono::Duration::seconds(90))
        .await
        .unwrap();
    second
        .presence_keeper
        .hub_event("alive", opened(&carol, "local-1"))
        .await
        .unwrap();
    assert_eq!(
        second.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Online
    );

    assert_eq!(second.presence_keeper.sweep_stopped_hubs(now).await.unwrap(), 2);
    assert_eq!(
        second.wiring.store.presence.presence(&bob).await.unwrap().state,
        PresenceState::Away
    );
    assert_eq!(
        second.wiring.store.presence.presence(&carol).await.unwrap().state,
        PresenceState::Online,
        "a live hub is left alone"
    );
    // Nothing left: the next sweep forgets the stopped hub and closes nothing.
    assert_eq!(second.presence_keeper.sweep_stopped_hubs(now).await.unwrap(), 0);
    assert_eq!(
        second.wiring.store.presence.lapsed_hubs(now).await.unwrap(),
        Vec::<String>::new()
    );
}

/// A process that stopped could not say its connections closed, so the rooms they showed
/// would hold back their users' notices until the rows lapsed an hour later; the sweep that
/// closes them ends what they showed too.
#[tokio::test]
async fn the_sweep_of_a_stopped_process_ends_what_its_connections_showed() {
    let (first, second, room) = two_processes().await;
    let bob = user("bob");
    first.rooms.join_room(&bob, &room).await.unwrap();
    let now = chrono::Utc::now();
    first
        .wiring
        .store
        .presence
        .beat_hub("stopped", now - chrono::Duration::seconds(1))
        .await
        .unwrap();
    let opened = HubEvent::Opened {
        user: bob.user_id.to_string(),
        connection: "local-dead-1".into(),
    };
    first.presence_keeper.hub_event("stopped", opened).await.unwrap();
    // What the stopped process's view of that connection left in the store.
    first
        .wiring
        .store
        .live
        .add_viewer(&room, "local-dead-1", &bob.user_id, now)
        .await
        .unwrap();
    first
        .wiring
        .store
        .live
        .show_room(&bob.user_id, "local-dead-1", Some(&room), false, now)
        .await
        .unwrap();
    assert_eq!(
        first.wiring.store.live.lookers(&room, now).await.unwrap().viewers,
        [bob.user_id.clone()]
    );

    assert_eq!(second.presence_keeper.sweep_stopped_hubs(now).await.unwrap(), 1);
    assert!(
        second
            .wiring
            .store
            .live
            .lookers(&room, now)
            .await
            .unwrap()
            .viewers
            .is_empty(),
        "bob no longer looks at the room"
    );
    assert_eq!(
        second
            .wiring
            .store
            .live
            .shown_room(&bob.user_id, "local-dead-1")
            .await
            .unwrap(),
        None,
        "nor is the connection remembered"
    );
}
