//! Finding messages: the page around a message (jump-to and permalinks), whose two cursors
//! walk the rest of the room each way, and several messages by id in one call (reply
//! previews), each answered as the single get would.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, delete_message};
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app};

backend_tests!(
    walking_both_ways_from_the_middle_visits_every_message_once,
    the_page_around_the_oldest_or_newest_message_ends_there_and_the_newer_cursor_sees_later_sends,
    the_page_around_a_deleted_or_unknown_message_is_missing_and_a_stranger_gets_404,
    a_batch_get_answers_each_id_as_the_single_get_would,
    a_stranger_batch_gets_nothing,
);

async fn around(app: &TestApp, user: &str, room: &str, id: &str, limit: usize) -> Reply {
    let path = format!("/api/rooms/{room}/messages?around={id}&limit={limit}");
    app.call(Method::GET, &path, Some(user), None).await
}

fn ids(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Follows `cursor` in `order` with `limit` while `hasMore`, and answers the ids read.
async fn walk(app: &TestApp, room: &str, order: &str, mut cursor: String, limit: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..1000 {
        let path = format!("/api/rooms/{room}/messages?order={order}&limit={limit}&cursor={cursor}");
        let page = app.call(Method::GET, &path, Some("alice"), None).await;
        assert_status(&page, StatusCode::OK);
        seen.extend(ids(&page.body["messages"]));
        if page.body["hasMore"] != true {
            return seen;
        }
        cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    }
    panic!("paging did not end");
}

/// The page around `id`, then both ways from it to the ends: oldest first, every id seen.
async fn around_and_both_ways(app: &TestApp, room: &str, id: &str, limit: usize, step: usize) -> Vec<String> {
    let page = around(app, "alice", room, id, limit).await;
    assert_status(&page, StatusCode::OK);
    let here = ids(&page.body["messages"]);
    assert!(here.len() <= limit && here.contains(&id.to_owned()), "{}", page.body);
    let mut older = if page.body["hasOlder"] == true {
        walk(
            app,
            room,
            "desc",
            page.body["olderCursor"].as_str().unwrap().into(),
            step,
        )
        .await
    } else {
        Vec::new()
    };
    let newer = if page.body["hasNewer"] == true {
        walk(
            app,
            room,
            "asc",
            page.body["newerCursor"].as_str().unwrap().into(),
            step,
        )
        .await
    } else {
        Vec::new()
    };
    older.reverse();
    older.extend(here);
    older.extend(newer);
    older
}

async fn walking_both_ways_from_the_middle_visits_every_message_once(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let mut sent = Vec::new();
    for n in 0..21 {
        sent.push(app.post("alice", &room, &format!("m{n}")).await);
    }
    // Tombstones on both sides of the middle are skipped, not counted twice or stopped at.
    for n in [4, 5, 15] {
        assert_status(
            &delete_message(&app, "alice", &room, &sent[n]).await,
            StatusCode::NO_CONTENT,
        );
    }
    let all: Vec<String> = app
        .read_all("alice", &room, "asc", 100)
        .await
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    let middle = &sent[10];
    for (limit, step) in [(5, 3), (1, 4), (2, 1), (4, 7), (100, 10), (9, 100)] {
        let walked = around_and_both_ways(&app, &room, middle, limit, step).await;
        assert_eq!(walked, all, "{backend:?}: around limit {limit}, walking by {step}");
    }
    let page = around(&app, "alice", &room, middle, 5).await.body;
    assert_eq!(
        ids(&page["messages"]),
        vec![
            sent[8].clone(),
            sent[9].clone(),
            middle.clone(),
            sent[11].clone(),
            sent[12].clone()
        ],
        "{backend:?}: two older, the message, two newer, oldest first"
    );
    assert_eq!(
        (page["hasOlder"].clone(), page["hasNewer"].clone()),
        (json!(true), json!(true))
    );
}

async fn the_page_around_the_oldest_or_newest_message_ends_there_and_the_newer_cursor_sees_later_sends(
    backend: Backend,
) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let all_before: Vec<String> = app
        .read_all("alice", &room, "asc", 100)
        .await
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    let mut sent = Vec::new();
    for n in 0..4 {
        sent.push(app.post("alice", &room, &format!("m{n}")).await);
    }
    let oldest = all_before.first().unwrap_or(&sent[0]).clone();
    let first = around(&app, "alice", &room, &oldest, 5).await;
    assert_status(&first, StatusCode::OK);
    assert_eq!(
        first.body["hasOlder"], false,
        "{backend:?}: nothing is older than the oldest"
    );
    assert_eq!(ids(&first.body["messages"])[0], oldest);
    let newest = sent.last().unwrap();
    let last = around(&app, "alice", &room, newest, 5).await;
    assert_status(&last, StatusCode::OK);
    assert_eq!(last.body["hasNewer"], false, "{backend:?}: nothing is newer yet");
    assert_eq!(ids(&last.body["messages"]).last(), Some(newest));
    let later = app.post("alice", &room, "later").await;
    let newer = walk(
        &app,
        &room,
        "asc",
        last.body["newerCursor"].as_str().unwrap().into(),
        10,
    )
    .await;
    assert_eq!(newer, vec![later], "{backend:?}: the newer cursor catches up");
}

