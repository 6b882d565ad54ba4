//! Tiered live delivery and live membership the server enforces: a
//! connection is in the group of the one room it shows (`PUT /api/live/view`), put there by
//! the server after a membership check, and gets that room's messages in full; every other
//! room of the member sends a short `room.activity` notice — once until they look (show or
//! read the room), and for each message that mentions them — with the counts the room list
//! answers. On the local hub over a real WebSocket, and against the Web PubSub REST stand-in,
//! which checks each call's token and keeps which connection is in which group.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::mention;
use crate::helpers::web_pubsub::start_hub;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with};
use crate::live::{Socket, connect_viewing, next_frame, view};

backend_tests!(
    a_viewer_gets_its_rooms_messages_in_full_and_one_notice_of_another_until_it_looks,
    switching_rooms_moves_the_connection_and_the_room_left_sends_notices,
    viewing_answers_bad_input_and_strangers_as_errors,
    with_web_pubsub_the_server_moves_connections_between_groups_by_rest,
    with_web_pubsub_a_kicked_members_connection_leaves_the_group_for_good,
    two_processes_on_one_store_share_who_looks_at_a_room,
    a_closed_connection_no_longer_holds_back_its_rooms_notices,
    with_web_pubsub_only_the_user_a_connected_event_named_can_view_through_the_connection,
    with_web_pubsub_a_disconnected_connection_no_longer_holds_back_its_rooms_notices,
    two_self_hosted_processes_keep_apart_the_connections_showing_a_room,
);

/// `(unreadCount, mentionCount)` of `room` in `user`'s room list.
async fn counts(app: &TestApp, user: &str, room: &str) -> (u64, u64) {
    let rooms = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_eq!(rooms.status, StatusCode::OK, "{}", rooms.body);
    let entry = rooms
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == room)
        .expect("listed")
        .clone();
    (
        entry["unreadCount"].as_u64().unwrap(),
        entry["mentionCount"].as_u64().unwrap(),
    )
}

/// The next frame's signal (its `data`).
async fn next_signal(socket: &mut Socket) -> Value {
    let frame = next_frame(socket).await;
    assert_eq!(frame["from"], "server", "{frame}");
    frame["data"].clone()
}

/// Asserts `signal` is a notice about `room` whose counts are the room list's, and returns
/// them with whether it says `mentioned`.
async fn assert_notice(app: &TestApp, signal: &Value, user: &str, room: &str) -> (u64, u64, bool) {
    assert_eq!(signal["type"], "room.activity", "{signal}");
    assert_eq!(signal["roomId"], room, "{signal}");
    assert!(signal.get("message").is_none(), "a notice carries no message: {signal}");
    let carried = (
        signal["unreadCount"].as_u64().unwrap(),
        signal["mentionCount"].as_u64().unwrap(),
    );
    assert_eq!(
        carried,
        counts(app, user, room).await,
        "the notice's counts are the room list's"
    );
    (carried.0, carried.1, signal["mentioned"].as_bool().unwrap())
}

