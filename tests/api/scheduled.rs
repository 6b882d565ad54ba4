//! Scheduled messages through the real binary, on a clock the test moves (the test clock
//! file): sent once at their time whichever of two processes' timers runs, however often it
//! fires, and after a sender stopped between its claim and its send; refused, with the reason
//! in the item, when a check fails at that time; edited and cancelled by their owner. The timer
//! is the Functions app's `sendScheduled` invocation, and self-hosted the housekeeping loop.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tabletalk::adapters::clock::FileClock;
use tabletalk::config::DEVELOPMENT_JWT_SECRET;

use crate::helpers::messages::assert_status;
use crate::helpers::{Backend, Reply, TestApp, TestClock, backend_tests, posts};

backend_tests!(
    a_scheduled_message_is_sent_once_at_its_time_by_two_processes_and_a_repeated_timer,
    a_sender_that_stopped_between_claim_and_send_is_taken_over_once_its_claim_lapses,
    each_refusal_at_send_time_is_recorded_in_the_items_status,
    edit_and_cancel_change_what_is_sent_and_only_while_waiting,
    the_self_hosted_housekeeping_loop_sends_what_is_due,
    a_refused_item_is_told_to_its_owner_by_a_live_notice,
    bad_input_on_the_scheduled_routes_is_a_documented_4xx,
    a_scheduled_messages_attachments_are_checked_when_scheduled_held_for_it_and_sent_with_it,
    a_file_gone_by_its_time_refuses_the_item_and_a_refused_or_cancelled_item_frees_its_files,
    a_file_held_for_a_scheduled_message_outlives_the_expiry_of_unattached_uploads,
);

