//! The limits against abuse, through the real binary: each answers 429 with `Retry-After`
//! exactly when it should and lets the write through again once the time has passed. Time is
//! the test clock (`TABLETALK_TEST_CLOCK_FILE`): a file of Unix milliseconds the server reads
//! on every write, moved forward by the test instead of sleeping, and shared by both processes
//! of the two-process test.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tabletalk::config::DEVELOPMENT_JWT_SECRET;

use crate::helpers::messages::{PARTY, THUMBS_UP, assert_status, react};
use crate::helpers::{Backend, Reply, TestApp, TestClock, backend_tests, posts, spawn_app_with};

backend_tests!(
    the_user_bucket_passes_its_burst_then_refuses_until_it_refills,
    every_kind_of_write_draws_from_the_user_bucket,
    a_room_ceiling_refuses_sends_over_it_but_not_moderators,
    the_same_text_is_refused_for_ten_minutes_only_from_the_same_sender_in_the_same_room,
    a_send_that_fails_does_not_block_its_text,
    the_servers_own_lines_pass_full_limits,
    two_processes_share_one_users_bucket,
    bad_ceilings_are_refused_with_their_status,
    pinning_draws_from_the_user_bucket,
    joining_and_leaving_draw_from_the_user_bucket,
    making_rooms_invitations_and_read_marks_draw_from_the_user_bucket,
);

/// Every member at the top trust level at once: these tests are of the buckets every write
/// draws from whatever its level (the levels' own gates and rates: `trust_levels.rs`).
const EVERYONE_TRUSTED: &str = r#"[{"joinedSeconds":0,"messages":0,"activeDays":0},{"joinedSeconds":0,"messages":0,"activeDays":0},{"joinedSeconds":0,"messages":0,"activeDays":0}]"#;

/// A server with the limits on, reading `clock`, every member trusted.
fn spawn_limited(clock: &TestClock, backend: &Backend) -> TestApp {
    let mut settings = clock.settings().to_vec();
    settings.extend([
        ("TABLETALK_WRITE_LIMITS", "on"),
        ("TABLETALK_TRUST_THRESHOLDS", EVERYONE_TRUSTED),
    ]);
    spawn_app_with(backend, &settings)
}

/// Asserts a 429 whose `Retry-After` is `seconds`.
fn assert_retry_after(reply: &Reply, seconds: u64) {
    reply.assert_error(429, "TOO_MANY_REQUESTS");
    let header = reply.headers.get("retry-after").expect("a Retry-After header");
    assert_eq!(header.to_str().unwrap(), seconds.to_string(), "{}", reply.body);
}

async fn set_room(app: &TestApp, user: &str, room: &str, change: Value) -> Reply {
    app.act(Method::PATCH, user, &format!("/rooms/{room}"), change).await
}

/// Sends `n` distinct texts as `user`, each of which must be stored.
async fn send_n(app: &TestApp, user: &str, room: &str, n: usize, tag: &str) {
    for i in 0..n {
        app.post(user, room, &format!("{tag} number {i}")).await;
    }
}

async fn the_user_bucket_passes_its_burst_then_refuses_until_it_refills(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    // Making the room took one token of the 40.
    send_n(&app, "alice", &room, 39, "burst").await;
    assert_retry_after(&app.send("alice", &room, "the 41st", None).await, 1);
    assert_retry_after(&app.send("alice", &room, "the 42nd", None).await, 1);
    let bobs = app.create_room("bob").await;
    app.post("bob", &bobs, "others are not limited by alice").await;

    clock.advance_ms(60);
    app.post("alice", &room, "one token refills in 1/20 s").await;
    assert_retry_after(&app.send("alice", &room, "and no more", None).await, 1);
    clock.advance_ms(1000);
    send_n(&app, "alice", &room, 20, "refill").await;
    assert_retry_after(&app.send("alice", &room, "a second refills 20", None).await, 1);
}