async fn mark_read(app: &TestApp, user: &str, room: &str) {
    let reply = app
        .call(
            Method::POST,
            &format!("/api/rooms/{room}/read"),
            Some(user),
            Some(json!({})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);
}

/// The frames a connection gets are in send order, so "the next frame is X" proves that
/// nothing was sent to it between.
async fn a_viewer_gets_its_rooms_messages_in_full_and_one_notice_of_another_until_it_looks(backend: Backend) {
    let app = spawn_app(&backend);
    let shown = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    for room in [&shown, &other] {
        app.join("bob", room).await;
    }
    let (mut socket, _) = connect_viewing(&app, "bob", &shown).await;

    let id = app.post("alice", &shown, "<p>a1</p>").await;
    let full = next_signal(&mut socket).await;
    assert_eq!(full["type"], "message.created");
    assert_eq!(full["roomId"], shown.as_str());
    assert_eq!(full["message"]["id"], id.as_str());

    // The other room: one notice, then none until bob looks or is mentioned.
    app.post("alice", &other, "<p>b1</p>").await;
    let first = next_signal(&mut socket).await;
    assert_eq!(assert_notice(&app, &first, "bob", &other).await, (1, 0, false));
    app.post("alice", &other, "<p>b2</p>").await;
    app.post("alice", &other, &format!("<p>b3 {}</p>", mention("bob")))
        .await;
    let mentioned = next_signal(&mut socket).await;
    assert_eq!(
        assert_notice(&app, &mentioned, "bob", &other).await,
        (3, 1, true),
        "b2 sent nothing; the mention did, with all three unread"
    );
    app.post("alice", &other, &format!("<p>b4 {}</p>", mention("bob")))
        .await;
    let again = next_signal(&mut socket).await;
    assert_eq!(
        assert_notice(&app, &again, "bob", &other).await,
        (4, 2, true),
        "each mention tells"
    );

    // Reading the room is looking at it: the next message tells again, once.
    app.post("alice", &other, "<p>b5</p>").await;
    mark_read(&app, "bob", &other).await;
    app.post("alice", &other, "<p>b6</p>").await;
    let after_read = next_signal(&mut socket).await;
    assert_eq!(assert_notice(&app, &after_read, "bob", &other).await, (1, 0, false));
    app.post("alice", &other, "<p>b7</p>").await;

    // The shown room still comes in full, and its sender's own messages tell the sender
    // nothing.
    app.post("bob", &other, "<p>mine</p>").await;
    let id = app.post("alice", &shown, "<p>a2</p>").await;
    let full = next_signal(&mut socket).await;
    assert_eq!(
        (full["type"].as_str(), full["message"]["id"].as_str()),
        (Some("message.created"), Some(id.as_str())),
        "b7 and bob's own message sent nothing: {full}"
    );
}

async fn switching_rooms_moves_the_connection_and_the_room_left_sends_notices(backend: Backend) {
    let app = spawn_app(&backend);
    let first = app.create_room("alice").await;
    let second = app.create_room("alice").await;
    for room in [&first, &second] {
        app.join("bob", room).await;
    }
    let (mut socket, connection) = connect_viewing(&app, "bob", &first).await;
    let switched = view(&app, "bob", &connection, Some(&second)).await;
    assert_eq!(switched.status, StatusCode::NO_CONTENT, "{}", switched.body);

    // One room per connection: the room left sends a notice, the room shown the message.
    app.post("alice", &first, "<p>to the room left</p>").await;
    let notice = next_signal(&mut socket).await;
    let (unread, _, _) = assert_notice(&app, &notice, "bob", &first).await;
    assert!(unread >= 1);
    app.post("alice", &first, "<p>again</p>").await;
    let id = app.post("alice", &second, "<p>to the room shown</p>").await;
    let full = next_signal(&mut socket).await;
    assert_eq!(full["type"], "message.created", "the room left told once: {full}");
    assert_eq!(full["message"]["id"], id.as_str());

    // Showing no room: every room sends notices.
    let none = view(&app, "bob", &connection, None).await;
    assert_eq!(none.status, StatusCode::NO_CONTENT, "{}", none.body);
    app.post("alice", &second, "<p>now a notice</p>").await;
    let notice = next_signal(&mut socket).await;
    assert_notice(&app, &notice, "bob", &second).await;
}

async fn viewing_answers_bad_input_and_strangers_as_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let strangers = app.create_room("carol").await;
    app.join("bob", &room).await;
    app.join("eve", &room).await;
    let (_socket, connection) = connect_viewing(&app, "bob", &room).await;
    let put = |user: &'static str, body: Value| {
        let app = &app;
        async move { app.call(Method::PUT, "/api/live/view", Some(user), Some(body)).await }
    };
    for bad in ["", "has space", "a/b", &"x".repeat(129)] {
        put("bob", json!({ "connectionId": bad, "roomId": room }))
            .await
            .assert_error(422, "VALIDATION");
    }
    for shape in [
        json!({ "roomId": room }),
        json!({ "connectionId": connection, "roomId": 7 }),
        json!({ "connectionId": connection, "extra": true }),
    ] {
        put("bob", shape).await.assert_error(422, "VALIDATION");
    }
    let no_json = app
        .http
        .put(format!("{}/api/live/view", app.base))
        .bearer_auth(crate::helpers::token_with("bob", &app.secret, 3600))
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(no_json.status(), StatusCode::BAD_REQUEST);
    put("bob", json!({ "connectionId": connection, "roomId": "not-a-room" }))
        .await
        .assert_error(404, "NOT_FOUND");
    // A room bob is not in answers as missing, as for any room operation.
    put("bob", json!({ "connectionId": connection, "roomId": strangers }))
        .await
        .assert_error(404, "NOT_FOUND");
    // A connection that is not open, or not the caller's, is missing too.
    put("bob", json!({ "connectionId": "local-999999", "roomId": room }))
        .await
        .assert_error(404, "NOT_FOUND");
    put("eve", json!({ "connectionId": connection, "roomId": room }))
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(
        Method::PUT,
        "/api/live/view",
        None,
        Some(json!({ "connectionId": connection, "roomId": room })),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    // Without a live channel there is nothing to view.
    let functions = spawn_app_with(&backend, &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")]);
    functions
        .call(
            Method::PUT,
            "/api/live/view",
            Some("bob"),
            Some(json!({ "connectionId": "c1", "roomId": room })),
        )
        .await
        .assert_error(503, "UNAVAILABLE");
}

/// Waits until `check` holds, for what the app sends Web PubSub in the background.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen");
}

