//! Sending and reading messages over HTTP.

use std::collections::HashSet;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::messages::get_message;
use crate::helpers::{Backend, TestApp, backend_tests, posts, spawn_app, spawn_app_with};

backend_tests!(
    two_users_250_messages_read_in_both_orders,
    a_resend_with_the_same_client_id_stores_nothing_new,
    concurrent_retries_of_one_client_id_store_one_message,
    two_processes_25_concurrent_sends_each,
    two_processes_200_concurrent_sends_into_one_room_all_stored_once,
    a_non_member_can_neither_read_nor_write,
);

fn ids(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

async fn two_users_250_messages_read_in_both_orders(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let mut sent = Vec::new();
    for i in 0..250 {
        let user = if i % 2 == 0 { "alice" } else { "bob" };
        let reply = app.send(user, &room, &format!("<p>message {i}</p>"), None).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        sent.push(reply.body["id"].as_str().unwrap().to_owned());
    }
    let oldest_first = posts(app.read_all("bob", &room, "asc", 50).await);
    assert_eq!(ids(&oldest_first), sent, "{backend:?}: oldest first, each once");
    let texts: Vec<&str> = oldest_first.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts[0], "<p>message 0</p>");
    assert_eq!(texts[249], "<p>message 249</p>");
    let newest_first = posts(app.read_all("alice", &room, "desc", 50).await);
    let mut reversed = sent.clone();
    reversed.reverse();
    assert_eq!(ids(&newest_first), reversed, "{backend:?}: newest first, each once");

    let one = get_message(&app, "bob", &room, &sent[7]).await;
    assert_eq!(
        (one.status, one.body["text"].as_str()),
        (StatusCode::OK, Some("<p>message 7</p>"))
    );
}

async fn a_resend_with_the_same_client_id_stores_nothing_new(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let first = app.send("alice", &room, "hello", Some("c-1")).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = app.send("alice", &room, "hello", Some("c-1")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(again.body, first.body);
    // Another user may use the same client id: it is scoped to its sender.
    app.join("bob", &room).await;
    let bobs = app.send("bob", &room, "hello", Some("c-1")).await;
    assert_eq!(bobs.status, StatusCode::CREATED);
    assert_ne!(bobs.body["id"], first.body["id"]);
    assert_eq!(posts(app.read_all("alice", &room, "desc", 100).await).len(), 2);
    assert_eq!(posts(app.read_all("alice", &room, "asc", 100).await).len(), 2);
}

async fn concurrent_retries_of_one_client_id_store_one_message(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let replies = futures_join(&app, &room, 10).await;
    let distinct: HashSet<&str> = replies.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(distinct.len(), 1, "{replies:?}");
    assert_eq!(app.read_all("alice", &room, "asc", 100).await.len(), 1);
}

async fn futures_join(app: &TestApp, room: &str, n: usize) -> Vec<Value> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (base, http, room) = (app.base.clone(), app.http.clone(), room.to_owned());
        tasks.spawn(async move {
            let reply = http
                .post(format!("{base}/api/rooms/{room}/messages"))
                .bearer_auth(crate::helpers::token("alice"))
                .json(&serde_json::json!({ "text": "once", "clientId": "same" }))
                .send()
                .await
                .unwrap();
            assert!(reply.status().is_success(), "{}", reply.status());
            reply.json::<Value>().await.unwrap()
        });
    }
    tasks.join_all().await
}

