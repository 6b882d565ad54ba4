//! Search: `GET /api/search` finds the messages of the caller's rooms that answer a query,
//! newest first, through the word index every producer writes in the message's own
//! transaction; the same answers on both stores.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, create_message, forward};
use crate::helpers::{Backend, Reply, TestApp, TestClock, backend_tests, spawn_app};

backend_tests!(
    each_query_form_finds_what_it_says,
    search_sees_only_the_rooms_the_caller_is_a_member_of_now,
    edits_deletes_and_forwards_are_reflected,
    webhook_scheduled_and_poll_messages_are_found,
    retention_and_erasure_take_messages_out_of_the_index,
    a_message_with_500_distinct_words_is_found_by_its_last_word,
    accents_case_and_unspaced_scripts_are_found,
    results_page_newest_first_across_rooms_without_repeats,
    search_answers_bad_input_with_its_documented_errors,
);

async fn search(app: &TestApp, user: &str, q: &str) -> Reply {
    search_with(app, user, &[("q", q)]).await
}

async fn search_with(app: &TestApp, user: &str, params: &[(&str, &str)]) -> Reply {
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect();
    app.call(
        Method::GET,
        &format!("/api/search?{}", query.join("&")),
        Some(user),
        None,
    )
    .await
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The ids a search finds, newest first (one page of up to 50).
async fn found(app: &TestApp, user: &str, q: &str) -> Vec<String> {
    let reply = search_with(app, user, &[("q", q), ("limit", "50")]).await;
    assert_status(&reply, StatusCode::OK);
    ids(&reply.body)
}

fn ids(page: &Value) -> Vec<String> {
    page["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message"]["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn private_room(app: &TestApp, owner: &str) -> String {
    let reply = app
        .act(
            Method::POST,
            owner,
            "/rooms",
            json!({ "name": "secret plans", "visibility": "private" }),
        )
        .await;
    assert_status(&reply, StatusCode::CREATED);
    reply.body["id"].as_str().unwrap().to_owned()
}

async fn each_query_form_finds_what_it_says(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let deploy = app.post("alice", &room, "The deployment is on Friday").await;
    let notes = app.post("bob", &room, "Release notes for the deployment, draft").await;
    let link = app
        .post(
            "alice",
            &room,
            r#"deployment agenda: <a href="https://docs.example.com/a">the agenda</a>"#,
        )
        .await;
    let reply_body = json!({ "text": "deployment went fine", "replyTo": deploy });
    let reply = create_message(&app, "bob", &room, reply_body).await;
    assert_status(&reply, StatusCode::CREATED);
    let reply = reply.body["id"].as_str().unwrap().to_owned();
    let pin = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/messages/{notes}/pin"),
            json!({}),
        )
        .await;
    assert!(pin.status.is_success(), "{}", pin.body);

    // Every word, as a prefix, newest first.
    assert_eq!(
        found(&app, "alice", "deplo").await,
        [reply.clone(), link.clone(), notes.clone(), deploy.clone()]
    );
    assert_eq!(found(&app, "alice", "deployment friday").await, [deploy.clone()]);
    assert_eq!(found(&app, "alice", "\"release notes\"").await, [notes.clone()]);
    assert!(found(&app, "alice", "\"notes release\"").await.is_empty());
    assert_eq!(
        found(&app, "alice", "deployment -draft -agenda -fine").await,
        [deploy.clone()]
    );
    assert_eq!(
        found(&app, "alice", "deployment from:bob").await,
        [reply.clone(), notes.clone()]
    );
    assert_eq!(found(&app, "alice", &format!("deployment in:{room}")).await.len(), 4);
    assert_eq!(found(&app, "alice", "deployment has:link").await, [link.clone()]);
    assert_eq!(
        found(&app, "alice", "docs.example.com").await,
        [link.clone()],
        "a link by its host"
    );
    assert_eq!(found(&app, "alice", "deployment is:pinned").await, [notes.clone()]);
    assert_eq!(found(&app, "alice", "deployment is:thread").await, [reply.clone()]);
    assert!(found(&app, "alice", "deployment before:2000-01-01").await.is_empty());
    assert_eq!(found(&app, "alice", "deployment after:2000-01-01").await.len(), 4);
    let uploaded = upload_and_send(&app, "alice", &room, "deployment diagram").await;
    assert_eq!(found(&app, "alice", "deployment has:file").await, [uploaded.clone()]);
    assert_eq!(
        found(&app, "alice", "diagram.png").await,
        [uploaded],
        "a file by its name"
    );

    // Highlights are the matched words as written; the room is named.
    let page = search(&app, "alice", "deplo friday").await;
    let first = &page.body["results"][0];
    assert_eq!(first["highlights"], json!(["deployment", "Friday"]));
    assert_eq!(first["roomId"], room.as_str());
    assert_eq!(first["roomName"], "general");
}

/// Uploads a small PNG and sends it with `text`; the message's id.
async fn upload_and_send(app: &TestApp, user: &str, room: &str, text: &str) -> String {
    let png = crate::attachments::png(64);
    let id = crate::attachments::uploaded(app, user, room, "diagram.png", "image/png", &png).await;
    let sent = create_message(app, user, room, json!({ "text": text, "attachments": [id] })).await;
    assert_status(&sent, StatusCode::CREATED);
    sent.body["id"].as_str().unwrap().to_owned()
}

async fn search_sees_only_the_rooms_the_caller_is_a_member_of_now(backend: Backend) {
    let app = spawn_app(&backend);
    let secret = private_room(&app, "alice").await;
    let public = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &public).await;
    }
    let hidden = app.post("alice", &secret, "the quarterly numbers").await;
    let open = app.post("alice", &public, "the quarterly party").await;
    assert_eq!(found(&app, "alice", "quarterly").await, [open.clone(), hidden.clone()]);
    // A stranger finds nothing of the private room, even naming it.
    assert_eq!(found(&app, "bob", "quarterly").await, [open.clone()]);
    assert!(found(&app, "bob", &format!("quarterly in:{secret}")).await.is_empty());
    let named = search_with(&app, "bob", &[("q", "quarterly"), ("roomId", &secret)]).await;
    assert_status(&named, StatusCode::OK);
    assert!(ids(&named.body).is_empty());
    // A member who left, one kicked and one banned find nothing of the room any more.
    app.join("dave", &public).await;
    assert_eq!(found(&app, "dave", "quarterly").await, [open.clone()]);
    let left = app
        .call(Method::POST, &format!("/api/rooms/{public}/leave"), Some("dave"), None)
        .await;
    assert!(left.status.is_success(), "{}", left.body);
    assert!(found(&app, "dave", "quarterly").await.is_empty());
    app.kick("alice", &public, "bob").await;
    assert!(found(&app, "bob", "quarterly").await.is_empty());
    let banned = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{public}/members/carol/ban"),
            json!({}),
        )
        .await;
    assert!(banned.status.is_success(), "{}", banned.body);
    assert!(found(&app, "carol", "quarterly").await.is_empty());
    // A direct conversation is found by its two people only.
    let dm = app
        .act(Method::POST, "alice", "/dms", json!({ "userId": "erin" }))
        .await;
    assert_status(&dm, StatusCode::OK);
    let dm = dm.body["id"].as_str().unwrap().to_owned();
    let whisper = app.post("erin", &dm, "quarterly gossip").await;
    assert!(found(&app, "erin", "quarterly").await.contains(&whisper));
    assert!(found(&app, "alice", "quarterly").await.contains(&whisper));
    for other in ["bob", "carol", "dave"] {
        assert!(!found(&app, other, "gossip").await.contains(&whisper), "{other}");
    }
}