async fn with_web_pubsub_the_server_moves_connections_between_groups_by_rest(backend: Backend) {
    let (hub, connection_string) = start_hub(&[]).await;
    let app = spawn_app_with(
        &backend,
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection_string.as_str())],
    );
    let first = app.create_room("alice").await;
    let second = app.create_room("alice").await;
    for room in [&first, &second] {
        app.join("bob", room).await;
    }
    hub.connect(&app, "conn-bob", "bob").await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);

    let shown = view(&app, "bob", "conn-bob", Some(&first)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    assert!(hub.in_group("conn-bob", &format!("room.{first}")));
    let switched = view(&app, "bob", "conn-bob", Some(&second)).await;
    assert_eq!(switched.status, StatusCode::NO_CONTENT, "{}", switched.body);
    assert!(hub.in_group("conn-bob", &format!("room.{second}")));
    assert!(
        !hub.in_group("conn-bob", &format!("room.{first}")),
        "one room per connection"
    );
    let calls = hub.calls.lock().unwrap().clone();
    for expected in [
        format!("PUT /api/hubs/chat/groups/room.{first}/connections/conn-bob"),
        format!("PUT /api/hubs/chat/groups/room.{second}/connections/conn-bob"),
        format!("DELETE /api/hubs/chat/groups/room.{first}/connections/conn-bob"),
    ] {
        assert!(calls.contains(&expected), "{expected} in {calls:?}");
    }
    // A connection no connected event named waits for it (409); one whose event came but
    // that the service does not know is missing.
    view(&app, "bob", "conn-ghost", Some(&first))
        .await
        .assert_error(409, "CONFLICT");
    let event = hub.post_event(&app, "connected", "bob", "conn-ghost").await;
    assert_eq!(event, StatusCode::NO_CONTENT);
    view(&app, "bob", "conn-ghost", Some(&first))
        .await
        .assert_error(404, "NOT_FOUND");

    // The room shown gets the message through its group; the room left a notice to bob alone.
    app.post("alice", &second, "<p>in full</p>").await;
    app.post("alice", &first, "<p>a notice</p>").await;
    eventually("the group send and the notice", || {
        !hub.notices.lock().unwrap().is_empty()
            && hub
                .sent
                .lock()
                .unwrap()
                .iter()
                .any(|(group, body)| *group == format!("room.{second}") && body["type"] == "message.created")
    })
    .await;
    let notices = hub.notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let (user, notice) = &notices[0];
    assert_eq!(user, "bob", "a user-targeted send");
    assert_eq!(notice["type"], "room.activity");
    assert_eq!(notice["roomId"], first.as_str());
    let carried = (
        notice["unreadCount"].as_u64().unwrap(),
        notice["mentionCount"].as_u64().unwrap(),
    );
    assert_eq!(carried, counts(&app, "bob", &first).await);
}

