//! Following threads: repliers follow automatically, anyone in the room may follow or
//! unfollow, followers are pushed for replies (subject to their level and mute), and "my
//! threads" lists the threads I follow with their unread replies.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{at, reply};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_push_app};
use crate::push::{Device, set_level, start_service, subscribe, wait_for};

backend_tests!(
    repliers_follow_a_thread_and_see_its_unread_replies,
    anyone_in_the_room_may_follow_and_unfollow_a_thread,
    a_follower_is_pushed_for_a_reply_and_a_non_follower_not,
    follow_routes_answer_bad_input_as_errors,
);

async fn my_threads(app: &TestApp, user: &str) -> Vec<Value> {
    let reply = app.call(Method::GET, "/api/threads", Some(user), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body.as_array().unwrap().clone()
}

async fn follow(app: &TestApp, method: Method, user: &str, room: &str, id: &str) -> crate::helpers::Reply {
    app.call(method, &at(room, id, "/follow"), Some(user), None).await
}

async fn repliers_follow_a_thread_and_see_its_unread_replies(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    let root = app.post("alice", &room, "root").await;
    assert!(my_threads(&app, "bob").await.is_empty());
    reply(&app, "bob", &room, &root, "me first").await;
    let threads = my_threads(&app, "bob").await;
    assert_eq!(threads.len(), 1, "a replier follows");
    assert_eq!(
        (&threads[0]["roomId"], &threads[0]["root"]["id"]),
        (&json!(room), &json!(root))
    );
    assert_eq!(threads[0]["unreadReplies"], 0, "their own reply is read");

    reply(&app, "carol", &room, &root, "two").await;
    reply(&app, "carol", &room, &root, "three").await;
    let threads = my_threads(&app, "bob").await;
    assert_eq!(threads[0]["unreadReplies"], 2);
    assert_eq!(threads[0]["root"]["thread"]["replyCount"], 3);
    assert_eq!(my_threads(&app, "carol").await[0]["unreadReplies"], 0);
    assert!(
        my_threads(&app, "alice").await.is_empty(),
        "the root's author follows by replying"
    );

    let read = app
        .call(Method::POST, &at(&room, &root, "/thread/read"), Some("bob"), None)
        .await;
    assert_eq!(read.status, StatusCode::NO_CONTENT, "{}", read.body);
    assert_eq!(my_threads(&app, "bob").await[0]["unreadReplies"], 0);

    // A second thread with a newer reply lists first.
    let other = app.post("alice", &room, "another root").await;
    reply(&app, "bob", &room, &other, "here too").await;
    let threads = my_threads(&app, "bob").await;
    let roots: Vec<&str> = threads.iter().map(|t| t["root"]["id"].as_str().unwrap()).collect();
    assert_eq!(roots, [other.as_str(), root.as_str()]);
}

async fn anyone_in_the_room_may_follow_and_unfollow_a_thread(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("dave", &room).await;
    let root = app.post("alice", &room, "root").await;
    let first = reply(&app, "alice", &room, &root, "a reply").await;
    // Following a reply follows its thread.
    let followed = follow(&app, Method::PUT, "dave", &room, first["id"].as_str().unwrap()).await;
    assert_eq!(followed.status, StatusCode::OK, "{}", followed.body);
    assert_eq!(
        (&followed.body["threadId"], &followed.body["following"]),
        (&json!(root), &json!(true))
    );
    assert_eq!(my_threads(&app, "dave").await.len(), 1);
    reply(&app, "alice", &room, &root, "news").await;
    assert_eq!(my_threads(&app, "dave").await[0]["unreadReplies"], 1);

    let unfollowed = follow(&app, Method::DELETE, "dave", &room, &root).await;
    assert_eq!(unfollowed.body["following"], false, "{}", unfollowed.body);
    assert!(my_threads(&app, "dave").await.is_empty());
    let again = follow(&app, Method::DELETE, "dave", &room, &root).await;
    assert_eq!(again.status, StatusCode::OK, "unfollowing twice is no error");

    // A member who leaves no longer sees the thread listed.
    follow(&app, Method::PUT, "dave", &room, &root).await;
    app.call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("dave"), None)
        .await;
    assert!(my_threads(&app, "dave").await.is_empty());
}

async fn a_follower_is_pushed_for_a_reply_and_a_non_follower_not(backend: Backend) {
    let (service, addr) = start_service().await;
    let app = spawn_push_app(&backend, &[]);
    let room = app.create_room("alice").await;
    let users = ["bob", "carol", "erin", "frank"];
    for user in users {
        app.join(user, &room).await;
        subscribe(&app, user, &Device::new(user, addr)).await;
        set_level(&app, user, &room, json!({ "notifications": "Mentions" })).await;
    }
    let root = app.post("alice", &room, "root").await;
    let ok = StatusCode::OK;
    assert_eq!(follow(&app, Method::PUT, "erin", &room, &root).await.status, ok);
    set_level(&app, "erin", &room, json!({ "muted": true })).await;
    assert_eq!(follow(&app, Method::PUT, "frank", &room, &root).await.status, ok);
    assert_eq!(follow(&app, Method::DELETE, "frank", &room, &root).await.status, ok);
    reply(&app, "bob", &room, &root, "bob follows by replying").await;
    // Nobody is pushed for the root nor for bob's reply: all are at Mentions, none is
    // mentioned, and the one follower besides bob, erin, muted the room.
    reply(&app, "alice", &room, &root, "alice answers").await;
    let received = wait_for(&service, 1).await;
    let devices: Vec<&str> = received.iter().map(|r| r.device.as_str()).collect();
    assert_eq!(devices, ["bob"], "only the follower who is neither muted nor gone");
}

async fn follow_routes_answer_bad_input_as_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let root = app.post("alice", &room, "root").await;
    let missing = "0000000000000000001";
    follow(&app, Method::PUT, "alice", &room, missing)
        .await
        .assert_error(404, "NOT_FOUND");
    follow(&app, Method::PUT, "alice", &room, "not-an-id")
        .await
        .assert_error(404, "NOT_FOUND");
    follow(&app, Method::PUT, "eve", &room, &root)
        .await
        .assert_error(404, "NOT_FOUND");
    follow(&app, Method::PUT, "alice", "not-a-room", &root)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::PUT, &at(&room, &root, "/follow"), None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    follow(&app, Method::POST, "alice", &room, &root)
        .await
        .assert_error(405, "BAD_REQUEST");
    app.call(Method::POST, &at(&room, &root, "/thread/read"), Some("alice"), None)
        .await
        .assert_error(409, "CONFLICT");
    app.call(Method::POST, &at(&room, &root, "/thread/read"), Some("eve"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::GET, "/api/threads", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.call(Method::DELETE, "/api/threads", Some("alice"), None)
        .await
        .assert_error(405, "BAD_REQUEST");
}
