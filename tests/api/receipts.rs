//! Read receipts: every member of a room can read every member's read position; a send moves
//! its sender's position to the message, and the live `read` signal carries the position.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::web_pubsub::start_hub;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    receipts_show_each_members_position_after_reads_and_sends,
    a_burst_of_sends_leaves_the_senders_position_at_the_newest,
    a_send_marks_what_came_before_it_read_for_its_sender,
    receipts_answer_a_stranger_and_bad_input_as_errors,
);

async fn receipts(app: &TestApp, viewer: &str, room: &str) -> Vec<Value> {
    let reply = app
        .call(Method::GET, &format!("/api/rooms/{room}/receipts"), Some(viewer), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body.as_array().unwrap().clone()
}

async fn up_to(app: &TestApp, viewer: &str, room: &str, user: &str) -> String {
    let all = receipts(app, viewer, room).await;
    let receipt = all.iter().find(|r| r["userId"] == user).expect("a receipt per member");
    assert!(receipt["readAt"].is_string(), "{receipt}");
    receipt["upTo"].as_str().unwrap().to_owned()
}

async fn unread(app: &TestApp, user: &str, room: &str) -> u64 {
    let rooms = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_eq!(rooms.status, StatusCode::OK, "{}", rooms.body);
    let entries = rooms.body.as_array().unwrap();
    let entry = entries.iter().find(|r| r["id"] == room).expect("the room is listed");
    entry["unreadCount"].as_u64().unwrap()
}

async fn mark_read(app: &TestApp, user: &str, room: &str, body: Value) {
    let reply = app
        .call(Method::POST, &format!("/api/rooms/{room}/read"), Some(user), Some(body))
        .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);
}

async fn receipts_show_each_members_position_after_reads_and_sends(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let first = app.post("alice", &room, "first").await;
    let second = app.post("alice", &room, "second").await;
    assert_eq!(receipts(&app, "bob", &room).await.len(), 2, "one receipt per member");
    assert_eq!(
        up_to(&app, "bob", &room, "alice").await,
        second,
        "alice's send moved hers"
    );

    mark_read(&app, "bob", &room, json!({ "messageId": first })).await;
    assert_eq!(up_to(&app, "alice", &room, "bob").await, first);
    // Message ids sort newest first: bob has read `first`, not `second`.
    assert!(second < first);

    let third = app.post("bob", &room, "third").await;
    assert_eq!(
        up_to(&app, "alice", &room, "bob").await,
        third,
        "a send moves its sender's position"
    );
    assert_eq!(up_to(&app, "alice", &room, "alice").await, second, "and nobody else's");

    // Marking unread from an older message still moves the position back.
    mark_read(&app, "bob", &room, json!({ "messageId": first })).await;
    assert_eq!(up_to(&app, "alice", &room, "bob").await, first);
}

async fn a_burst_of_sends_leaves_the_senders_position_at_the_newest(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.post("alice", &room, "hello").await;
    mark_read(&app, "alice", &room, json!({})).await;
    let everything = up_to(&app, "alice", &room, "alice").await;
    // Many concurrent sends by one member: their position ends at the newest of them.
    let sends = (0..16).map(|i| {
        let (app, room) = (&app, &room);
        async move { app.post("alice", room, &format!("burst {i}")).await }
    });
    let ids = futures::future::join_all(sends).await;
    let newest = ids.iter().min().unwrap().clone();
    let position = up_to(&app, "alice", &room, "alice").await;
    assert_eq!(position, newest.clone().min(everything), "the newest position wins");
}

async fn a_send_marks_what_came_before_it_read_for_its_sender(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    for i in 0..3 {
        app.post("alice", &room, &format!("unread {i}")).await;
    }
    assert_eq!(unread(&app, "bob", &room).await, 3);
    app.post("bob", &room, "answer").await;
    assert_eq!(
        unread(&app, "bob", &room).await,
        0,
        "bob answered, so he has read the room"
    );
}

async fn receipts_answer_a_stranger_and_bad_input_as_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let path = format!("/api/rooms/{room}/receipts");
    app.call(Method::GET, &path, Some("eve"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::GET, &path, None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.call(Method::GET, "/api/rooms/not-a-room/receipts", Some("alice"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::POST, &path, Some("alice"), Some(json!({})))
        .await
        .assert_error(405, "BAD_REQUEST");
}

#[tokio::test]
async fn the_read_signal_carries_the_position() {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "hi").await;
    mark_read(&app, "bob", &room, json!({ "messageId": id })).await;
    let mut read = None;
    for _ in 0..100 {
        read = hub
            .sent
            .lock()
            .unwrap()
            .iter()
            .find(|(_, b)| b["type"] == "read")
            .cloned();
        if read.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (group, body) = read.expect("a read signal");
    assert_eq!(group, format!("room.{room}"));
    assert_eq!((&body["userId"], &body["upTo"]), (&json!("bob"), &json!(id)));
}
