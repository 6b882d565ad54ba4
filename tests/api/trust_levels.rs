//! Trust levels (docs/USING.md#trust-levels), through the real binary with the limits on and
//! the test clock: what each level lets a member's writes carry and how fast, the messages and
//! days counted in each send's transaction moving a member up, a room's own thresholds, a
//! moderator's setting, a timeout costing a level, and bad input on the new route and setting.

use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::attachments::{declare, png, send_with, uploaded};
use crate::helpers::messages::{assert_status, create_message, edit, mention};
use crate::helpers::{Backend, Reply, TestApp, TestClock, backend_tests};

backend_tests!(
    each_level_gates_links_files_room_mentions_and_its_rate,
    counted_messages_and_days_move_a_member_up_and_a_room_may_set_its_own_thresholds,
    a_moderator_sets_a_level_and_a_timeout_costs_one,
    concurrent_sends_from_two_processes_are_each_counted_once,
    bad_levels_and_thresholds_are_refused_with_their_status,
);

const NEWCOMER_SECONDS: i64 = 300;

/// A server with the limits on, reading `clock`: level 1 after 300 s, the default thresholds
/// above it (2: a day, 10 messages on 2 days; 3: a week, 50 messages on 4 days).
fn spawn_trusting(clock: &TestClock, backend: &Backend, extra: &[(&str, &str)]) -> TestApp {
    let mut settings = vec![("TABLETALK_WRITE_LIMITS", "on"), ("TABLETALK_NEWCOMER_SECONDS", "300")];
    settings.extend_from_slice(extra);
    clock.spawn(backend, &settings)
}

/// `user`'s level in `room` as the member list shows it.
async fn level(app: &TestApp, room: &str, user: &str) -> u64 {
    let member = app.member("alice", room, user).await.expect("a member");
    member["trustLevel"]
        .as_u64()
        .unwrap_or_else(|| panic!("no trustLevel: {member}"))
}

/// Asserts a 403 naming trust level `needed`.
fn assert_needs(reply: &Reply, needed: u64) {
    reply.assert_error(403, "FORBIDDEN");
    let message = reply.body["message"].as_str().unwrap();
    assert!(message.contains(&format!("needs trust level {needed}")), "{message}");
}

fn everyone() -> String {
    format!("<p>hey {}</p>", mention("@everyone"))
}

fn here() -> String {
    format!("<p>hey {}</p>", mention("@here"))
}

async fn send_n(app: &TestApp, user: &str, room: &str, n: usize, tag: &str) {
    for i in 0..n {
        app.post(user, room, &format!("{tag} number {i}")).await;
    }
}

async fn set_level(app: &TestApp, by: &str, room: &str, user: &str, level: Value) -> Reply {
    let path = format!("/rooms/{room}/members/{user}/trust-level");
    app.act(Method::PUT, by, &path, json!({ "level": level })).await
}

