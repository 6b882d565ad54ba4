//! Mentions and unread counts: the counts follow the read position, mentioning everyone
//! needs the permission, and `@here` counts for the members online when it was sent.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, mention};
use crate::helpers::web_pubsub::start_hub;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    unread_and_mention_counts_follow_the_read_position,
    mentioning_everyone_needs_the_permission,
    here_counts_as_a_mention_for_the_members_online_when_it_was_sent,
);

/// `(unreadCount, mentionCount)` of `room` in `user`'s room list.
async fn unread(app: &TestApp, user: &str, room: &str) -> (u64, u64) {
    let list = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_status(&list, StatusCode::OK);
    let rooms = list.body.as_array().unwrap();
    let entry = rooms
        .iter()
        .find(|r| r["id"] == room)
        .unwrap_or_else(|| panic!("{room} not in {user}'s rooms: {}", list.body));
    let count = |name: &str| entry[name].as_u64().unwrap();
    (count("unreadCount"), count("mentionCount"))
}

async fn mark_read(app: &TestApp, user: &str, room: &str, body: Value) {
    let reply = app.act(Method::POST, user, &format!("/rooms/{room}/read"), body).await;
    assert_status(&reply, StatusCode::NO_CONTENT);
}

async fn unread_and_mention_counts_follow_the_read_position(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    mark_read(&app, "bob", &room, json!({})).await;
    let first = app.post("alice", &room, "one").await;
    app.post("alice", &room, &format!("<p>two {}</p>", mention("bob")))
        .await;
    app.post("alice", &room, "three").await;

    assert_eq!(unread(&app, "bob", &room).await, (3, 1), "{backend:?}");
    let (carol_unread, carol_mentions) = unread(&app, "carol", &room).await;
    assert!(carol_unread >= 3, "{backend:?}: carol has not read alice's three");
    assert_eq!(carol_mentions, 0);

    mark_read(&app, "bob", &room, json!({})).await;
    assert_eq!(unread(&app, "bob", &room).await, (0, 0));
    mark_read(&app, "bob", &room, json!({ "messageId": first })).await;
    assert_eq!(
        unread(&app, "bob", &room).await,
        (2, 1),
        "unread again from after the first"
    );
}

async fn mentioning_everyone_needs_the_permission(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let everyone = format!("<p>hey {}</p>", mention("@everyone"));
    let allowed = app.send("bob", &room, &everyone, None).await;
    assert_status(&allowed, StatusCode::CREATED);
    assert_eq!(allowed.body["mentions"]["everyone"], true);

    let revoked = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}"),
            json!({ "everyonePermissions": [] }),
        )
        .await;
    assert_status(&revoked, StatusCode::OK);
    app.send("bob", &room, &everyone, None)
        .await
        .assert_error(403, "FORBIDDEN");
    let plain = app.send("bob", &room, "<p>hey all</p>", None).await;
    assert_status(&plain, StatusCode::CREATED);
    let owners = app.send("alice", &room, &everyone, None).await;
    assert_status(&owners, StatusCode::CREATED);
}

/// `@here` is the members online now (presence): a member with a live connection
/// open when the message was sent counts it as a mention, also after going away; one who was
/// away then, or never connected, or came online only afterwards, does not. Presence comes
/// from Web PubSub's signed connection events, as on Azure.
async fn here_counts_as_a_mention_for_the_members_online_when_it_was_sent(backend: Backend) {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(&backend, &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())]);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol", "dave"] {
        app.join(user, &room).await;
    }
    for user in ["bob", "carol", "dave"] {
        mark_read(&app, user, &room, json!({})).await;
    }
    hub.connect(&app, "conn-bob", "bob").await;
    hub.connect(&app, "conn-dave", "dave").await;
    hub.disconnect(&app, "conn-dave", "dave").await;

    let here = app
        .send("alice", &room, &format!("<p>{} standup</p>", mention("@here")), None)
        .await;
    assert_status(&here, StatusCode::CREATED);
    assert_eq!(here.body["mentions"]["here"], true);
    assert_eq!(unread(&app, "bob", &room).await, (1, 1), "bob was online");
    assert_eq!(unread(&app, "carol", &room).await, (1, 0), "carol never connected");
    assert_eq!(unread(&app, "dave", &room).await, (1, 0), "dave had gone away");

    // Coming online later does not make it theirs; going away keeps it.
    hub.connect(&app, "conn-carol", "carol").await;
    hub.disconnect(&app, "conn-bob", "bob").await;
    assert_eq!(unread(&app, "carol", &room).await, (1, 0));
    assert_eq!(unread(&app, "bob", &room).await, (1, 1));

    // Now carol is online and bob is not: the next @here is carol's alone; @everyone is all.
    app.post("alice", &room, &format!("<p>{} again</p>", mention("@here")))
        .await;
    assert_eq!(unread(&app, "carol", &room).await, (2, 1));
    assert_eq!(unread(&app, "bob", &room).await, (2, 1));
    app.post("alice", &room, &format!("<p>{} all</p>", mention("@everyone")))
        .await;
    assert_eq!(unread(&app, "dave", &room).await, (3, 1));
    assert_eq!(unread(&app, "bob", &room).await, (3, 2));
}