async fn with_web_pubsub_a_kicked_members_connection_leaves_the_group_for_good(backend: Backend) {
    let (hub, connection_string) = start_hub(&[]).await;
    let app = spawn_app_with(
        &backend,
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection_string.as_str())],
    );
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    hub.connect(&app, "conn-bob", "bob").await;
    let group = format!("room.{room}");
    let shown = view(&app, "bob", "conn-bob", Some(&room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    assert!(hub.in_group("conn-bob", &group));

    app.kick("alice", &room, "bob").await;
    eventually("bob's removal from the group", || !hub.in_group("conn-bob", &group)).await;
    let removal = format!("DELETE /api/hubs/chat/users/bob/groups/{group}");
    assert!(hub.calls.lock().unwrap().contains(&removal));
    // The server does not put him back, and his token could not (it holds no role; see
    // live::negotiate_hands_out_a_token_that_may_join_no_group).
    let adds_before = hub
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.starts_with("PUT "))
        .count();
    view(&app, "bob", "conn-bob", Some(&room))
        .await
        .assert_error(404, "NOT_FOUND");
    let adds_after = hub
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.starts_with("PUT "))
        .count();
    assert_eq!(adds_before, adds_after, "no add was even tried");
    assert!(!hub.in_group("conn-bob", &group));
    // Nor is he told of the room any more: a mention of him and carol tells carol alone.
    app.join("carol", &room).await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("carol"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    let text = format!("<p>{} {}</p>", mention("bob"), mention("carol"));
    app.post("alice", &room, &text).await;
    eventually("carol's notice", || {
        hub.notices.lock().unwrap().iter().any(|(user, _)| user == "carol")
    })
    .await;
    assert!(
        hub.notices.lock().unwrap().iter().all(|(user, _)| user != "bob"),
        "{:?}",
        hub.notices.lock().unwrap()
    );
}

/// Who looks at a room lives in the store, so a view through one process and sends through
/// another tell the same people the same way.
async fn two_processes_on_one_store_share_who_looks_at_a_room(backend: Backend) {
    let (hub, connection_string) = start_hub(&[]).await;
    let settings = [("TABLETALK_WEBPUBSUB_CONNECTION", connection_string.as_str())];
    let one = spawn_app_with(&backend, &settings);
    let two = spawn_app_with(&backend, &settings);
    let shown = one.create_room("alice").await;
    let other = one.create_room("alice").await;
    for room in [&shown, &other] {
        one.join("bob", room).await;
    }
    hub.connect(&two, "conn-bob", "bob").await;
    let negotiated = one.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    let viewed = view(&one, "bob", "conn-bob", Some(&shown)).await;
    assert_eq!(viewed.status, StatusCode::NO_CONTENT, "{}", viewed.body);

    two.post("alice", &shown, "<p>in full</p>").await;
    two.post("alice", &other, "<p>first</p>").await;
    two.post("alice", &other, "<p>second</p>").await;
    two.post("alice", &other, &format!("<p>{}</p>", mention("bob"))).await;
    eventually("two notices", || hub.notices.lock().unwrap().len() >= 2).await;
    let notices = hub.notices.lock().unwrap().clone();
    assert!(
        notices
            .iter()
            .all(|(user, n)| user == "bob" && n["roomId"] == other.as_str()),
        "none for the room bob shows: {notices:?}"
    );
    let mut mentioned: Vec<bool> = notices.iter().map(|(_, n)| n["mentioned"].as_bool().unwrap()).collect();
    mentioned.sort();
    assert_eq!(
        mentioned,
        [false, true],
        "the first message and the mention; not the second"
    );
    let last = notices.iter().find(|(_, n)| n["mentioned"] == true).unwrap();
    let carried = (
        last.1["unreadCount"].as_u64().unwrap(),
        last.1["mentionCount"].as_u64().unwrap(),
    );
    assert_eq!(carried, counts(&two, "bob", &other).await);
}