async fn each_level_gates_links_files_room_mentions_and_its_rate(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_trusting(&clock, &backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    assert_eq!(level(&app, &room, "bob").await, 0);
    assert_eq!(level(&app, &room, "alice").await, 3, "the owner has ManageMessages");

    // Level 0: no links, no files, no room mentions; 10 writes a minute.
    for link in [
        "see https://example.com",
        r#"<a href="https://example.com">x</a>"#,
        "www.example.com",
    ] {
        assert_needs(&app.send("bob", &room, link, None).await, 1);
    }
    assert_needs(&declare(&app, "bob", &room, "a.png", "image/png", 10).await, 1);
    assert_needs(&app.send("bob", &room, &everyone(), None).await, 2);
    assert_needs(&app.send("bob", &room, &here(), None).await, 2);
    let id = app.post("bob", &room, "plain").await;
    assert_needs(&edit(&app, "bob", &room, &id, "now https://example.com").await, 1);
    // An empty list of files is no file.
    let none = create_message(&app, "bob", &room, json!({ "text": "no files", "attachments": [] })).await;
    assert_status(&none, StatusCode::CREATED);
    // Refused content costs nothing: 8 more of 10, then the rate.
    send_n(&app, "bob", &room, 8, "level zero").await;
    let refused = app.send("bob", &room, "past the rate", None).await;
    refused.assert_error(429, "TOO_MANY_REQUESTS");
    assert_eq!(refused.headers["retry-after"], "6", "10 a minute: one every 6 s");
    // The owner, and both people of a direct conversation, are at the top from the start.
    app.post("alice", &room, "https://example.com").await;
    let direct = app.act(Method::POST, "bob", "/dms", json!({ "userId": "carol" })).await;
    let direct = direct.body["id"].as_str().unwrap().to_owned();
    app.post("bob", &direct, "look: https://example.com").await;

    // Level 1 after the newcomer period: links and files, still no room mentions; 30 a minute.
    clock.advance_s(NEWCOMER_SECONDS);
    assert_eq!(level(&app, &room, "bob").await, 1);
    app.post("bob", &room, "see https://example.com").await;
    let file = uploaded(&app, "bob", &room, "a.png", "image/png", &png(10)).await;
    assert_status(&send_with(&app, "bob", &room, &[&file]).await, StatusCode::CREATED);
    assert_status(
        &edit(&app, "bob", &room, &id, "now https://example.com").await,
        StatusCode::OK,
    );
    assert_needs(&app.send("bob", &room, &here(), None).await, 2);
    // The bucket refilled to its burst of 20 meanwhile; 3 of them drawn above.
    send_n(&app, "bob", &room, 17, "level one").await;
    let refused = app.send("bob", &room, "past the rate", None).await;
    refused.assert_error(429, "TOO_MANY_REQUESTS");
    assert_eq!(refused.headers["retry-after"], "2", "30 a minute: one every 2 s");
}

async fn counted_messages_and_days_move_a_member_up_and_a_room_may_set_its_own_thresholds(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_trusting(&clock, &backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    clock.advance_s(NEWCOMER_SECONDS);
    send_n(&app, "bob", &room, 12, "first day").await;
    // A day later: a day since joining and 12 messages, but on one day only.
    clock.advance_s(24 * 3600);
    assert_eq!(level(&app, &room, "bob").await, 1);
    assert_needs(&app.send("bob", &room, &everyone(), None).await, 2);
    // This send is made at level 1 and counts the second day.
    app.post("bob", &room, "a second day").await;
    assert_eq!(level(&app, &room, "bob").await, 2);
    app.post("bob", &room, &everyone()).await;
    app.post("bob", &room, &here()).await;

    // The room's own thresholds: level 3 at 15 messages on 2 days, which bob has sent.
    let lower = json!({ "trustThresholds": [
        { "joinedSeconds": 0, "messages": 1, "activeDays": 1 },
        { "joinedSeconds": 0, "messages": 5, "activeDays": 1 },
        { "joinedSeconds": 0, "messages": 15, "activeDays": 2 },
    ] });
    let changed = app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), lower).await;
    assert_status(&changed, StatusCode::OK);
    assert_eq!(changed.body["trustThresholds"][2]["messages"], 15, "{}", changed.body);
    assert_eq!(level(&app, &room, "bob").await, 3);
    // At the top there is no member rate: more at once than level 2's burst of 20.
    send_n(&app, "bob", &room, 25, "at the top").await;
    // Another member is counted from their own messages, not bob's.
    app.join("carol", &room).await;
    assert_eq!(level(&app, &room, "carol").await, 0, "no message, no day");
    app.post("carol", &room, "hello").await;
    assert_eq!(level(&app, &room, "carol").await, 1);
    // Back to the server's thresholds.
    let reset = json!({ "trustThresholds": null });
    assert_status(
        &app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), reset).await,
        StatusCode::OK,
    );
    assert_eq!(level(&app, &room, "bob").await, 2);
    assert_eq!(level(&app, &room, "carol").await, 0);
}