async fn edits_deletes_and_forwards_are_reflected(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "meet at the lighthouse").await;
    let edited = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}/messages/{id}"),
            json!({ "text": "meet at the harbour" }),
        )
        .await;
    assert_status(&edited, StatusCode::OK);
    assert_eq!(
        found(&app, "alice", "harbour").await,
        [id.clone()],
        "found by its new text"
    );
    assert!(
        found(&app, "alice", "lighthouse").await.is_empty(),
        "and no longer by its old"
    );
    let gone = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("alice"),
            None,
        )
        .await;
    assert!(gone.status.is_success(), "{}", gone.body);
    assert!(
        found(&app, "alice", "harbour").await.is_empty(),
        "a tombstone is never found"
    );

    // A forwarded copy is found in the room it went to, its source hidden from non-members.
    let secret = private_room(&app, "alice").await;
    let other = app.create_room("alice").await;
    app.join("bob", &other).await;
    let original = app.post("alice", &secret, "the zeppelin arrives").await;
    let sent = forward(&app, "alice", &secret, &original, json!([other])).await;
    assert!(sent.status.is_success(), "{}", sent.body);
    let bob = search(&app, "bob", "zeppelin").await;
    assert_status(&bob, StatusCode::OK);
    let results = bob.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{}", bob.body);
    assert_eq!(results[0]["roomId"], other.as_str());
    assert!(
        results[0]["message"]["forwardedFrom"]["roomId"].is_null(),
        "the source room is hidden from a non-member: {}",
        bob.body
    );
    assert_eq!(
        found(&app, "alice", "zeppelin").await.len(),
        2,
        "the original and the copy"
    );
}

