//! Replies and threads: a reply joins its root's thread, and a thread lists its live replies,
//! oldest first, in pages that return each once.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::messages::{assert_status, at, delete_message, edit, get_message, ids, pin, reply};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    replies_join_the_thread_of_their_root,
    a_thread_lists_live_replies_oldest_first_without_pin_lines,
    thread_pages_return_every_reply_once,
    a_root_carries_its_reply_count_last_reply_time_and_participants,
    replies_sent_at_once_are_all_counted_on_the_root,
);

async fn replies_join_the_thread_of_their_root(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let root = app.post("alice", &room, "root").await;
    let first = reply(&app, "bob", &room, &root, "first").await;
    assert_eq!((&first["replyTo"], &first["threadId"]), (&json!(root), &json!(root)));
    let nested = reply(&app, "alice", &room, first["id"].as_str().unwrap(), "nested").await;
    assert_eq!(nested["replyTo"], first["id"]);
    assert_eq!(
        nested["threadId"],
        root.as_str(),
        "a reply to a reply joins the root's thread"
    );
}

async fn a_thread_lists_live_replies_oldest_first_without_pin_lines(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let root = app.post("alice", &room, "root").await;
    let first = reply(&app, "bob", &room, &root, "first").await["id"].clone();
    let doomed = reply(&app, "bob", &room, &root, "doomed").await["id"].clone();
    let nested = reply(&app, "alice", &room, first.as_str().unwrap(), "nested").await["id"].clone();
    assert_status(&pin(&app, Method::POST, "alice", &room, &root).await, StatusCode::OK);
    let deleted = delete_message(&app, "bob", &room, doomed.as_str().unwrap()).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);

    let thread = app
        .call(Method::GET, &at(&room, &root, "/thread"), Some("bob"), None)
        .await;
    assert_status(&thread, StatusCode::OK);
    assert_eq!(thread.body["root"]["id"], root.as_str());
    assert_eq!(thread.body["root"]["isPinned"], true);
    let replies = thread.body["replies"].as_array().unwrap();
    assert_eq!(ids(replies), [first, nested].map(|v| v.as_str().unwrap().to_owned()));
    assert_eq!(thread.body["hasMore"], false);
}

async fn thread_pages_return_every_reply_once(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let root = app.post("alice", &room, "root").await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(
            reply(&app, "alice", &room, &root, &format!("reply {i}")).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let path = at(&room, &root, &format!("/thread?limit=2&cursor={cursor}"));
        let page = app.call(Method::GET, &path, Some("alice"), None).await;
        assert_status(&page, StatusCode::OK);
        let replies = page.body["replies"].as_array().unwrap();
        assert!(replies.len() <= 2);
        seen.extend(ids(replies));
        if page.body["hasMore"] != true {
            break;
        }
        cursor = page.body["nextCursor"]
            .as_str()
            .expect("a cursor while hasMore")
            .to_owned();
    }
    assert_eq!(seen, sent, "{backend:?}: each reply once, oldest first");
}

async fn a_root_carries_its_reply_count_last_reply_time_and_participants(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    let root = app.post("alice", &room, "root").await;
    let fresh = get_message(&app, "alice", &room, &root).await;
    assert!(
        fresh.body.get("thread").is_none(),
        "no replies, no summary: {}",
        fresh.body
    );
    let first = reply(&app, "bob", &room, &root, "first").await;
    reply(&app, "carol", &room, &root, "second").await;
    // A reply to a reply counts on the root; a pin and an edit of the root keep the summary.
    let last = reply(&app, "bob", &room, first["id"].as_str().unwrap(), "nested").await;
    assert_status(&pin(&app, Method::POST, "alice", &room, &root).await, StatusCode::OK);
    assert_status(&edit(&app, "alice", &room, &root, "root, edited").await, StatusCode::OK);

    let read = get_message(&app, "carol", &room, &root).await;
    let thread = &read.body["thread"];
    assert_eq!(thread["replyCount"], 3, "{}", read.body);
    assert_eq!(thread["lastReplyAt"], last["createdAt"]);
    assert_eq!(thread["participants"], json!(["bob", "carol"]));
    assert_eq!(read.body["text"], "root, edited");
    // The summary reads the same in a page and in the thread.
    let page = app.read_all("carol", &room, "desc", 50).await;
    let listed = page.iter().find(|m| m["id"] == root.as_str()).unwrap();
    assert_eq!(&listed["thread"], thread);
    let whole = app
        .call(Method::GET, &at(&room, &root, "/thread"), Some("bob"), None)
        .await;
    assert_eq!(&whole.body["root"]["thread"], thread);
}

async fn replies_sent_at_once_are_all_counted_on_the_root(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let users: Vec<String> = (0..12).map(|i| format!("user{i}")).collect();
    for user in &users {
        app.join(user, &room).await;
    }
    let root = app.post("alice", &room, "root").await;
    let replies = users.iter().map(|user| {
        let (app, room, root) = (&app, &room, &root);
        async move { reply(app, user, room, root, "me too").await }
    });
    let sent = futures::future::join_all(replies).await;
    let read = get_message(&app, "alice", &room, &root).await;
    let thread = &read.body["thread"];
    assert_eq!(thread["replyCount"], 12, "no reply lost to a race: {}", read.body);
    let newest = sent.iter().map(|r| r["createdAt"].as_str().unwrap().to_owned()).max();
    assert_eq!(thread["lastReplyAt"].as_str().map(str::to_owned), newest);
    let mut participants: Vec<String> = serde_json::from_value(thread["participants"].clone()).unwrap();
    participants.sort();
    let mut expected = users.clone();
    expected.sort();
    assert_eq!(participants, expected);
}