async fn every_kind_of_write_draws_from_the_user_bucket(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "react to me").await;
    let poll = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/messages"),
            json!({ "type": "Poll", "poll": { "question": "q?", "options": ["a", "b"] } }),
        )
        .await;
    assert_status(&poll, StatusCode::CREATED);
    let option = poll.body["poll"]["options"][0]["id"].clone();
    let poll_id = poll.body["id"].as_str().unwrap().to_owned();
    // The room and 2 sends so far; 35 more leave 2 tokens: one edit and one reaction take them.
    send_n(&app, "alice", &room, 35, "filler").await;
    let edited = crate::helpers::messages::edit(&app, "alice", &room, &id, "edited once").await;
    assert_status(&edited, StatusCode::OK);
    assert_status(
        &react(&app, Method::PUT, "alice", &room, &id, THUMBS_UP).await,
        StatusCode::OK,
    );

    let vote = crate::helpers::messages::vote(&app, "alice", &room, &poll_id, option.clone()).await;
    assert_retry_after(&vote, 1);
    assert_retry_after(&react(&app, Method::PUT, "alice", &room, &id, PARTY).await, 1);
    assert_retry_after(&react(&app, Method::DELETE, "alice", &room, &id, THUMBS_UP).await, 1);
    assert_retry_after(
        &crate::helpers::messages::edit(&app, "alice", &room, &id, "edited twice").await,
        1,
    );
    let report = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/messages/{id}/report"),
            json!({ "reason": "spam" }),
        )
        .await;
    assert_retry_after(&report, 1);
    clock.advance_ms(1000);
    let vote = crate::helpers::messages::vote(&app, "alice", &room, &poll_id, option).await;
    assert_status(&vote, StatusCode::OK);
}

async fn a_room_ceiling_refuses_sends_over_it_but_not_moderators(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    let other = app.create_room("alice").await;
    app.join("bob", &other).await;
    let set = set_room(&app, "alice", &room, json!({ "maxSendsPerSecond": 3 })).await;
    assert_status(&set, StatusCode::OK);
    assert_eq!(set.body["maxSendsPerSecond"], 3);

    app.post("bob", &room, "one").await;
    app.post("carol", &room, "two").await;
    app.post("bob", &room, "three").await;
    assert_retry_after(&app.send("carol", &room, "four, over the ceiling", None).await, 1);
    assert_retry_after(&app.send("bob", &room, "five, over the ceiling", None).await, 1);
    app.post("alice", &room, "the owner (ManageMessages) is exempt").await;
    app.post("bob", &other, "another room has its own ceiling (none)").await;

    clock.advance_ms(1000);
    send_n(&app, "carol", &room, 3, "next second").await;
    assert_retry_after(&app.send("bob", &room, "over again", None).await, 1);

    let off = set_room(&app, "alice", &room, json!({ "maxSendsPerSecond": 0 })).await;
    assert_status(&off, StatusCode::OK);
    send_n(&app, "bob", &room, 10, "no ceiling").await;
}

async fn the_same_text_is_refused_for_ten_minutes_only_from_the_same_sender_in_the_same_room(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    app.join("bob", &other).await;
    app.post("bob", &room, "Buy cheap watches").await;
    // The word filter's normalisation: case, markup, punctuation and full-width letters.
    for repeat in [
        "Buy cheap watches",
        "<p>buy CHEAP <b>watches</b>!!</p>",
        "ｂｕｙ cheap, watches",
    ] {
        assert_retry_after(&app.send("bob", &room, repeat, None).await, 600);
    }
    app.post("carol", &room, "Buy cheap watches").await;
    app.post("bob", &other, "Buy cheap watches").await;
    app.post("bob", &room, "Buy cheap clocks").await;

    clock.advance_ms(599_000);
    assert_retry_after(&app.send("bob", &room, "buy cheap watches", None).await, 1);
    clock.advance_ms(1_000);
    app.post("bob", &room, "buy cheap watches").await;
    assert_retry_after(&app.send("bob", &room, "buy cheap watches", None).await, 600);
}

async fn a_send_that_fails_does_not_block_its_text(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let missing = app
        .act(
            Method::POST,
            "bob",
            &format!("/rooms/{room}/messages"),
            json!({ "text": "my answer", "replyTo": "0000000000000000001" }),
        )
        .await;
    assert!(
        missing.status.is_client_error() && missing.status != StatusCode::TOO_MANY_REQUESTS,
        "{}",
        missing.body
    );
    app.post("bob", &room, "my answer").await;
    assert_retry_after(&app.send("bob", &room, "my answer", None).await, 600);
}