/// A Functions custom handler on `clock`: its timers run when invoked.
fn handler(clock: &TestClock, backend: &Backend) -> TestApp {
    clock.spawn(backend, &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")])
}

async fn schedule(app: &TestApp, user: &str, room: &str, body: Value) -> Reply {
    app.act(Method::POST, user, &format!("/rooms/{room}/scheduled"), body)
        .await
}

/// Schedules `text` as `user` for `at`; its id.
async fn schedule_text(app: &TestApp, user: &str, room: &str, text: &str, at: &str) -> String {
    let reply = schedule(app, user, room, json!({ "text": text, "sendAt": at })).await;
    assert_status(&reply, StatusCode::CREATED);
    assert_eq!(reply.body["status"], "scheduled");
    reply.body["id"].as_str().unwrap().to_owned()
}

async fn mine(app: &TestApp, user: &str, room: &str) -> Vec<Value> {
    let reply = app
        .call(Method::GET, &format!("/api/rooms/{room}/scheduled"), Some(user), None)
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body.as_array().unwrap().clone()
}

async fn status_of(app: &TestApp, user: &str, room: &str, id: &str) -> Value {
    mine(app, user, room)
        .await
        .into_iter()
        .find(|item| item["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed"))
}

async fn texts(app: &TestApp, room: &str) -> Vec<String> {
    let messages = app.read_all("alice", room, "asc", 100).await;
    messages
        .iter()
        .filter(|m| m["type"] == "Message" || m["type"] == "Poll")
        .map(|m| match m["type"].as_str() {
            Some("Poll") => format!("poll: {}", m["poll"]["question"].as_str().unwrap()),
            _ => m["text"].as_str().unwrap().to_owned(),
        })
        .collect()
}

async fn a_scheduled_message_is_sent_once_at_its_time_by_two_processes_and_a_repeated_timer(backend: Backend) {
    let mut clock = TestClock::new();
    let (a, b) = (handler(&clock, &backend), handler(&clock, &backend));
    let room = a.create_room("alice").await;
    let mut ids = Vec::new();
    for text in ["first", "second", "third"] {
        ids.push(schedule_text(&a, "alice", &room, text, &clock.at(60)).await);
    }
    let poll = json!({ "poll": { "question": "lunch?", "options": ["yes", "no"] }, "sendAt": clock.at(60) });
    let poll = schedule(&b, "alice", &room, poll).await;
    assert_status(&poll, StatusCode::CREATED);
    ids.push(poll.body["id"].as_str().unwrap().to_owned());

    a.run_timer("sendScheduled").await;
    assert!(texts(&a, &room).await.is_empty(), "nothing before its time");
    clock.advance_s(60);
    tokio::join!(
        a.run_timer("sendScheduled"),
        b.run_timer("sendScheduled"),
        a.run_timer("sendScheduled"),
        b.run_timer("sendScheduled")
    );
    let mut sent = texts(&a, &room).await;
    sent.sort();
    assert_eq!(sent, ["first", "poll: lunch?", "second", "third"]);
    let messages = a.read_all("alice", &room, "asc", 100).await;
    for id in &ids {
        let item = status_of(&b, "alice", &room, id).await;
        assert_eq!(item["status"], "sent", "{item}");
        let message_id = item["messageId"].as_str().unwrap();
        let message = messages.iter().find(|m| m["id"] == message_id).unwrap();
        assert_eq!(message["authorId"], "alice");
        assert!(message["clientId"].as_str().unwrap().starts_with("sched."));
    }
    clock.advance_s(3600);
    b.run_timer("sendScheduled").await;
    assert_eq!(texts(&a, &room).await.len(), 4, "sent once, for good");
}

async fn a_sender_that_stopped_between_claim_and_send_is_taken_over_once_its_claim_lapses(backend: Backend) {
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    let id = schedule_text(&app, "alice", &room, "after the crash", &clock.at(10)).await;
    clock.advance_s(10);
    // A sender on the same store that claims the item and stops there.
    let crashed = backend.chat().await.with_time(Arc::new(FileClock::new(&clock.path)));
    let room_id = tabletalk::ids::RoomId::parse(&room).unwrap();
    let alice = tabletalk::ids::UserId::parse("alice").unwrap();
    assert!(crashed.scheduler.claim_due_item(&room_id, &alice, &id).await.unwrap());
    drop(crashed);
    assert_eq!(status_of(&app, "alice", &room, &id).await["status"], "sending");

    app.run_timer("sendScheduled").await;
    assert!(
        texts(&app, &room).await.is_empty(),
        "the claim holds while its sender may be at it"
    );
    clock.advance_s(60);
    app.run_timer("sendScheduled").await;
    app.run_timer("sendScheduled").await;
    assert_eq!(texts(&app, &room).await, ["after the crash"]);
    let item = status_of(&app, "alice", &room, &id).await;
    assert_eq!(
        (item["status"].as_str(), item["attempts"].as_u64()),
        (Some("sent"), Some(2))
    );
}

async fn each_refusal_at_send_time_is_recorded_in_the_items_status(backend: Backend) {
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    let quiet = app.create_room("alice").await;
    let mut items = Vec::new();
    for (user, target) in [("carol", &room), ("dave", &room), ("erin", &room), ("frank", &quiet)] {
        app.join(user, target).await;
        items.push((
            user,
            target.clone(),
            schedule_text(&app, user, target, "hello", &clock.at(30)).await,
        ));
    }
    app.call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("carol"), None)
        .await;
    let ban = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/dave/ban"),
            json!({}),
        )
        .await;
    assert!(ban.status.is_success(), "{}", ban.body);
    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let timeout = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/erin/timeout"),
            json!({ "until": until }),
        )
        .await;
    assert!(timeout.status.is_success(), "{}", timeout.body);
    let read_only = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{quiet}"),
            json!({ "readOnly": true }),
        )
        .await;
    assert_status(&read_only, StatusCode::OK);

    clock.advance_s(30);
    app.run_timer("sendScheduled").await;
    assert!(texts(&app, &room).await.is_empty() && texts(&app, &quiet).await.is_empty());
    let expected = [
        ("carol", "NOT_FOUND", "not found"),
        ("dave", "FORBIDDEN", "banned"),
        ("erin", "FORBIDDEN", "timed out"),
        ("frank", "FORBIDDEN", "read-only"),
    ];
    for ((user, target, id), (_, code, why)) in items.iter().zip(expected) {
        // Who left or was banned can no longer read the room's list; the owner's moderators
        // see nothing of it either, so it is read from the store.
        let item = match *user {
            "erin" | "frank" => status_of(&app, user, target, id).await,
            _ => stored_item(&backend, target, user, id).await,
        };
        assert_eq!(item["status"], "refused", "{user}: {item}");
        assert_eq!(item["refusal"]["code"], code, "{user}: {item}");
        let message = item["refusal"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{user}: {message}");
    }
}

/// An item as stored, for a member who can no longer list the room's items.
async fn stored_item(backend: &Backend, room: &str, user: &str, id: &str) -> Value {
    let chat = backend.chat().await;
    let room = tabletalk::ids::RoomId::parse(room).unwrap();
    let user = tabletalk::ids::UserId::parse(user).unwrap();
    let item = chat
        .scheduler
        .scheduled_item(&room, &user, id)
        .await
        .unwrap()
        .expect("stored");
    serde_json::to_value(item).unwrap()
}