/// The next text frame within `ms` milliseconds, if any.
async fn frame_within(socket: &mut Socket, ms: u64) -> Option<Value> {
    use futures::StreamExt;
    let wait = std::time::Duration::from_millis(ms);
    loop {
        let frame = tokio::time::timeout(wait, socket.next()).await.ok()??.ok()?;
        if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
            return serde_json::from_str(text.as_str()).ok();
        }
    }
}

/// While one tab shows a room, its messages tell the user's other tabs nothing (they are
/// looking at it); once that tab closes, the room's next message brings them a notice.
async fn a_closed_connection_no_longer_holds_back_its_rooms_notices(backend: Backend) {
    let app = spawn_app(&backend);
    let shown = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    for room in [&shown, &other] {
        app.join("bob", room).await;
    }
    let (first_tab, _) = connect_viewing(&app, "bob", &shown).await;
    let (mut second_tab, _) = connect_viewing(&app, "bob", &other).await;
    app.post("alice", &shown, "<p>seen in the first tab</p>").await;
    let marker = app.post("alice", &other, "<p>marker</p>").await;
    let next = next_signal(&mut second_tab).await;
    assert_eq!(
        (next["type"].as_str(), next["message"]["id"].as_str()),
        (Some("message.created"), Some(marker.as_str())),
        "no notice while bob looks at the room in the first tab: {next}"
    );

    drop(first_tab);
    // The server learns of the close when its socket ends; each round sends one message.
    for _ in 0..50 {
        app.post("alice", &shown, "<p>anyone?</p>").await;
        if let Some(frame) = frame_within(&mut second_tab, 200).await {
            assert_eq!(frame["data"]["type"], "room.activity", "{frame}");
            assert_eq!(frame["data"]["roomId"], shown.as_str(), "{frame}");
            return;
        }
    }
    panic!("no notice after the first tab closed");
}