async fn the_servers_own_lines_pass_full_limits(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    assert_status(
        &set_room(&app, "alice", &room, json!({ "maxSendsPerSecond": 1 })).await,
        StatusCode::OK,
    );
    app.join("bob", &room).await;
    app.post("bob", &room, "the one send of this second").await;
    assert_retry_after(&app.send("bob", &room, "over the ceiling", None).await, 1);
    // Her bucket of 40, less the token making the room took.
    send_n(&app, "alice", &room, 39, "alice's burst").await;
    assert_retry_after(&app.send("alice", &room, "over her bucket", None).await, 1);

    // A join line with the ceiling reached, a rename line with the owner's bucket empty.
    app.join("carol", &room).await;
    assert_status(
        &set_room(&app, "alice", &room, json!({ "name": "renamed" })).await,
        StatusCode::OK,
    );
    let all = app.read_all("carol", &room, "asc", 100).await;
    let lines: Vec<(&str, &str)> = all
        .iter()
        .map(|m| (m["type"].as_str().unwrap(), m["text"].as_str().unwrap_or_default()))
        .filter(|(kind, _)| *kind != "Message")
        .collect();
    let last_two = &lines[lines.len() - 2..];
    assert_eq!(last_two[0].0, "System", "{lines:?}");
    assert!(last_two[0].1.contains("carol"), "carol's join line: {lines:?}");
    assert_eq!(last_two[1].0, "EditRoom", "{lines:?}");
    assert_eq!(posts(all).len(), 40);
}

async fn two_processes_share_one_users_bucket(backend: Backend) {
    let mut clock = TestClock::new();
    let first = spawn_limited(&clock, &backend);
    let second = spawn_limited(&clock, &backend);
    let room = first.create_room("alice").await;
    let mut stored = 0;
    for i in 0..60 {
        let app = if i % 2 == 0 { &first } else { &second };
        let reply = app.send("alice", &room, &format!("alternating {i}"), None).await;
        match reply.status {
            StatusCode::CREATED => stored += 1,
            _ => assert_retry_after(&reply, 1),
        }
    }
    // One burst of 40, less the token making the room took.
    assert_eq!(stored, 39, "one burst between both processes, not one each");
    for app in [&first, &second] {
        assert_retry_after(&app.send("alice", &room, "both are empty", None).await, 1);
    }

    clock.advance_ms(1000);
    let mut refilled = 0;
    for i in 0..40 {
        let app = if i % 2 == 0 { &second } else { &first };
        if app
            .send("alice", &room, &format!("after a second {i}"), None)
            .await
            .status
            == StatusCode::CREATED
        {
            refilled += 1;
        }
    }
    assert_eq!(refilled, 20, "one second's refill between both processes");
    assert_eq!(posts(first.read_all("alice", &room, "asc", 100).await).len(), 59);
}

async fn bad_ceilings_are_refused_with_their_status(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    for (bad, status, code) in [
        (json!({ "maxSendsPerSecond": 1001 }), 422, "VALIDATION"),
        (json!({ "maxSendsPerSecond": -1 }), 422, "VALIDATION"),
        (json!({ "maxSendsPerSecond": 2.5 }), 422, "VALIDATION"),
        (json!({ "maxSendsPerSecond": "fast" }), 422, "VALIDATION"),
        (json!({ "maxSendsPerSecond": 4_294_967_296u64 }), 422, "VALIDATION"),
    ] {
        set_room(&app, "alice", &room, bad).await.assert_error(status, code);
    }
    set_room(&app, "bob", &room, json!({ "maxSendsPerSecond": 5 }))
        .await
        .assert_error(403, "FORBIDDEN");
    let raw = app
        .http
        .patch(format!("{}/api/rooms/{room}", app.base))
        .bearer_auth(crate::helpers::token_with("alice", DEVELOPMENT_JWT_SECRET, 60))
        .header("content-type", "application/json")
        .body("{\"maxSendsPerSecond\":")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    let room_now = app
        .call(Method::GET, &format!("/api/rooms/{room}"), Some("alice"), None)
        .await;
    assert_eq!(
        room_now.body["maxSendsPerSecond"], 0,
        "nothing changed: {}",
        room_now.body
    );
}

