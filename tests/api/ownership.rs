//! Handing a room over: the owner makes another member the owner, and can then leave.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{Backend, backend_tests, spawn_app, token};

backend_tests!(
    the_owner_hands_the_room_to_a_member_and_can_then_leave,
    only_the_owner_hands_a_room_to_a_member,
);

async fn the_owner_hands_the_room_to_a_member_and_can_then_leave(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    app.act(Method::POST, "owner", &format!("/rooms/{room}/leave"), json!({}))
        .await
        .assert_error(409, "CONFLICT");

    let handed = app
        .act(
            Method::PUT,
            "owner",
            &format!("/rooms/{room}/owner"),
            json!({ "userId": "bob" }),
        )
        .await;
    assert_eq!(handed.status, StatusCode::OK, "{}", handed.body);
    assert_eq!(handed.body["ownerId"], "bob");
    let members = app
        .call(Method::GET, &format!("/api/rooms/{room}/members"), Some("bob"), None)
        .await;
    let role = |user: &str| {
        members
            .body
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["userId"] == user)
            .unwrap()["role"]
            .clone()
    };
    assert_eq!((role("bob"), role("owner")), (json!("Owner"), json!("Member")));
    let lines = app.read_all("bob", &room, "desc", 50).await;
    assert!(
        lines
            .iter()
            .any(|m| m["type"] == "System" && m["text"].as_str().unwrap().contains("handed the room to")),
        "the hand-over is announced: {lines:?}"
    );

    // The former owner may leave now, and only the new owner may delete the room.
    let left = app
        .call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("owner"), None)
        .await;
    assert_eq!(left.status, StatusCode::NO_CONTENT, "{}", left.body);
    let deleted = app
        .call(Method::DELETE, &format!("/api/rooms/{room}"), Some("bob"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
}

async fn only_the_owner_hands_a_room_to_a_member(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    let path = format!("/rooms/{room}/owner");
    let to = |user: &str| json!({ "userId": user });
    app.act(Method::PUT, "bob", &path, to("bob"))
        .await
        .assert_error(403, "FORBIDDEN");
    app.act(Method::PUT, "eve", &path, to("eve"))
        .await
        .assert_error(404, "NOT_FOUND");
    app.act(Method::PUT, "owner", &path, to("nobody"))
        .await
        .assert_error(404, "NOT_FOUND");
    app.act(Method::PUT, "owner", &path, to("owner"))
        .await
        .assert_error(422, "VALIDATION");
    app.act(Method::PUT, "owner", &path, json!({}))
        .await
        .assert_error(422, "VALIDATION");
    app.act(Method::PUT, "owner", &path, json!({ "userId": 7 }))
        .await
        .assert_error(422, "VALIDATION");
    app.act(Method::PUT, "owner", &path, json!({ "userId": "bob", "role": "x" }))
        .await
        .assert_error(422, "VALIDATION");
    app.act(Method::PUT, "owner", "/rooms/not-a-room/owner", to("bob"))
        .await
        .assert_error(404, "NOT_FOUND");
    let malformed = app
        .http
        .put(format!("{}/api{path}", app.base))
        .bearer_auth(token("owner"))
        .header("content-type", "application/json")
        .body("{\"userId\":")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);

    let room_now = app
        .call(Method::GET, &format!("/api/rooms/{room}"), Some("owner"), None)
        .await;
    assert_eq!(room_now.body["ownerId"], "owner", "nothing was handed over");
}
