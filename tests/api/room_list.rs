//! The room list by activity: rooms ordered by their newest message, each with its preview
//! (plain text, author, time) kept current by sends, edits and deletes; marking every room
//! read at once.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{delete_message, edit};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app};

backend_tests!(
    the_room_list_is_ordered_by_activity_with_previews,
    a_member_of_fifty_rooms_sees_them_reordered_by_each_send,
    edits_and_deletes_of_the_newest_message_change_its_preview,
    many_senders_at_once_leave_the_newest_message_previewed,
    marking_all_rooms_read_clears_every_unread_count,
    mark_all_read_answers_bad_input_as_errors,
);

async fn list(app: &TestApp, user: &str) -> Vec<Value> {
    let reply = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body.as_array().unwrap().clone()
}

fn order(rooms: &[Value]) -> Vec<String> {
    rooms.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn entry<'a>(rooms: &'a [Value], room: &str) -> &'a Value {
    rooms.iter().find(|r| r["id"] == room).expect("listed")
}

async fn the_room_list_is_ordered_by_activity_with_previews(backend: Backend) {
    let app = spawn_app(&backend);
    let quiet = app.create_room("alice").await;
    let older = app.create_room("alice").await;
    let newer = app.create_room("alice").await;
    // Before any message, a room's activity is its creation.
    for room in list(&app, "alice").await {
        assert_eq!(room["lastActivityAt"], room["createdAt"], "{room}");
    }
    // A join is activity too: its line is a message.
    app.join("bob", &older).await;
    let rooms = list(&app, "alice").await;
    assert_eq!(order(&rooms)[0], older);
    assert_eq!(entry(&rooms, &older)["lastMessage"]["type"], "System");

    app.post("alice", &newer, "first").await;
    let sent = app.send("bob", &older, "<b>bold</b> &amp; <i>more</i>", None).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let rooms = list(&app, "alice").await;
    assert_eq!(
        order(&rooms),
        [older.clone(), newer.clone(), quiet.clone()],
        "the room with the newest message first"
    );
    let preview = &entry(&rooms, &older)["lastMessage"];
    assert_eq!(preview["messageId"], sent.body["id"]);
    assert_eq!(preview["text"], "bold & more", "plain text, markup removed");
    assert_eq!(
        (&preview["authorId"], &preview["authorName"]),
        (&json!("bob"), &sent.body["authorName"])
    );
    assert_eq!(preview["createdAt"], sent.body["createdAt"]);
    assert_eq!(preview["type"], "Message");
    assert_eq!(entry(&rooms, &older)["lastActivityAt"], sent.body["createdAt"]);
    assert!(
        entry(&rooms, &quiet).get("lastMessage").is_none(),
        "no message, no preview"
    );

    app.post("alice", &quiet, "at last").await;
    assert_eq!(
        order(&list(&app, "alice").await),
        [quiet.clone(), older.clone(), newer.clone()]
    );
}

async fn a_member_of_fifty_rooms_sees_them_reordered_by_each_send(backend: Backend) {
    let app = spawn_app(&backend);
    let mut rooms = Vec::new();
    for _ in 0..50 {
        rooms.push(app.create_room("alice").await);
    }
    let order_sent: Vec<usize> = (0..50).map(|i| (i * 13) % 50).collect();
    for &i in &order_sent {
        app.post("alice", &rooms[i], &format!("to {i}")).await;
    }
    let listed = list(&app, "alice").await;
    let expected: Vec<String> = order_sent.iter().rev().map(|&i| rooms[i].clone()).collect();
    assert_eq!(order(&listed), expected);
    for (entry, &i) in listed.iter().zip(order_sent.iter().rev()) {
        assert_eq!(entry["lastMessage"]["text"], format!("to {i}"));
    }
    // One more send moves its room to the top, the rest keep their order.
    let last = rooms[order_sent[0]].clone();
    app.post("alice", &last, "again").await;
    let listed = order(&list(&app, "alice").await);
    assert_eq!(listed[0], last);
    let rest: Vec<String> = expected.into_iter().filter(|r| *r != last).collect();
    assert_eq!(listed[1..], rest[..]);
}

