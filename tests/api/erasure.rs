//! Erasing oneself: `POST /api/me/erase` starts a background job, `GET` reports it. The job is
//! interrupted for real (its process killed mid-way) and finished by the next process.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{at, create_poll, react, vote};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with, token};

backend_tests!(
    an_erasure_killed_halfway_is_finished_by_the_next_process,
    erasure_answers_bad_input_with_its_documented_errors,
);

/// Batches of two rows with a pause after each, so the job runs long enough to be killed in
/// the middle; a short lease and a housekeeping run every second, so the next process takes
/// it over soon after.
const SLOW_ERASURE: &[(&str, &str)] = &[
    ("TABLETALK_ERASURE_BATCH", "2"),
    ("TABLETALK_ERASURE_PAUSE_MS", "250"),
    ("TABLETALK_ERASURE_LEASE_SECONDS", "2"),
    ("TABLETALK_HOUSEKEEPING_SECONDS", "1"),
];

async fn erasure(app: &TestApp, user: &str) -> Value {
    let reply = app.call(Method::GET, "/api/me/erase", Some(user), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

/// Asks until `done` holds of the erasure's status, for at most a minute.
async fn erasure_until(app: &TestApp, user: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = erasure(app, user).await;
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "the erasure did not get there: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A change-feed cursor of `room` after everything in it so far, as `user` reads it.
async fn cursor_now(app: &TestApp, user: &str, room: &str) -> String {
    let mut cursor: Option<String> = None;
    loop {
        let reply = app.changes(user, &[(room, cursor.as_deref())], Some(200)).await;
        let entry = &reply.body["messageChanges"][0];
        assert_eq!(entry["status"], "OK", "{}", reply.body);
        cursor = Some(entry["cursor"].as_str().unwrap().to_owned());
        if !entry["hasMore"].as_bool().unwrap() {
            return cursor.unwrap();
        }
    }
}

fn cursor_version(cursor: &str, room: &str) -> u64 {
    tabletalk::messages::change_cursor::ChangeCursor::parse(cursor, room)
        .unwrap()
        .version
}

/// Every message of `room` (server lines included) `author` wrote, by id, as `reader` reads it.
async fn written_by(app: &TestApp, reader: &str, room: &str, author: &str) -> Vec<String> {
    let messages = app.read_all(reader, room, "asc", 100).await;
    messages
        .iter()
        .filter(|m| m["authorId"] == author)
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn subscription() -> Value {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use p256::elliptic_curve::sec1::ToEncodedPoint as _;
    let key = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng).public_key();
    json!({
        "endpoint": "https://push.example.com/subscriptions/erin",
        "keys": { "p256dh": B64.encode(key.to_encoded_point(false).as_bytes()), "auth": B64.encode([7u8; 16]) },
    })
}

/// Erin has messages in three rooms: `owned` (hers; bob and carol are in it, carol ranked
/// above bob), bob's `joined`, and carol's `left`, which she has left; and `alone`, hers with
/// no one else in it. She reacted to bob's message and voted on his poll, bob reacted to one
/// of hers, and she has a push subscription. Her erasure is killed mid-way and finished by the
/// next process: each of her messages is tombstoned exactly once and the feed says so, carol
/// owns `owned`, `alone` is gone, and nothing of hers is left.
async fn an_erasure_killed_halfway_is_finished_by_the_next_process(backend: Backend) {
    let first = spawn_app_with(&backend, SLOW_ERASURE);
    let app = &first;
    let owned = app.create_room("erin").await;
    app.join("bob", &owned).await;
    app.join("carol", &owned).await;
    app.grant("erin", &owned, "carol", &["ManageMessages"], 5).await;
    let joined = app.create_room("bob").await;
    app.join("erin", &joined).await;
    let left = app.create_room("carol").await;
    app.join("erin", &left).await;
    let alone = app.create_room("erin").await;
    for room in [&owned, &joined, &left, &alone] {
        for i in 0..3 {
            app.post("erin", room, &format!("erin {i}")).await;
        }
    }
    let leaving = app
        .call(Method::POST, &format!("/api/rooms/{left}/leave"), Some("erin"), None)
        .await;
    assert_eq!(leaving.status, StatusCode::NO_CONTENT, "{}", leaving.body);
    let bobs = app.post("bob", &owned, "bob's").await;
    assert!(
        react(app, Method::PUT, "erin", &owned, &bobs, "%F0%9F%91%8D")
            .await
            .status
            .is_success()
    );
    let hers = written_by(app, "bob", &owned, "erin").await;
    assert!(
        react(app, Method::PUT, "bob", &owned, &hers[0], "%F0%9F%8E%89")
            .await
            .status
            .is_success()
    );
    let poll = create_poll(app, "bob", &joined, "Lunch?", &["soup", "salad"]).await;
    let poll = poll.body["id"].as_str().unwrap().to_owned();
    assert!(vote(app, "erin", &joined, &poll, json!("1")).await.status.is_success());
    let subscribed = app
        .act(Method::PUT, "erin", "/push/subscriptions", subscription())
        .await;
    assert_eq!(subscribed.status, StatusCode::OK, "{}", subscribed.body);
    let elsewhere = app.create_room("dave").await;

    // Erin's messages (her join and leave lines too: they carry her name) and where the feed
    // of each room stands before the erasure.
    let rooms = [(&owned, "carol"), (&joined, "bob"), (&left, "carol")];
    let mut before = Vec::new();
    for (room, reader) in rooms {
        let ids = written_by(app, reader, room, "erin").await;
        before.push((ids, cursor_now(app, reader, room).await));
    }
    let total: usize = before.iter().map(|(ids, _)| ids.len()).sum();
    assert_eq!(total, 3 + 4 + 5, "{before:?}");

    let started = app.call(Method::POST, "/api/me/erase", Some("erin"), None).await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    assert_eq!(started.body["status"], "running");
    let job = started.body["id"].as_str().unwrap().to_owned();
    let again = app.call(Method::POST, "/api/me/erase", Some("erin"), None).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.body);
    assert_eq!(again.body["id"], job.as_str(), "a repeat answers the same job");
    app.call(
        Method::POST,
        &format!("/api/rooms/{elsewhere}/join"),
        Some("erin"),
        None,
    )
    .await
    .assert_error(409, "CONFLICT");

    // Killed halfway: some of her messages erased, not all.
    let halfway = erasure_until(app, "erin", |s| s["messagesErased"].as_u64().unwrap() >= 2).await;
    drop(first);
    assert_eq!(halfway["status"], "running", "killed before the end: {halfway}");
    assert!(halfway["messagesErased"].as_u64().unwrap() < total as u64, "{halfway}");

    let second = spawn_app_with(&backend, SLOW_ERASURE);
    let app = &second;
    let resumed = erasure(app, "erin").await;
    assert_eq!(
        (resumed["id"].as_str(), resumed["status"].as_str()),
        (Some(job.as_str()), Some("running"))
    );
    let done = erasure_until(app, "erin", |s| s["status"] == "done").await;
    assert_eq!(done["id"], job.as_str());
    assert_eq!(done["messagesErased"], total as u64, "{done}");
    assert!(done["finishedAt"].is_string() && done["roomsLeft"] == 0, "{done}");

    // Each message once in the feed, as DELETED, at the versions right after where the room
    // stood: a second tombstone would have taken another version.
    for ((room, reader), (ids, cursor)) in rooms.into_iter().zip(&before) {
        let reply = app.changes(reader, &[(room, Some(cursor))], Some(200)).await;
        let entry = &reply.body["messageChanges"][0];
        assert_eq!(entry["status"], "OK", "{}", reply.body);
        let changes = entry["changes"].as_array().unwrap();
        let mut changed: Vec<&str> = changes.iter().map(|c| c["message"]["id"].as_str().unwrap()).collect();
        changed.sort();
        let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
        expected.sort();
        assert_eq!(changed, expected, "{room}: {}", reply.body);
        let from = cursor_version(cursor, room);
        let mut versions: Vec<u64> = changes
            .iter()
            .map(|c| c["version"].as_str().unwrap().parse().unwrap())
            .collect();
        versions.sort();
        assert_eq!(
            versions,
            (from + 1..=from + ids.len() as u64).collect::<Vec<_>>(),
            "{room}"
        );
        for change in changes {
            assert_eq!(change["kind"], "DELETED", "{change}");
            assert_eq!(change["message"]["isDeleted"], true, "{change}");
            assert_eq!(change["message"]["authorName"], "", "{change}");
        }
    }

    // Nothing of hers is left: reactions, votes, subscriptions, memberships.
    let messages = app.read_all("bob", &owned, "asc", 100).await;
    assert!(messages.iter().all(|m| m.get("reactions").is_none()), "{messages:?}");
    let poll = app.call(Method::GET, &at(&joined, &poll, ""), Some("bob"), None).await;
    let votes: Vec<u64> = poll.body["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["votes"].as_u64().unwrap())
        .collect();
    assert_eq!(votes, [0, 0], "{}", poll.body);
    let subscriptions = app
        .call(Method::GET, "/api/push/subscriptions", Some("erin"), None)
        .await;
    assert_eq!(subscriptions.body, json!([]));
    let mine = app.call(Method::GET, "/api/rooms", Some("erin"), None).await;
    assert_eq!(mine.body, json!([]));
    for room in [&owned, &joined] {
        assert!(app.member("bob", room, "erin").await.is_none(), "{room}");
    }
    assert_eq!(app.member("bob", &owned, "carol").await.unwrap()["role"], "Owner");
    // The room she owned alone is gone.
    app.call(Method::POST, &format!("/api/rooms/{alone}/join"), Some("dave"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    // Done, she may start afresh.
    app.join("erin", &elsewhere).await;
}

/// The erasure routes' bad input: a body where none is expected (400, and nothing starts),
/// no erasure to report (404), no token (401), another method (405).
async fn erasure_answers_bad_input_with_its_documented_errors(backend: Backend) {
    let app = spawn_app(&backend);
    app.call(Method::GET, "/api/me/erase", Some("erin"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.act(Method::POST, "erin", "/me/erase", json!({ "now": true }))
        .await
        .assert_error(400, "BAD_REQUEST");
    let text = app
        .http
        .post(format!("{}/api/me/erase", app.base))
        .bearer_auth(token("erin"))
        .body("please")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), StatusCode::BAD_REQUEST);
    app.call(Method::GET, "/api/me/erase", Some("erin"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    for method in [Method::POST, Method::GET] {
        app.call(method, "/api/me/erase", None, None)
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    let put = app.call(Method::PUT, "/api/me/erase", Some("erin"), None).await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED, "{}", put.body);
    assert_eq!(put.body["code"], "BAD_REQUEST");
}