async fn edit_and_cancel_change_what_is_sent_and_only_while_waiting(backend: Backend) {
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let moved = schedule_text(&app, "alice", &room, "draft", &clock.at(60)).await;
    let dropped = schedule_text(&app, "alice", &room, "never", &clock.at(60)).await;
    let path = |id: &str| format!("/rooms/{room}/scheduled/{id}");
    let edited = app
        .act(
            Method::PATCH,
            "alice",
            &path(&moved),
            json!({ "text": "final", "sendAt": clock.at(120) }),
        )
        .await;
    assert_status(&edited, StatusCode::OK);
    assert_eq!(edited.body["text"], "final");
    let cancelled = app
        .call(
            Method::DELETE,
            &format!("/api/{}", &path(&dropped)[1..]),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&cancelled, StatusCode::OK);
    assert_eq!(cancelled.body["status"], "cancelled");

    // Another member sees none of alice's items and cannot touch them.
    assert!(mine(&app, "bob", &room).await.is_empty());
    app.act(Method::PATCH, "bob", &path(&moved), json!({ "text": "mine" }))
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::DELETE, &format!("/api{}", path(&moved)), Some("bob"), None)
        .await
        .assert_error(404, "NOT_FOUND");

    clock.advance_s(60);
    app.run_timer("sendScheduled").await;
    assert!(
        texts(&app, &room).await.is_empty(),
        "moved later, and the other cancelled"
    );
    clock.advance_s(60);
    app.run_timer("sendScheduled").await;
    assert_eq!(texts(&app, &room).await, ["final"]);
    assert_eq!(posts(app.read_all("alice", &room, "asc", 100).await).len(), 1);
    app.act(Method::PATCH, "alice", &path(&moved), json!({ "text": "too late" }))
        .await
        .assert_error(409, "CONFLICT");
    app.call(Method::DELETE, &format!("/api{}", path(&moved)), Some("alice"), None)
        .await
        .assert_error(409, "CONFLICT");
    app.call(Method::DELETE, &format!("/api{}", path(&dropped)), Some("alice"), None)
        .await
        .assert_error(409, "CONFLICT");
    let listed = mine(&app, "alice", &room).await;
    let statuses: Vec<&str> = listed.iter().map(|i| i["status"].as_str().unwrap()).collect();
    assert_eq!(listed.len(), 2);
    assert!(
        statuses.contains(&"sent") && statuses.contains(&"cancelled"),
        "{statuses:?}"
    );
}

async fn the_self_hosted_housekeeping_loop_sends_what_is_due(backend: Backend) {
    let mut clock = TestClock::new();
    let app = clock.spawn(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "1")]);
    let room = app.create_room("alice").await;
    let id = schedule_text(&app, "alice", &room, "by the loop", &clock.at(120)).await;
    clock.advance_s(120);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while status_of(&app, "alice", &room, &id).await["status"] != "sent" {
        assert!(std::time::Instant::now() < deadline, "the loop never sent it");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(texts(&app, &room).await, ["by the loop"]);
}