async fn the_page_around_a_deleted_or_unknown_message_is_missing_and_a_stranger_gets_404(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let kept = app.post("alice", &room, "kept").await;
    let gone = app.post("alice", &room, "gone").await;
    assert_status(
        &delete_message(&app, "alice", &room, &gone).await,
        StatusCode::NO_CONTENT,
    );
    around(&app, "alice", &room, &gone, 5)
        .await
        .assert_error(404, "NOT_FOUND");
    around(&app, "alice", &room, "0000000000000000001", 5)
        .await
        .assert_error(404, "NOT_FOUND");
    let stranger = around(&app, "carol", &room, &kept, 5).await;
    stranger.assert_error(404, "NOT_FOUND");
    let other = around(&app, "carol", &uuid::Uuid::new_v4().to_string(), &kept, 5).await;
    assert_eq!(
        stranger.body, other.body,
        "{backend:?}: a stranger cannot tell the room exists"
    );
}

async fn batch(app: &TestApp, user: &str, room: &str, ids: Value) -> Reply {
    let path = format!("/api/rooms/{room}/messages/batch");
    app.call(Method::POST, &path, Some(user), Some(json!({ "ids": ids })))
        .await
}

async fn a_batch_get_answers_each_id_as_the_single_get_would(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let first = app.post("alice", &room, "first").await;
    let second = app.post("bob", &room, "second").await;
    let gone = app.post("alice", &room, "gone").await;
    assert_status(
        &delete_message(&app, "alice", &room, &gone).await,
        StatusCode::NO_CONTENT,
    );
    let reacted = app
        .call(
            Method::PUT,
            &format!("/api/rooms/{room}/messages/{second}/reactions/%F0%9F%91%8D"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&reacted, StatusCode::OK);
    let elsewhere = app.create_room("alice").await;
    let foreign = app.post("alice", &elsewhere, "another room's").await;
    let asked = json!([second, "abc", first, gone, second, "0000000000000000001", foreign]);
    let answer = batch(&app, "bob", &room, asked).await;
    assert_status(&answer, StatusCode::OK);
    assert_eq!(
        ids(&answer.body["messages"]),
        vec![second.clone(), first.clone()],
        "{backend:?}: in the order asked, each once"
    );
    assert_eq!(
        answer.body["missing"],
        json!(["abc", gone, "0000000000000000001", foreign]),
        "{backend:?}: what the single get answers 404 for"
    );
    for message in answer.body["messages"].as_array().unwrap() {
        let id = message["id"].as_str().unwrap();
        let single = app
            .call(
                Method::GET,
                &format!("/api/rooms/{room}/messages/{id}"),
                Some("bob"),
                None,
            )
            .await;
        assert_eq!(message, &single.body, "{backend:?}: as the single get answers it");
    }
    let full: Vec<String> = (0..100).map(|_| first.clone()).collect();
    let hundred = batch(&app, "bob", &room, json!(full)).await;
    assert_status(&hundred, StatusCode::OK);
    assert_eq!(ids(&hundred.body["messages"]), vec![first]);
}

async fn a_stranger_batch_gets_nothing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "private").await;
    let stranger = batch(&app, "carol", &room, json!([id])).await;
    stranger.assert_error(404, "NOT_FOUND");
    let other = batch(&app, "carol", &uuid::Uuid::new_v4().to_string(), json!([id])).await;
    assert_eq!(
        stranger.body, other.body,
        "{backend:?}: a stranger cannot tell the room exists"
    );
}