/// A pin writes the message row and a `PinMessage` line in the room; a member may pin their
/// own message, so pinning and unpinning it over and over would flood the room with lines
/// at no cost unless each pin draws from the user's bucket like every other write.
async fn pinning_draws_from_the_user_bucket(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("bob").await;
    app.join("alice", &room).await;
    let id = app.post("alice", &room, "pin me").await;
    let pin = format!("/rooms/{room}/messages/{id}/pin");
    let mut refused = None;
    for i in 0..60 {
        let pinned = app.act(Method::POST, "alice", &pin, json!({})).await;
        if pinned.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some((i, pinned));
            break;
        }
        assert_status(&pinned, StatusCode::OK);
        assert_status(&app.act(Method::DELETE, "alice", &pin, json!({})).await, StatusCode::OK);
    }
    let (i, reply) = refused.expect("60 pins and unpins at one instant, and no 429");
    assert_retry_after(&reply, 1);
    assert!(i <= 20, "the bucket of 40 ran out after {i} pin-unpin pairs");
}

/// A join and a leave each write a line in the room in the member's name: leaving and
/// joining a public room over and over would flood it at no cost unless each draws from the
/// user's bucket.
async fn joining_and_leaving_draw_from_the_user_bucket(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("bob").await;
    let mut refused = None;
    for i in 0..60 {
        let joined = app
            .call(Method::POST, &format!("/api/rooms/{room}/join"), Some("alice"), None)
            .await;
        if joined.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some((i, joined));
            break;
        }
        assert_status(&joined, StatusCode::OK);
        let left = app
            .call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("alice"), None)
            .await;
        if left.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some((i, left));
            break;
        }
        assert!(left.status.is_success(), "{}", left.body);
    }
    let (i, reply) = refused.expect("60 joins and leaves at one instant, and no 429");
    assert_retry_after(&reply, 1);
    assert!(i <= 20, "the bucket of 40 ran out after {i} join-leave pairs");
}

/// Making rooms and invitations, marking rooms read and opening a live connection are writes
/// in the caller's name (an invitation lands in somebody else's list; marking every room read
/// writes in each): each draws from the user's bucket, so none of them can be repeated without
/// bound. Each is tried by a user of its own, whose bucket nothing else drew from but a join.
async fn making_rooms_invitations_and_read_marks_draw_from_the_user_bucket(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_limited(&clock, &backend);
    let room = app.create_room("bob").await;
    app.join("erin", &room).await;
    for what in ["createRoom", "createInvitation", "markRead", "markAllRead", "negotiate"] {
        let mut refused = None;
        for i in 0..60 {
            let reply = match what {
                "createRoom" => {
                    app.act(Method::POST, "alice", "/rooms", json!({ "name": "again" }))
                        .await
                }
                "createInvitation" => {
                    let invitee = json!({ "userId": format!("u{i}") });
                    app.act(Method::POST, "bob", &format!("/rooms/{room}/invites"), invitee)
                        .await
                }
                "markRead" => {
                    app.act(Method::POST, "erin", &format!("/rooms/{room}/read"), json!({}))
                        .await
                }
                "markAllRead" => app.call(Method::POST, "/api/rooms/read", Some("carol"), None).await,
                _ => app.call(Method::POST, "/api/negotiate", Some("dave"), None).await,
            };
            if reply.status == StatusCode::TOO_MANY_REQUESTS {
                refused = Some((i, reply));
                break;
            }
            assert!(reply.status.is_success(), "{what}: {}", reply.body);
        }
        let (i, reply) = refused.unwrap_or_else(|| panic!("60 of {what} at one instant, and no 429"));
        assert_retry_after(&reply, 1);
        assert!(i <= 40, "{what}: the bucket of 40 ran out after {i}");
    }
}