async fn a_moderator_sets_a_level_and_a_timeout_costs_one(backend: Backend) {
    let mut clock = TestClock::new();
    let app = spawn_trusting(&clock, &backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.join("carol", &room).await;

    set_level(&app, "carol", &room, "bob", json!(3))
        .await
        .assert_error(403, "FORBIDDEN");
    let set = set_level(&app, "alice", &room, "bob", json!(2)).await;
    assert_status(&set, StatusCode::OK);
    assert_eq!(
        (set.body["trustLevel"].clone(), set.body["trustLevelSet"].clone()),
        (json!(2), json!(true))
    );
    let listed = app.member("alice", &room, "bob").await.unwrap();
    assert_eq!(
        (listed["trustLevel"].clone(), listed["trustLevelSet"].clone()),
        (json!(2), json!(true))
    );
    app.post("bob", &room, &everyone()).await;
    let log = app.moderation_log("alice", &room).await;
    let entry = &log.body["entries"][0];
    assert_eq!(
        (entry["action"].clone(), entry["details"]["level"].clone()),
        (json!("trustLevelSet"), json!(2))
    );
    assert_eq!(entry["targetUserId"], "bob");

    // Cleared: back to what he earned (a newcomer).
    assert_status(
        &set_level(&app, "alice", &room, "bob", Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(
        app.member("alice", &room, "bob").await.unwrap()["trustLevelSet"],
        Value::Null
    );
    assert_needs(&app.send("bob", &room, "https://example.com", None).await, 1);

    // A timeout is a strike: level 1 earned, one strike, level 0 — until 30 days have passed.
    clock.advance_s(NEWCOMER_SECONDS);
    assert_eq!(level(&app, &room, "bob").await, 1);
    let until = clock.at(60);
    let timeout = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/bob/timeout"),
            json!({ "until": until }),
        )
        .await;
    assert_status(&timeout, StatusCode::OK);
    clock.advance_s(61);
    assert_eq!(level(&app, &room, "bob").await, 0);
    assert_needs(&app.send("bob", &room, "https://example.com", None).await, 1);
    // Leaving and joining again washes away neither the strike nor a level set.
    let leave = app
        .call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("bob"), None)
        .await;
    assert!(leave.status.is_success(), "{}", leave.body);
    app.join("bob", &room).await;
    clock.advance_s(NEWCOMER_SECONDS);
    assert_eq!(level(&app, &room, "bob").await, 0, "the strike came back with him");
    assert_status(
        &set_level(&app, "alice", &room, "carol", json!(0)).await,
        StatusCode::OK,
    );
    app.kick("alice", &room, "carol").await;
    app.join("carol", &room).await;
    clock.advance_s(NEWCOMER_SECONDS);
    assert_eq!(level(&app, &room, "carol").await, 0, "the level set came back with her");
    // So does a ban, once lifted: carol left at level 3 once, and was set to 0 since.
    assert_status(
        &set_level(&app, "alice", &room, "carol", json!(3)).await,
        StatusCode::OK,
    );
    app.kick("alice", &room, "carol").await;
    app.join("carol", &room).await;
    assert_status(
        &set_level(&app, "alice", &room, "carol", json!(0)).await,
        StatusCode::OK,
    );
    let banned = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/carol/ban"),
            json!({}),
        )
        .await;
    assert!(banned.status.is_success(), "{}", banned.body);
    let lifted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/bans/carol"),
            Some("alice"),
            None,
        )
        .await;
    assert!(lifted.status.is_success(), "{}", lifted.body);
    app.join("carol", &room).await;
    assert_eq!(
        level(&app, &room, "carol").await,
        0,
        "the level set at the ban, not an older one"
    );

    clock.advance_s(30 * 24 * 3600);
    assert_eq!(level(&app, &room, "bob").await, 1);
    app.post("bob", &room, "https://example.com").await;
}