async fn two_processes_25_concurrent_sends_each(backend: Backend) {
    let first = spawn_app(&backend);
    let second = spawn_app(&backend);
    let room = first.create_room("alice").await;
    second.join("bob", &room).await;
    let mut tasks = tokio::task::JoinSet::new();
    for (app, user) in [(&first, "alice"), (&second, "bob")] {
        for i in 0..25 {
            let (base, http, room) = (app.base.clone(), app.http.clone(), room.clone());
            tasks.spawn(async move {
                let reply = http
                    .post(format!("{base}/api/rooms/{room}/messages"))
                    .bearer_auth(crate::helpers::token(user))
                    .json(&serde_json::json!({ "text": format!("{user} {i}") }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(reply.status(), StatusCode::CREATED);
                reply.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
            });
        }
    }
    let sent: HashSet<String> = tasks.join_all().await.into_iter().collect();
    assert_eq!(sent.len(), 50, "{backend:?}: 50 distinct ids");
    let desc = posts(first.read_all("alice", &room, "desc", 100).await);
    let asc = posts(second.read_all("bob", &room, "asc", 7).await);
    assert_eq!(ids(&desc).into_iter().collect::<HashSet<_>>(), sent);
    let mut asc_ids = ids(&asc);
    asc_ids.reverse();
    assert_eq!(asc_ids, ids(&desc), "{backend:?}: both orders agree");
}

/// Contention, end to end: two server processes on one store, 200 sends into one room at
/// once. A send that loses the room's counter to the other process waits its turn: every
/// send is answered 201, every message is stored once, and the room's versions have no gap.
async fn two_processes_200_concurrent_sends_into_one_room_all_stored_once(backend: Backend) {
    let unlimited = [("TABLETALK_WRITE_LIMITS", "off")];
    let apps = [
        spawn_app_with(&backend, &unlimited),
        spawn_app_with(&backend, &unlimited),
    ];
    let room = apps[0].create_room("alice").await;
    let senders: Vec<String> = (0..8).map(|k| format!("sender{k}")).collect();
    for (k, sender) in senders.iter().enumerate() {
        apps[k % 2].join(sender, &room).await;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let app = &apps[i % 2];
        let (base, http, room) = (app.base.clone(), app.http.clone(), room.clone());
        let sender = senders[i % senders.len()].clone();
        tasks.spawn(async move {
            let reply = http
                .post(format!("{base}/api/rooms/{room}/messages"))
                .bearer_auth(crate::helpers::token(&sender))
                .json(&serde_json::json!({ "text": format!("contended {i}"), "clientId": format!("c-{i}") }))
                .send()
                .await
                .unwrap();
            let status = reply.status();
            let body = reply.text().await.unwrap();
            (i, status, body)
        });
    }
    let answers = tasks.join_all().await;
    let refused: Vec<_> = answers
        .iter()
        .filter(|(_, status, _)| *status != StatusCode::CREATED)
        .collect();
    assert!(
        refused.is_empty(),
        "{backend:?}: {} sends refused: {:?}",
        refused.len(),
        refused.first()
    );

    let everything = apps[1].read_all("alice", &room, "asc", 100).await;
    let texts: Vec<String> = posts(everything.clone())
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect();
    for i in 0..200 {
        let text = format!("contended {i}");
        let copies = texts
            .iter()
            .filter(|t| t.trim_start_matches("<p>").trim_end_matches("</p>") == text)
            .count();
        assert_eq!(copies, 1, "{backend:?}: send {i} stored {copies} times");
    }
    let mut versions: Vec<u64> = everything.iter().map(|m| m["version"].as_u64().unwrap()).collect();
    versions.sort_unstable();
    let first = versions[0];
    let expected: Vec<u64> = (first..first + versions.len() as u64).collect();
    assert_eq!(versions, expected, "{backend:?}: the room's versions have no gap");
}

async fn a_non_member_can_neither_read_nor_write(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.send("alice", &room, "private", None).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.send("mallory", &room, "let me in", None)
        .await
        .assert_error(404, "NOT_FOUND");
    for path in [
        format!("/api/rooms/{room}/messages"),
        format!("/api/rooms/{room}/messages?order=asc"),
        format!("/api/rooms/{room}/messages/{id}"),
    ] {
        app.call(Method::GET, &path, Some("mallory"), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    assert_eq!(app.read_all("alice", &room, "asc", 10).await.len(), 1);
}

#[tokio::test]
async fn the_embedded_store_survives_a_restart() {
    let backend = Backend::embedded();
    let (room, sent) = {
        let app = spawn_app(&backend);
        let room = app.create_room("alice").await;
        let mut sent = Vec::new();
        for i in 0..5 {
            sent.push(
                app.send("alice", &room, &format!("kept {i}"), Some(&format!("k{i}")))
                    .await
                    .body["id"]
                    .clone(),
            );
        }
        (room, sent)
    };
    let app = spawn_app(&backend);
    let after: Vec<Value> = app
        .read_all("alice", &room, "asc", 2)
        .await
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(after, sent);
    let repeat = app.send("alice", &room, "kept 0", Some("k0")).await;
    assert_eq!(
        (repeat.status, &repeat.body["id"]),
        (StatusCode::OK, &sent[0]),
        "idempotency survives too"
    );
}
