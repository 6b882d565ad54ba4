//! Direct conversations: `POST /api/dms` opens the one room of an unordered pair, the same from
//! either side (even when both open it at once); nobody else can join it, be invited or
//! forward into it, and it is never in the directory; every message in it pushes the other
//! person, as a mention does.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::forward;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_push_app};
use crate::push::{Device, decrypt, set_level, start_service, subscribe, wait_for};

backend_tests!(
    both_people_open_the_same_direct_conversation,
    nobody_else_can_enter_a_direct_conversation,
    the_other_person_is_pushed_for_every_direct_message,
);

async fn open(app: &TestApp, user: &str, with: &str) -> Value {
    let reply = app.act(Method::POST, user, "/dms", json!({ "userId": with })).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

async fn both_people_open_the_same_direct_conversation(backend: Backend) {
    let app = spawn_app(&backend);
    let room = open(&app, "alice", "bob").await;
    assert_eq!(room["direct"], true);
    assert_eq!(room["visibility"], "private");
    let id = room["id"].as_str().unwrap().to_owned();
    assert_eq!(
        open(&app, "bob", "alice").await["id"],
        id.as_str(),
        "{backend:?}: from the other side"
    );
    assert_eq!(
        open(&app, "alice", "bob").await["id"],
        id.as_str(),
        "{backend:?}: again"
    );

    // Opened from both sides at the same moment: still one room, both in it.
    let (a, b) = tokio::join!(open(&app, "carol", "dave"), open(&app, "dave", "carol"));
    assert_eq!(a["id"], b["id"], "{backend:?}");

    let said = app.post("alice", &id, "hi bob").await;
    let answered = app.post("bob", &id, "hi alice").await;
    let page = app
        .call(
            Method::GET,
            &format!("/api/rooms/{id}/messages?order=asc"),
            Some("bob"),
            None,
        )
        .await;
    let texts: Vec<&str> = page.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["id"] == said.as_str() || m["id"] == answered.as_str())
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["hi bob", "hi alice"], "{backend:?}: {}", page.body);
    let mine = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    assert!(
        mine.body.as_array().unwrap().iter().any(|r| r["id"] == id.as_str()),
        "{backend:?}: it is in bob's rooms: {}",
        mine.body
    );
    let leave = app
        .call(Method::POST, &format!("/api/rooms/{id}/leave"), Some("bob"), None)
        .await;
    leave.assert_error(409, "CONFLICT");
    let public = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{id}"),
            json!({ "visibility": "public" }),
        )
        .await;
    public.assert_error(409, "CONFLICT");
}

async fn nobody_else_can_enter_a_direct_conversation(backend: Backend) {
    let app = spawn_app(&backend);
    let id = open(&app, "alice", "bob").await["id"].as_str().unwrap().to_owned();
    let secret = app.post("alice", &id, "just us").await;

    let join = app
        .call(Method::POST, &format!("/api/rooms/{id}/join"), Some("carol"), None)
        .await;
    join.assert_error(404, "NOT_FOUND");
    let read = app
        .call(Method::GET, &format!("/api/rooms/{id}/messages"), Some("carol"), None)
        .await;
    read.assert_error(404, "NOT_FOUND");
    for body in [json!({ "userId": "carol" }), json!({})] {
        let invited = app
            .act(Method::POST, "alice", &format!("/rooms/{id}/invites"), body)
            .await;
        invited.assert_error(403, "FORBIDDEN");
    }
    let carols = app.create_room("carol").await;
    let own = app.post("carol", &carols, "let me in").await;
    let forwarded = forward(&app, "carol", &carols, &own, json!([id])).await;
    assert_eq!(forwarded.status, StatusCode::OK, "{}", forwarded.body);
    assert_eq!(
        forwarded.body[0]["error"]["code"], "NOT_FOUND",
        "{backend:?}: {}",
        forwarded.body
    );
    let page = app
        .call(Method::GET, &format!("/api/rooms/{id}/messages"), Some("bob"), None)
        .await;
    let ids: Vec<&str> = page.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "Message")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [secret.as_str()], "{backend:?}: nothing of carol's landed");
    let members = app
        .call(Method::GET, &format!("/api/rooms/{id}/members"), Some("bob"), None)
        .await;
    assert_eq!(members.body.as_array().unwrap().len(), 2, "{}", members.body);
    let listed = app.call(Method::GET, "/api/rooms/directory", Some("carol"), None).await;
    assert!(!listed.body.to_string().contains(&id), "{backend:?}: {}", listed.body);
}

async fn the_other_person_is_pushed_for_every_direct_message(backend: Backend) {
    let (service, addr) = start_service().await;
    let app = spawn_push_app(&backend, &[]);
    let device = Device::new("bob", addr);
    subscribe(&app, "bob", &device).await;
    let id = open(&app, "alice", "bob").await["id"].as_str().unwrap().to_owned();
    // Only mentions, by bob's settings: a direct message is addressed to him, so it still is.
    set_level(&app, "bob", &id, json!({ "notifications": "Mentions" })).await;
    let first = app.post("alice", &id, "are you there?").await;
    let second = app.post("alice", &id, "ping").await;
    let pushes = wait_for(&service, 2).await;
    let mut seen: Vec<Value> = pushes
        .iter()
        .map(|push| serde_json::from_slice(&decrypt(&device.secret, &device.auth, &push.body)).unwrap())
        .collect();
    seen.sort_by_key(|p| p["messageId"].as_str().unwrap().to_owned());
    let mut expected = vec![first, second];
    expected.sort();
    let ids: Vec<&str> = seen.iter().map(|p| p["messageId"].as_str().unwrap()).collect();
    assert_eq!(ids, expected, "{backend:?}: one push per message");
    assert!(
        seen.iter()
            .all(|p| p["mentioned"] == true && p["roomId"] == id.as_str())
    );
}