async fn concurrent_sends_from_two_processes_are_each_counted_once(backend: Backend) {
    let mut clock = TestClock::new();
    let thresholds = r#"[{"joinedSeconds":0,"messages":0,"activeDays":0},{"joinedSeconds":0,"messages":0,"activeDays":0},{"joinedSeconds":0,"messages":17,"activeDays":0}]"#;
    let extra = [("TABLETALK_TRUST_THRESHOLDS", thresholds)];
    let first = spawn_trusting(&clock, &backend, &extra);
    let second = spawn_trusting(&clock, &backend, &extra);
    let room = first.create_room("alice").await;
    first.join("bob", &room).await;
    assert_eq!(level(&first, &room, "bob").await, 2);
    // Set to the top, so no member rate refuses any of them (the user's own bucket, shared by
    // leases, still holds); his sends are counted all the same.
    assert_status(
        &set_level(&first, "alice", &room, "bob", json!(3)).await,
        StatusCode::OK,
    );
    // In waves of four, two through each process, the clock moved on between them: the user's
    // bucket (leased by both processes) is full again for each wave.
    let room_id = room.as_str();
    for wave in 0..4 {
        let sends = (0..4).map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            async move { app.send("bob", room_id, &format!("wave {wave}, {i}"), None).await }
        });
        for reply in join_all(sends).await {
            assert_status(&reply, StatusCode::CREATED);
        }
        clock.advance_s(2);
    }
    assert_status(
        &set_level(&second, "alice", &room, "bob", Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(level(&first, &room, "bob").await, 2, "16 counted, not more");
    second.post("bob", &room, "the 17th").await;
    assert_eq!(level(&first, &room, "bob").await, 3, "17 counted, none lost");
}

async fn bad_levels_and_thresholds_are_refused_with_their_status(backend: Backend) {
    let clock = TestClock::new();
    let app = spawn_trusting(&clock, &backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    for bad in [
        json!({ "level": 4 }),
        json!({ "level": -1 }),
        json!({ "level": "2" }),
        json!({ "level": 1, "x": 1 }),
    ] {
        let reply = app
            .act(
                Method::PUT,
                "alice",
                &format!("/rooms/{room}/members/bob/trust-level"),
                bad.clone(),
            )
            .await;
        assert!(
            reply.status.is_client_error() && reply.status != StatusCode::NOT_FOUND,
            "{bad}: {}",
            reply.body
        );
    }
    let broken = app
        .call(
            Method::PUT,
            &format!("/api/rooms/{room}/members/bob/trust-level"),
            Some("alice"),
            None,
        )
        .await;
    assert!(broken.status.is_client_error(), "{}", broken.body);
    set_level(&app, "alice", &room, "nobody", json!(1))
        .await
        .assert_error(404, "NOT_FOUND");
    set_level(&app, "stranger", &room, "bob", json!(1))
        .await
        .assert_error(404, "NOT_FOUND");
    set_level(&app, "alice", "not-a-room", "bob", json!(1))
        .await
        .assert_error(404, "NOT_FOUND");
    set_level(&app, "bob", &room, "alice", json!(1))
        .await
        .assert_error(403, "FORBIDDEN");

    let t = |s: i64, m: i64, d: i64| json!({ "joinedSeconds": s, "messages": m, "activeDays": d });
    for bad in [
        json!([t(0, 10, 0), t(0, 5, 0), t(0, 20, 0)]),
        json!([t(0, 0, 0), t(0, 0, 0)]),
        json!([t(0, 0, 0), t(0, 0, 0), t(0, 0, 0), t(0, 0, 0)]),
        json!([t(-1, 0, 0), t(0, 0, 0), t(0, 0, 0)]),
        json!([t(0, 0, 0), t(0, 0, 0), t(0, 2_000_000, 0)]),
        json!([t(0, 0, 0), t(0, 0, 0), t(0, 0, 4000)]),
        json!("high"),
    ] {
        let reply = app
            .act(
                Method::PATCH,
                "alice",
                &format!("/rooms/{room}"),
                json!({ "trustThresholds": bad }),
            )
            .await;
        reply.assert_error(422, "VALIDATION");
    }
    let fine = json!({ "trustThresholds": [t(0, 0, 0), t(0, 0, 0), t(0, 0, 0)] });
    app.act(Method::PATCH, "bob", &format!("/rooms/{room}"), fine)
        .await
        .assert_error(403, "FORBIDDEN");
}
