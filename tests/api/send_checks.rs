//! The send checks over HTTP, each with its status: timed out (403, even the owner),
//! read-only (403), slowmode (429 with Retry-After), word filter (403; with a timeout), bans
//! (the very next send), and what ManageMessages is exempt from.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestClock, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    read_only_refuses_members_but_not_manage_messages,
    a_replies_only_room_takes_members_replies_and_moderators_posts,
    slowmode_answers_429_with_retry_after_until_the_window_passes,
    a_timeout_refuses_every_send_even_the_owners,
    a_ban_refuses_the_very_next_send_and_every_join,
    the_word_filter_sees_through_disguises_and_passes_longer_words,
    block_and_timeout_times_the_sender_out,
);

/// A room owned by "owner" with a plain member "bob" and a member "mod" holding ManageMessages.
async fn room_with_moderator(app: &TestApp) -> String {
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    app.join("mod", &room).await;
    app.grant("owner", &room, "mod", &["ManageMessages"], 10).await;
    room
}

async fn configure(app: &TestApp, room: &str, change: Value) {
    let reply = app.act(Method::PATCH, "owner", &format!("/rooms/{room}"), change).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

/// An announcement room: members answer in threads and start nothing; ManageMessages posts;
/// the setting is ManageRoom's, logged, and a wrong value is a documented 422.
async fn a_replies_only_room_takes_members_replies_and_moderators_posts(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    app.act(
        Method::PATCH,
        "bob",
        &format!("/rooms/{room}"),
        json!({ "repliesOnly": true }),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    app.act(
        Method::PATCH,
        "owner",
        &format!("/rooms/{room}"),
        json!({ "repliesOnly": "yes" }),
    )
    .await
    .assert_error(422, "VALIDATION");
    let set = app
        .act(
            Method::PATCH,
            "owner",
            &format!("/rooms/{room}"),
            json!({ "repliesOnly": true }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    assert_eq!(set.body["repliesOnly"], true);

    let refused = app.send("bob", &room, "a new topic", None).await;
    refused.assert_error(403, "FORBIDDEN");
    assert!(
        refused.body["message"].as_str().unwrap().contains("replies"),
        "{}",
        refused.body
    );
    let poll = json!({ "type": "Poll", "poll": { "question": "Lunch?", "options": ["a", "b"] } });
    app.act(Method::POST, "bob", &format!("/rooms/{room}/messages"), poll)
        .await
        .assert_error(403, "FORBIDDEN");
    let post = app.post("mod", &room, "the announcement").await;
    let reply = app
        .act(
            Method::POST,
            "bob",
            &format!("/rooms/{room}/messages"),
            json!({ "text": "a question about it", "replyTo": post }),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    assert_eq!(reply.body["threadId"], post.as_str());

    let log = app.moderation_log("owner", &room).await;
    assert!(log.body.to_string().contains("repliesOnly"), "{}", log.body);
    configure(&app, &room, json!({ "repliesOnly": false })).await;
    assert_eq!(status_of_send(&app, "bob", &room, "a new topic").await, 201);
}

async fn status_of_send(app: &TestApp, user: &str, room: &str, text: &str) -> u16 {
    app.send(user, room, text, None).await.status.as_u16()
}

async fn read_only_refuses_members_but_not_manage_messages(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    configure(&app, &room, json!({ "readOnly": true })).await;
    app.send("bob", &room, "hi", None).await.assert_error(403, "FORBIDDEN");
    assert_eq!(status_of_send(&app, "mod", &room, "hi").await, 201);
    assert_eq!(status_of_send(&app, "owner", &room, "hi").await, 201);
    configure(&app, &room, json!({ "readOnly": false })).await;
    assert_eq!(status_of_send(&app, "bob", &room, "hi").await, 201);
}

async fn slowmode_answers_429_with_retry_after_until_the_window_passes(backend: Backend) {
    // The window is read on the server's clock, which the test moves.
    let mut clock = TestClock::new();
    let app = spawn_app_with(&backend, &clock.settings());
    let room = room_with_moderator(&app).await;
    let elsewhere = app.create_room("bob").await;
    let source = app.post("bob", &elsewhere, "to forward").await;
    configure(&app, &room, json!({ "slowmodeSeconds": 2 })).await;

    assert_eq!(status_of_send(&app, "bob", &room, "one").await, 201);
    let early = app.send("bob", &room, "two", None).await;
    early.assert_error(429, "TOO_MANY_REQUESTS");
    let retry_after: u64 = early.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    // A forward into the room is a send like any other.
    let forward = app
        .act(
            Method::POST,
            "bob",
            &format!("/rooms/{elsewhere}/messages/{source}/forward"),
            json!({ "roomIds": [room] }),
        )
        .await;
    assert_eq!(forward.body[0]["status"], 429, "{}", forward.body);
    // ManageMessages is exempt.
    for _ in 0..3 {
        assert_eq!(status_of_send(&app, "mod", &room, "fast").await, 201);
    }
    clock.advance_ms(2100);
    assert_eq!(status_of_send(&app, "bob", &room, "three").await, 201);
}

async fn a_timeout_refuses_every_send_even_the_owners(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    let until = (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
    let timed = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/bob/timeout"),
            json!({ "until": until }),
        )
        .await;
    assert_eq!(timed.status, StatusCode::OK, "{}", timed.body);
    app.send("bob", &room, "hi", None).await.assert_error(403, "FORBIDDEN");
    let lifted = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/bob/timeout"),
            json!({ "until": null }),
        )
        .await;
    assert_eq!(lifted.status, StatusCode::OK);
    assert_eq!(status_of_send(&app, "bob", &room, "hi").await, 201);

    // Nobody outranks the owner, so their timeout is written to the member row directly —
    // the way a filter timeout or an imported state would set it. ManageMessages does not
    // exempt from a timeout, and the owner holds every permission.
    let chat = backend.chat().await;
    let tables = chat.store().tables();
    let mut row = tables
        .get(&chat.store().schema().rooms, &room, "m:owner")
        .await
        .unwrap()
        .unwrap();
    row.set(
        "timeoutUntil",
        tabletalk::storage::Value::datetime(chrono::Utc::now() + chrono::Duration::minutes(5)),
    );
    let any = tabletalk::storage::IfMatch::Any;
    tables
        .update(
            &chat.store().schema().rooms,
            &row,
            tabletalk::storage::UpdateMode::Replace,
            &any,
        )
        .await
        .unwrap();
    app.send("owner", &room, "hi", None)
        .await
        .assert_error(403, "FORBIDDEN");
    assert_eq!(status_of_send(&app, "mod", &room, "hi").await, 201);
}

async fn a_ban_refuses_the_very_next_send_and_every_join(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    assert_eq!(status_of_send(&app, "bob", &room, "before").await, 201);
    let banned = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/bob/ban"),
            json!({}),
        )
        .await;
    assert_eq!(banned.status, StatusCode::NO_CONTENT, "{}", banned.body);
    app.send("bob", &room, "after", None)
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::POST, &format!("/api/rooms/{room}/join"), Some("bob"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    // Nobody can ban the owner; a member without ManageMembers cannot ban at all.
    app.act(
        Method::POST,
        "mod",
        &format!("/rooms/{room}/members/owner/ban"),
        json!({}),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    let unbanned = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/bans/bob"),
            Some("owner"),
            None,
        )
        .await;
    assert_eq!(unbanned.status, StatusCode::NO_CONTENT);
    app.join("bob", &room).await;
    assert_eq!(status_of_send(&app, "bob", &room, "back").await, 201);
}

async fn the_word_filter_sees_through_disguises_and_passes_longer_words(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    configure(&app, &room, json!({ "wordFilter": { "words": ["darn"] } })).await;
    for blocked in ["oh darn it", "<b>DARN</b>", "ｄａｒｎ", "da\u{200B}rn", "dárn"] {
        app.send("bob", &room, blocked, None)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    for innocent in ["darned socks", "undarnable", "d a r n"] {
        assert_eq!(status_of_send(&app, "bob", &room, innocent).await, 201, "{innocent}");
    }
    assert_eq!(
        status_of_send(&app, "mod", &room, "darn").await,
        201,
        "ManageMessages is exempt"
    );
    // Edits pass the same filter.
    let id = app.post("bob", &room, "fine").await;
    app.act(
        Method::PATCH,
        "bob",
        &format!("/rooms/{room}/messages/{id}"),
        json!({ "text": "darn" }),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    // Markdown is filtered as its readers get it: the rendering, and the source beside it,
    // even where the rendering leaves a word out (a link reference's title).
    let hidden = "hi\n\n[x]: https://spam.example \"darn\"";
    for (method, path) in [
        (Method::POST, format!("/rooms/{room}/messages")),
        (Method::PATCH, format!("/rooms/{room}/messages/{id}")),
    ] {
        app.act(method, "bob", &path, json!({ "text": hidden, "format": "markdown" }))
            .await
            .assert_error(403, "FORBIDDEN");
    }
}

async fn block_and_timeout_times_the_sender_out(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_moderator(&app).await;
    let filter = json!({ "words": ["darn"], "action": "BlockAndTimeout", "timeoutSeconds": 600 });
    configure(&app, &room, json!({ "wordFilter": filter })).await;
    let before = chrono::Utc::now();
    app.send("bob", &room, "darn", None)
        .await
        .assert_error(403, "FORBIDDEN");
    // Now timed out: even a clean message is refused.
    let clean = app.send("bob", &room, "sorry", None).await;
    clean.assert_error(403, "FORBIDDEN");
    assert!(
        clean.body["message"].as_str().unwrap().contains("timed out"),
        "{}",
        clean.body
    );
    let bob = app.member("owner", &room, "bob").await.expect("bob is a member");
    let until: chrono::DateTime<chrono::Utc> = bob["timeoutUntil"].as_str().unwrap().parse().unwrap();
    assert!(until >= before + chrono::Duration::seconds(599), "{until}");
}