async fn webhook_scheduled_and_poll_messages_are_found(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let hook = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/webhooks"),
            json!({ "name": "CI" }),
        )
        .await;
    assert_status(&hook, StatusCode::CREATED);
    let url = hook.body["url"].as_str().unwrap();
    let posted = app
        .http
        .post(format!("{}{url}", app.base))
        .json(&json!({ "text": "build pipeline finished" }))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::CREATED);
    assert_eq!(found(&app, "alice", "pipeline").await.len(), 1, "a webhook's message");

    let poll = json!({ "type": "Poll", "poll": { "question": "which venue?", "options": ["observatory", "museum"] } });
    let poll = create_message(&app, "alice", &room, poll).await;
    assert_status(&poll, StatusCode::CREATED);
    assert_eq!(
        found(&app, "alice", "observatory").await.len(),
        1,
        "a poll by its options"
    );

    // A scheduled message, sent by the timer once its time comes.
    let mut clock = TestClock::new();
    let timed = clock.spawn(&backend, &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")]);
    let body = json!({ "text": "planetarium tickets", "sendAt": clock.at(60) });
    let scheduled = timed
        .act(Method::POST, "alice", &format!("/rooms/{room}/scheduled"), body)
        .await;
    assert_status(&scheduled, StatusCode::CREATED);
    timed.run_timer("sendScheduled").await;
    assert!(found(&timed, "alice", "planetarium").await.is_empty(), "not sent yet");
    clock.advance_s(60);
    timed.run_timer("sendScheduled").await;
    assert_eq!(
        found(&timed, "alice", "planetarium").await.len(),
        1,
        "a scheduled message"
    );
}

async fn retention_and_erasure_take_messages_out_of_the_index(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("erin", &room).await;
    let old = app.post("alice", &room, "ancient walrus").await;
    let erins = app.post("erin", &room, "walrus sighting").await;
    assert_eq!(found(&app, "alice", "walrus").await, [erins.clone(), old.clone()]);

    // Erin's erasure takes her message out.
    let started = app.call(Method::POST, "/api/me/erase", Some("erin"), None).await;
    assert!(started.status.is_success(), "{}", started.body);
    let deadline = Instant::now() + Duration::from_secs(60);
    while found(&app, "alice", "sighting").await.contains(&erins) {
        assert!(Instant::now() < deadline, "erin's message stayed findable");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(found(&app, "alice", "walrus").await, [old.clone()]);

    // A retention purge takes the old one out, with its index rows.
    let set = json!({ "retentionSeconds": 3600 });
    assert_status(
        &app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), set).await,
        StatusCode::OK,
    );
    let chat = backend.chat().await;
    let report = chat
        .housekeeping(chrono::Utc::now() + chrono::Duration::hours(2))
        .await
        .unwrap();
    assert!(report.messages_purged >= 1, "{report:?}");
    assert!(found(&app, "alice", "walrus").await.is_empty());
    let rows = chat
        .store()
        .tables()
        .query_up_to(
            &chat.store().schema().messages,
            &tabletalk::storage::RangeQuery::prefix(room.as_str(), "w:wal ", 100),
            100,
        )
        .await
        .unwrap()
        .0;
    assert!(rows.is_empty(), "the purge took the index rows along: {rows:?}");
    // And the text rows of a store that indexes them itself.
    let text_rows = chat
        .store()
        .tables()
        .query_up_to(
            &chat.store().schema().messages,
            &tabletalk::storage::RangeQuery::prefix(room.as_str(), tabletalk::storage::text::ROW_PREFIX, 100),
            100,
        )
        .await
        .unwrap()
        .0;
    let words = |row: &tabletalk::storage::Entity| row.str(tabletalk::storage::text::WORDS).unwrap_or("").to_owned();
    assert!(
        !text_rows.iter().any(|row| words(row).split(' ').any(|w| w == "wal")),
        "the purge took the text row along: {text_rows:?}"
    );
}

/// The `i`th of 500 words whose first three letters differ (`aaaxq`, `aabxq`, …), so each
/// has an index row of its own: more than one transaction holds.
fn word(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{}{}{}xq", letter(i / 676), letter(i / 26), letter(i))
}

