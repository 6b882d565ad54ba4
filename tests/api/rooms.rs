//! Rooms and membership over HTTP.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(create_join_list_get_leave, user_ids_with_key_characters_work);

async fn create_join_list_get_leave(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let get = app
        .call(Method::GET, &format!("/api/rooms/{room}"), Some("alice"), None)
        .await;
    assert_eq!(get.status, StatusCode::OK);
    assert_eq!(
        (get.body["name"].as_str(), get.body["ownerId"].as_str()),
        (Some("general"), Some("alice"))
    );

    // Bob is not a member yet: the room answers as missing.
    app.call(Method::GET, &format!("/api/rooms/{room}"), Some("bob"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.join("bob", &room).await;
    app.join("bob", &room).await; // idempotent
    let mine = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    assert_eq!(mine.body.as_array().unwrap().len(), 1, "{}", mine.body);
    assert_eq!(mine.body[0]["id"], room.as_str());

    let left = app
        .call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("bob"), None)
        .await;
    assert_eq!(left.status, StatusCode::NO_CONTENT);
    let mine = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    assert_eq!(mine.body, json!([]));
    app.call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("alice"), None)
        .await
        .assert_error(409, "CONFLICT");
    app.call(
        Method::POST,
        &format!("/api/rooms/{}/join", uuid::Uuid::new_v4()),
        Some("bob"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

async fn user_ids_with_key_characters_work(backend: Backend) {
    let app = spawn_app(&backend);
    let user = "auth0|a/b#c?d%20 ü";
    let room = app.create_room(user).await;
    let sent = app.send(user, &room, "hi", None).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    assert_eq!(sent.body["authorId"], user);
    let mine = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_eq!(mine.body[0]["id"], room.as_str());
}