async fn edits_and_deletes_of_the_newest_message_change_its_preview(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let older = app.post("alice", &room, "older").await;
    let newest = app.post("alice", &room, "newest").await;
    let preview = |rooms: Vec<Value>| entry(&rooms, &room)["lastMessage"].clone();

    assert_eq!(
        edit(&app, "alice", &room, &older, "older, edited").await.status,
        StatusCode::OK
    );
    assert_eq!(
        preview(list(&app, "alice").await)["text"],
        "newest",
        "an older edit changes nothing"
    );
    assert_eq!(
        edit(&app, "alice", &room, &newest, "newest, edited").await.status,
        StatusCode::OK
    );
    assert_eq!(preview(list(&app, "alice").await)["text"], "newest, edited");

    let deleted = delete_message(&app, "alice", &room, &newest).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let shown = preview(list(&app, "alice").await);
    assert_eq!((&shown["messageId"], &shown["deleted"]), (&json!(newest), &json!(true)));
    assert!(
        shown.get("text").is_none() && shown.get("authorName").is_none(),
        "{shown}"
    );
}

async fn many_senders_at_once_leave_the_newest_message_previewed(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let senders: Vec<String> = (0..16).map(|i| format!("user{i}")).collect();
    for sender in &senders {
        app.join(sender, &room).await;
    }
    for round in 0..2 {
        let sends = senders.iter().map(|sender| {
            let (app, room) = (&app, &room);
            async move { app.post(sender, room, &format!("{round} from {sender}")).await }
        });
        let ids = futures::future::join_all(sends).await;
        let newest = ids.iter().min().unwrap();
        let rooms = list(&app, "alice").await;
        assert_eq!(
            &entry(&rooms, &room)["lastMessage"]["messageId"],
            newest,
            "round {round}"
        );
    }
}

async fn marking_all_rooms_read_clears_every_unread_count(backend: Backend) {
    let app = spawn_app(&backend);
    let rooms = [app.create_room("alice").await, app.create_room("alice").await];
    for room in &rooms {
        app.join("bob", room).await;
        app.post("alice", room, "news").await;
    }
    let unread = |rooms: &[Value]| rooms.iter().map(|r| r["unreadCount"].as_u64().unwrap()).sum::<u64>();
    assert_eq!(unread(&list(&app, "bob").await), 2);
    let marked = app.call(Method::POST, "/api/rooms/read", Some("bob"), None).await;
    assert_eq!(marked.status, StatusCode::OK, "{}", marked.body);
    assert_eq!(marked.body["rooms"], 2);
    assert_eq!(unread(&list(&app, "bob").await), 0);
    assert_eq!(
        unread(&list(&app, "alice").await),
        0,
        "alice's own counts are untouched"
    );
    // A room left since is not marked (its index row is gone).
    app.call(
        Method::POST,
        &format!("/api/rooms/{}/leave", rooms[0]),
        Some("bob"),
        None,
    )
    .await;
    let marked = app.call(Method::POST, "/api/rooms/read", Some("bob"), None).await;
    assert_eq!(marked.body["rooms"], 1);
}

async fn mark_all_read_answers_bad_input_as_errors(backend: Backend) {
    let app = spawn_app(&backend);
    app.call(Method::POST, "/api/rooms/read", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.call(Method::PUT, "/api/rooms/read", Some("alice"), None)
        .await
        .assert_error(405, "BAD_REQUEST");
    // A user with no rooms marks none.
    let marked = app.call(Method::POST, "/api/rooms/read", Some("nobody"), None).await;
    assert_eq!((marked.status, &marked.body["rooms"]), (StatusCode::OK, &json!(0)));
}