fn long_text() -> String {
    (0..500).map(word).collect::<Vec<_>>().join(" ")
}

async fn a_message_with_500_distinct_words_is_found_by_its_last_word(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, &long_text()).await;
    assert_eq!(found(&app, "alice", &word(499)).await, [id.clone()]);
    assert_eq!(
        found(&app, "alice", &format!("{} {}", word(0), word(250))).await,
        [id.clone()]
    );
    // Edited to a short text: the many rows are emptied and nothing finds the old words.
    let edited = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}/messages/{id}"),
            json!({ "text": "short now" }),
        )
        .await;
    assert_status(&edited, StatusCode::OK);
    assert!(found(&app, "alice", &word(499)).await.is_empty());
    assert_eq!(found(&app, "alice", "short").await, [id]);
}

async fn accents_case_and_unspaced_scripts_are_found(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let cafe = app.post("alice", &room, "Rendez-vous au CAFÉ crème").await;
    let chinese = app.post("alice", &room, "我们明天开会").await;
    let japanese = app.post("alice", &room, "東京で会議があります").await;
    assert_eq!(found(&app, "alice", "cafe").await, [cafe.clone()]);
    assert_eq!(found(&app, "alice", "Café CRÈME").await, [cafe.clone()]);
    assert_eq!(found(&app, "alice", "明天开会").await, [chinese.clone()]);
    assert_eq!(found(&app, "alice", "明天").await, [chinese.clone()]);
    assert_eq!(found(&app, "alice", "会議").await, [japanese.clone()]);
    assert!(found(&app, "alice", "天明").await.is_empty());
    let page = search(&app, "alice", "cafe").await;
    assert_eq!(page.body["results"][0]["highlights"], json!(["CAFÉ"]));
}

async fn results_page_newest_first_across_rooms_without_repeats(backend: Backend) {
    let app = spawn_app(&backend);
    let rooms = [
        app.create_room("alice").await,
        app.create_room("alice").await,
        app.create_room("alice").await,
    ];
    let mut sent = Vec::new();
    // More per room than a page's first round reads (25 rows a word), so rounds and pages
    // go on from where each room stopped; rooms take turns unevenly.
    for i in 0..100 {
        let room = &rooms[if i % 5 == 0 { 0 } else { 1 + i % 2 }];
        sent.push(app.post("alice", room, &format!("kumquat number {i}")).await);
    }
    sent.reverse();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..50 {
        let mut params = vec![("q", "kumquat num".to_owned()), ("limit", "7".to_owned())];
        if let Some(c) = &cursor {
            params.push(("cursor", c.clone()));
        }
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let page = search_with(&app, "alice", &params).await;
        assert_status(&page, StatusCode::OK);
        assert!(page.body["results"].as_array().unwrap().len() <= 7);
        seen.extend(ids(&page.body));
        if page.body["hasMore"] != true {
            break;
        }
        cursor = Some(page.body["nextCursor"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen, sent, "every message once, newest first");
}

async fn search_answers_bad_input_with_its_documented_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for (params, code) in [
        (vec![], "BAD_REQUEST"),
        (vec![("q", "")], "BAD_REQUEST"),
        (vec![("q", "from:alice")], "BAD_REQUEST"),
        (vec![("q", "x has:cats")], "BAD_REQUEST"),
        (vec![("q", "x before:tomorrow")], "BAD_REQUEST"),
        (vec![("q", "x \"open")], "BAD_REQUEST"),
        (vec![("q", "x"), ("limit", "0")], "VALIDATION"),
        (vec![("q", "x"), ("limit", "51")], "VALIDATION"),
        (vec![("q", "x"), ("limit", "many")], "BAD_REQUEST"),
        (vec![("q", "x"), ("cursor", "garbage")], "BAD_REQUEST"),
        (vec![("q", "x"), ("roomId", "not a room")], "BAD_REQUEST"),
    ] {
        let reply = search_with(&app, "alice", &params).await;
        assert!(
            reply.status.is_client_error(),
            "{params:?}: {} {}",
            reply.status,
            reply.body
        );
        assert_eq!(reply.body["code"], code, "{params:?}: {}", reply.body);
    }
    let long = "y".repeat(300);
    search(&app, "alice", &long).await.assert_error(400, "BAD_REQUEST");
    let other = app.create_room("alice").await;
    search_with(&app, "alice", &[("q", &format!("x in:{other}")), ("roomId", &room)])
        .await
        .assert_error(400, "BAD_REQUEST");
    let anonymous = app.call(Method::GET, "/api/search?q=x", None, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}
