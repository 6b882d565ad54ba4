//! Reactions: per user and idempotent, and shown in read pages.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::messages::{PARTY, THUMBS_UP, assert_status, react};
use crate::helpers::{Backend, backend_tests, posts, spawn_app};

backend_tests!(reactions_are_per_user_and_idempotent, reactions_show_in_read_pages,);

async fn reactions_are_per_user_and_idempotent(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "react to me").await;
    let thumbs = |count: u32, me: bool| json!([{ "emoji": "👍", "count": count, "me": me }]);

    let first = react(&app, Method::PUT, "alice", &room, &id, THUMBS_UP).await;
    assert_status(&first, StatusCode::OK);
    assert_eq!(first.body, thumbs(1, true));
    let again = react(&app, Method::PUT, "alice", &room, &id, THUMBS_UP).await;
    assert_eq!(again.body, thumbs(1, true), "a second identical reaction is a no-op");
    let bobs = react(&app, Method::PUT, "bob", &room, &id, THUMBS_UP).await;
    assert_eq!(bobs.body, thumbs(2, true));

    let removed = react(&app, Method::DELETE, "bob", &room, &id, THUMBS_UP).await;
    assert_status(&removed, StatusCode::OK);
    assert_eq!(removed.body, thumbs(1, false), "only bob's own reaction went");
    let absent = react(&app, Method::DELETE, "bob", &room, &id, PARTY).await;
    assert_status(&absent, StatusCode::OK);
    assert_eq!(absent.body, thumbs(1, false));
}

async fn reactions_show_in_read_pages(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let liked = app.post("alice", &room, "liked").await;
    let plain = app.post("alice", &room, "plain").await;
    for user in ["alice", "bob"] {
        react(&app, Method::PUT, user, &room, &liked, THUMBS_UP).await;
    }
    react(&app, Method::PUT, "bob", &room, &liked, PARTY).await;

    let page = app
        .call(Method::GET, &format!("/api/rooms/{room}/messages"), Some("alice"), None)
        .await;
    assert_status(&page, StatusCode::OK);
    let messages = posts(page.body["messages"].as_array().unwrap().clone());
    let find = |id: &str| messages.iter().find(|m| m["id"] == id).unwrap().clone();
    assert_eq!(
        find(&liked)["reactions"],
        json!([{ "emoji": "👍", "count": 2, "me": true }, { "emoji": "🎉", "count": 1, "me": false }])
    );
    assert!(find(&plain).get("reactions").is_none());
}
