//! Requests on one message, named after what the user does (read, edit, delete, pin, vote,
//! react, forward, reply), shared by the feature tests.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Reply, TestApp};

/// 👍, percent-encoded for a path segment.
pub const THUMBS_UP: &str = "%F0%9F%91%8D";
/// 🎉, percent-encoded.
pub const PARTY: &str = "%F0%9F%8E%89";

pub fn mention(id: &str) -> String {
    format!(r#"<span data-type="mention" data-id="{id}">@{id}</span>"#)
}

/// `/api/rooms/{room}/messages/{id}` followed by `rest`.
pub fn at(room: &str, id: &str, rest: &str) -> String {
    format!("/api/rooms/{room}/messages/{id}{rest}")
}

pub fn ids(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

pub fn assert_status(reply: &Reply, status: StatusCode) {
    assert_eq!(reply.status, status, "{}", reply.body);
}

pub async fn get_message(app: &TestApp, user: &str, room: &str, id: &str) -> Reply {
    app.call(Method::GET, &at(room, id, ""), Some(user), None).await
}

pub async fn edit(app: &TestApp, user: &str, room: &str, id: &str, text: &str) -> Reply {
    let body = json!({ "text": text });
    app.call(Method::PATCH, &at(room, id, ""), Some(user), Some(body)).await
}

pub async fn delete_message(app: &TestApp, user: &str, room: &str, id: &str) -> Reply {
    app.call(Method::DELETE, &at(room, id, ""), Some(user), None).await
}

/// POST pins, DELETE unpins.
pub async fn pin(app: &TestApp, method: Method, user: &str, room: &str, id: &str) -> Reply {
    app.call(method, &at(room, id, "/pin"), Some(user), None).await
}

pub async fn vote(app: &TestApp, user: &str, room: &str, id: &str, option: Value) -> Reply {
    let body = json!({ "optionId": option });
    app.call(Method::PUT, &at(room, id, "/vote"), Some(user), Some(body))
        .await
}

/// PUT adds the caller's reaction, DELETE removes it; `emoji` is percent-encoded.
pub async fn react(app: &TestApp, method: Method, user: &str, room: &str, id: &str, emoji: &str) -> Reply {
    let path = at(room, id, &format!("/reactions/{emoji}"));
    app.call(method, &path, Some(user), None).await
}

pub async fn forward(app: &TestApp, user: &str, room: &str, id: &str, to: Value) -> Reply {
    let body = json!({ "roomIds": to });
    app.call(Method::POST, &at(room, id, "/forward"), Some(user), Some(body))
        .await
}

pub async fn create_message(app: &TestApp, user: &str, room: &str, body: Value) -> Reply {
    let path = format!("/api/rooms/{room}/messages");
    app.call(Method::POST, &path, Some(user), Some(body)).await
}

pub async fn create_poll(app: &TestApp, user: &str, room: &str, question: &str, options: &[&str]) -> Reply {
    let body = json!({ "type": "Poll", "poll": { "question": question, "options": options } });
    create_message(app, user, room, body).await
}

/// Creates a poll and returns its id (the send must succeed).
pub async fn new_poll(app: &TestApp, room: &str, options: &[&str]) -> String {
    let created = create_poll(app, "alice", room, "Lunch?", options).await;
    assert_status(&created, StatusCode::CREATED);
    created.body["id"].as_str().unwrap().to_owned()
}

/// Sends a reply to `to` and returns it (the send must succeed).
pub async fn reply(app: &TestApp, user: &str, room: &str, to: &str, text: &str) -> Value {
    let reply = create_message(app, user, room, json!({ "text": text, "replyTo": to })).await;
    assert_status(&reply, StatusCode::CREATED);
    reply.body
}

/// Gives `user`, a member, a role with ManageMessages, as the owner alice.
pub async fn moderator(app: &TestApp, room: &str, user: &str) {
    app.grant("alice", room, user, &["ManageMessages"], 10).await;
}