async fn bad_input_on_the_scheduled_routes_is_a_documented_4xx(backend: Backend) {
    let clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    let later = clock.at(60);
    let poll = json!({ "question": "q", "options": ["a", "b"] });
    for body in [
        json!({ "text": "x" }),
        json!({ "text": "x", "sendAt": clock.at(-1) }),
        json!({ "text": "x", "sendAt": clock.at(0) }),
        json!({ "text": "x", "sendAt": clock.at(367 * 86_400) }),
        json!({ "text": "x", "sendAt": "tomorrow" }),
        json!({ "text": "x", "sendAt": 12 }),
        json!({ "sendAt": later }),
        json!({ "text": "x", "poll": poll, "sendAt": later }),
        json!({ "text": "<script>x</script>", "sendAt": later }),
        json!({ "text": "x".repeat(20_000), "sendAt": later }),
        json!({ "poll": { "question": "q", "options": ["a"] }, "sendAt": later }),
        json!({ "text": "x", "sendAt": later, "extra": true }),
        json!({ "text": "x", "sendAt": later, "attachments": "x" }),
        json!({ "text": "x", "sendAt": later, "attachments": [7] }),
        json!({ "text": "x", "sendAt": later, "attachments": ["a".repeat(32), "a".repeat(32)] }),
        json!({ "text": "x", "sendAt": later, "attachments": vec!["a".repeat(32); 11] }),
    ] {
        schedule(&app, "alice", &room, body.clone())
            .await
            .assert_error(422, "VALIDATION");
    }
    schedule(&app, "mallory", &room, json!({ "text": "x", "sendAt": later }))
        .await
        .assert_error(404, "NOT_FOUND");
    schedule(&app, "alice", "not-a-room", json!({ "text": "x", "sendAt": later }))
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(
        Method::GET,
        &format!("/api/rooms/{room}/scheduled"),
        Some("mallory"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    let id = schedule_text(&app, "alice", &room, "x", &later).await;
    let path = format!("/rooms/{room}/scheduled/{id}");
    for body in [
        json!({ "sendAt": clock.at(-60) }),
        json!({ "text": "" }),
        json!({ "text": "x", "poll": poll }),
        json!({ "nope": 1 }),
        json!({ "attachments": [] }),
    ] {
        app.act(Method::PATCH, "alice", &path, body)
            .await
            .assert_error(422, "VALIDATION");
    }
    app.act(
        Method::PATCH,
        "alice",
        &format!("/rooms/{room}/scheduled/nothing"),
        json!({ "text": "y" }),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.call(
        Method::DELETE,
        &format!("/api/rooms/{room}/scheduled/nothing"),
        Some("alice"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    for bad in ["a%2Fb", "a%23b", "%3F", "x%09y", &"0".repeat(32)] {
        let path = format!("/rooms/{room}/scheduled/{bad}");
        app.act(Method::PATCH, "alice", &path, json!({ "text": "y" }))
            .await
            .assert_error(404, "NOT_FOUND");
        app.call(Method::DELETE, &format!("/api{path}"), Some("alice"), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    let raw = app
        .http
        .post(format!("{}/api/rooms/{room}/scheduled", app.base))
        .bearer_auth(crate::helpers::token_with("alice", DEVELOPMENT_JWT_SECRET, 60))
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 400);
    app.call(Method::GET, &format!("/api/rooms/{room}/scheduled"), None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(mine(&app, "alice", &room).await.len(), 1);
}

async fn a_refused_item_is_told_to_its_owner_by_a_live_notice(backend: Backend) {
    let mut clock = TestClock::new();
    let app = clock.spawn(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "1")]);
    let room = app.create_room("alice").await;
    app.join("frank", &room).await;
    let id = schedule_text(&app, "frank", &room, "into the void", &clock.at(60)).await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("frank"), None).await;
    assert_status(&negotiated, StatusCode::OK);
    let mut socket = crate::live::connect(negotiated.body["url"].as_str().unwrap()).await;
    let read_only = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}"),
            json!({ "readOnly": true }),
        )
        .await;
    assert_status(&read_only, StatusCode::OK);
    clock.advance_s(60);
    let notice = loop {
        let frame = crate::live::next_frame(&mut socket).await;
        if frame["data"]["type"] == "scheduled.refused" {
            break frame;
        }
    };
    assert_eq!(notice["from"], "server");
    assert_eq!(notice["data"]["roomId"], room.as_str());
    let item = &notice["data"]["scheduled"];
    assert_eq!(
        (item["id"].as_str(), item["status"].as_str()),
        (Some(id.as_str()), Some("refused"))
    );
    assert_eq!(item["refusal"]["code"], "FORBIDDEN");
    assert_eq!(status_of(&app, "frank", &room, &id).await["status"], "refused");
}

/// The message a sent item became, as alice reads it.
async fn sent_message(app: &TestApp, room: &str, item: &Value) -> Value {
    assert_eq!(item["status"], "sent", "{item}");
    let id = item["messageId"].as_str().unwrap();
    let reply = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body
}

async fn a_scheduled_messages_attachments_are_checked_when_scheduled_held_for_it_and_sent_with_it(backend: Backend) {
    use crate::attachments::{declare, png, send_with, uploaded};
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let photo = uploaded(&app, "alice", &room, "photo.png", "image/png", &png(100)).await;
    let body = |ids: Value| json!({ "text": "see attached", "attachments": ids, "sendAt": clock.at(60) });
    let item = schedule(&app, "alice", &room, body(json!([photo]))).await;
    assert_status(&item, StatusCode::CREATED);
    assert_eq!(item.body["attachments"], json!([photo]));
    let id = item.body["id"].as_str().unwrap().to_owned();

    // Held for the item: no message and no other item can take it meanwhile.
    send_with(&app, "alice", &room, &[&photo])
        .await
        .assert_error(409, "CONFLICT");
    schedule(&app, "alice", &room, body(json!([photo])))
        .await
        .assert_error(409, "CONFLICT");
    // Checked as a send checks them: uploaded, by the caller, in this room.
    let declared = declare(&app, "alice", &room, "never.png", "image/png", 10).await;
    let never = declared.body["attachment"]["id"].as_str().unwrap().to_owned();
    let bobs = uploaded(&app, "bob", &room, "bob.png", "image/png", &png(10)).await;
    let elsewhere = app.create_room("alice").await;
    let foreign = uploaded(&app, "alice", &elsewhere, "x.png", "image/png", &png(10)).await;
    for refused in [&never, &bobs, &foreign, &"0".repeat(32)] {
        schedule(&app, "alice", &room, body(json!([refused])))
            .await
            .assert_error(404, "NOT_FOUND");
    }
    assert_eq!(
        mine(&app, "alice", &room).await.len(),
        1,
        "{backend:?}: nothing else scheduled"
    );

    clock.advance_s(60);
    app.run_timer("sendScheduled").await;
    let message = sent_message(&app, &room, &status_of(&app, "alice", &room, &id).await).await;
    assert_eq!(message["text"], "see attached");
    let files = message["attachments"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{message}");
    assert_eq!(
        (files[0]["id"].as_str(), files[0]["name"].as_str()),
        (Some(photo.as_str()), Some("photo.png"))
    );
    send_with(&app, "alice", &room, &[&photo])
        .await
        .assert_error(409, "CONFLICT");
}

async fn a_file_gone_by_its_time_refuses_the_item_and_a_refused_or_cancelled_item_frees_its_files(backend: Backend) {
    use crate::attachments::{objects_under, png, send_with, uploaded};
    use tabletalk::adapters::objects::ObjectKey;
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    let kept = uploaded(&app, "alice", &room, "kept.png", "image/png", &png(10)).await;
    let gone = uploaded(&app, "alice", &room, "gone.png", "image/png", &png(10)).await;
    let later = uploaded(&app, "alice", &room, "later.png", "image/png", &png(10)).await;
    let refused = schedule(
        &app,
        "alice",
        &room,
        json!({ "text": "two files", "attachments": [kept, gone], "sendAt": clock.at(60) }),
    )
    .await;
    assert_status(&refused, StatusCode::CREATED);
    let cancelled = schedule(
        &app,
        "alice",
        &room,
        json!({ "text": "one file", "attachments": [later], "sendAt": clock.at(60) }),
    )
    .await;
    assert_status(&cancelled, StatusCode::CREATED);
    let cancelled_id = cancelled.body["id"].as_str().unwrap();
    let cancel = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/scheduled/{cancelled_id}"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&cancel, StatusCode::OK);
    assert_status(&send_with(&app, "alice", &room, &[&later]).await, StatusCode::CREATED);

    // The file goes from the store before the item's time: its send checks again.
    let objects = backend.objects().await;
    for key in objects_under(&backend, &format!("{room}/")).await {
        if key.contains(&gone) {
            objects.delete(&ObjectKey::parse(&key).unwrap()).await.unwrap();
        }
    }
    clock.advance_s(60);
    app.run_timer("sendScheduled").await;
    let item = status_of(&app, "alice", &room, refused.body["id"].as_str().unwrap()).await;
    assert_eq!(item["status"], "refused", "{backend:?}: {item}");
    assert_eq!(item["refusal"]["code"], "NOT_FOUND", "{item}");
    assert!(!texts(&app, &room).await.contains(&"two files".to_owned()));
    // The refused item let go of the file it still held.
    assert_status(&send_with(&app, "alice", &room, &[&kept]).await, StatusCode::CREATED);
}

/// Housekeeping removes uploads left unattached for a day; one held for an item due in two
/// days is attached to it, so it stays and is sent with it.
async fn a_file_held_for_a_scheduled_message_outlives_the_expiry_of_unattached_uploads(backend: Backend) {
    use crate::attachments::{objects_under, png, uploaded};
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    let held = uploaded(&app, "alice", &room, "held.png", "image/png", &png(10)).await;
    let two_days = 2 * 86_400;
    let item = schedule(
        &app,
        "alice",
        &room,
        json!({ "text": "in two days", "attachments": [held], "sendAt": clock.at(two_days) }),
    )
    .await;
    assert_status(&item, StatusCode::CREATED);
    let chat = backend.chat().await;
    let report = chat
        .housekeeping(chrono::Utc::now() + chrono::Duration::hours(25))
        .await
        .unwrap();
    assert_eq!(report.uploads_expired, 0, "{backend:?}: {report:?}");
    assert_eq!(objects_under(&backend, &format!("{room}/")).await.len(), 1);
    clock.advance_s(two_days);
    app.run_timer("sendScheduled").await;
    let message = sent_message(
        &app,
        &room,
        &status_of(&app, "alice", &room, item.body["id"].as_str().unwrap()).await,
    )
    .await;
    assert_eq!(message["attachments"][0]["id"], held.as_str(), "{message}");
}