/// Web PubSub cannot say whose a connection is, but the signed `connected` event can: a view
/// through a connection the caller's own `connected` event did not name is refused, so no one
/// can put another user's connection in a room of theirs (and so show it that room's
/// messages). Before that event arrives the view answers 409 (the client tries again); after
/// the `disconnected` event, 404.
async fn with_web_pubsub_only_the_user_a_connected_event_named_can_view_through_the_connection(backend: Backend) {
    let (hub, connection_string) = start_hub(&[]).await;
    let app = spawn_app_with(
        &backend,
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection_string.as_str())],
    );
    let secret = app.create_room("mallory").await;
    let group = format!("room.{secret}");
    // Bob's client is open at the service, but its connected event has not come yet.
    hub.open("conn-bob", "bob");
    let bobs_room = app.create_room("alice").await;
    app.join("bob", &bobs_room).await;
    view(&app, "bob", "conn-bob", Some(&bobs_room))
        .await
        .assert_error(409, "CONFLICT");
    assert!(!hub.in_group("conn-bob", &format!("room.{bobs_room}")));

    // Mallory learned bob's connection id somehow: she cannot put it in her room, before or
    // after his connected event.
    view(&app, "mallory", "conn-bob", Some(&secret))
        .await
        .assert_error(409, "CONFLICT");
    let event = hub.post_event(&app, "connected", "bob", "conn-bob").await;
    assert_eq!(event, StatusCode::NO_CONTENT);
    view(&app, "mallory", "conn-bob", Some(&secret))
        .await
        .assert_error(409, "CONFLICT");
    assert!(
        !hub.in_group("conn-bob", &group),
        "bob's connection never joins mallory's room"
    );
    let adds: Vec<String> = hub
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.starts_with("PUT "))
        .cloned()
        .collect();
    assert!(adds.is_empty(), "no add was even tried: {adds:?}");
    app.post("mallory", &secret, "<p>for members only</p>").await;

    // Bob's own view now works; once the connection closed it is missing.
    let shown = view(&app, "bob", "conn-bob", Some(&bobs_room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    assert!(hub.in_group("conn-bob", &format!("room.{bobs_room}")));
    hub.disconnect(&app, "conn-bob", "bob").await;
    hub.open("conn-bob", "bob");
    view(&app, "bob", "conn-bob", Some(&bobs_room))
        .await
        .assert_error(404, "NOT_FOUND");
}

/// The `disconnected` event ends what the connection showed: while bob's first connection
/// shows a room, its messages tell him nothing (he looks at it); once that connection's
/// signed `disconnected` event came, the room's next message brings him a notice.
async fn with_web_pubsub_a_disconnected_connection_no_longer_holds_back_its_rooms_notices(backend: Backend) {
    let (hub, connection_string) = start_hub(&[]).await;
    let app = spawn_app_with(
        &backend,
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection_string.as_str())],
    );
    let shown = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    let marker = app.create_room("alice").await;
    for room in [&shown, &other, &marker] {
        app.join("bob", room).await;
    }
    hub.connect(&app, "conn-1", "bob").await;
    hub.connect(&app, "conn-2", "bob").await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    for (connection, room) in [("conn-1", &shown), ("conn-2", &other)] {
        let viewed = view(&app, "bob", connection, Some(room)).await;
        assert_eq!(viewed.status, StatusCode::NO_CONTENT, "{}", viewed.body);
    }
    let about = |room: &str| {
        hub.notices
            .lock()
            .unwrap()
            .iter()
            .filter(|(user, n)| user == "bob" && n["roomId"] == room)
            .count()
    };

    app.post("alice", &shown, "<p>seen through conn-1</p>").await;
    app.post("alice", &marker, "<p>marker</p>").await;
    eventually("the marker room's notice", || about(&marker) == 1).await;
    assert_eq!(about(&shown), 0, "bob looks at the room");

    hub.disconnect(&app, "conn-1", "bob").await;
    app.post("alice", &shown, "<p>after the close</p>").await;
    eventually("the shown room's notice", || about(&shown) == 1).await;
    let notice = hub
        .notices
        .lock()
        .unwrap()
        .iter()
        .find(|(_, n)| n["roomId"] == shown.as_str())
        .unwrap()
        .1
        .clone();
    assert_eq!(notice["type"], "room.activity");
    let carried = (
        notice["unreadCount"].as_u64().unwrap(),
        notice["mentionCount"].as_u64().unwrap(),
    );
    assert_eq!(carried, counts(&app, "bob", &shown).await);
}

/// Two self-hosted processes on one store each run a hub, and who looks at a room is in the
/// store: a connection of one process must never stand for a connection of the other's.
/// Bob (on the first) and carol (on the second) each show the room through their first
/// connection; bob, looking at it, gets its messages in full and no notice.
async fn two_self_hosted_processes_keep_apart_the_connections_showing_a_room(backend: Backend) {
    let one = spawn_app(&backend);
    let two = spawn_app(&backend);
    let room = one.create_room("alice").await;
    for user in ["bob", "carol"] {
        one.join(user, &room).await;
    }
    let (mut bob, bobs) = connect_viewing(&one, "bob", &room).await;
    let (_carol, carols) = connect_viewing(&two, "carol", &room).await;

    let first = one.post("alice", &room, "<p>first</p>").await;
    let second = one.post("alice", &room, "<p>second</p>").await;
    for id in [first, second] {
        let full = next_signal(&mut bob).await;
        assert_eq!(
            (full["type"].as_str(), full["message"]["id"].as_str()),
            (Some("message.created"), Some(id.as_str())),
            "bob looks at the room: no notice of it: {full}"
        );
    }
    assert_ne!(bobs, carols, "connection ids are the process's own");
}
