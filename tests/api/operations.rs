//! Operations on messages once they exist: polls and votes, edits, pins racing edits, tombstone
//! deletes, reactions, replies and threads, forwards, and mentions with unread counts.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tabletalk::storage::Value as Stored;

use crate::helpers::{Backend, Reply, TestApp, backend_tests, posts, spawn_app};

backend_tests!(
    twenty_concurrent_votes_are_all_counted,
    a_vote_can_be_changed_and_withdrawn,
    polls_cannot_be_edited_and_messages_cannot_be_voted_on,
    invalid_polls_are_refused,
    the_author_edits_and_mentions_are_recomputed,
    only_the_author_or_manage_messages_may_edit,
    a_concurrent_edit_and_unpin_both_land,
    a_pin_writes_one_line_and_an_unpin_none,
    a_deleted_message_is_gone_from_reads_and_operations,
    a_tombstone_keeps_no_text,
    a_moderators_delete_is_marked_moderated,
    reactions_are_per_user_and_idempotent,
    reactions_show_in_read_pages,
    replies_join_the_thread_of_their_root,
    a_thread_lists_live_replies_oldest_first_without_pin_lines,
    thread_pages_return_every_reply_once,
    a_forward_reports_each_room_on_its_own,
    forwards_to_too_many_or_repeated_rooms_and_of_polls_are_refused,
    unread_and_mention_counts_follow_the_read_position,
    mentioning_everyone_needs_the_permission,
);

/// 👍, percent-encoded for a path segment.
const THUMBS_UP: &str = "%F0%9F%91%8D";
/// 🎉, percent-encoded.
const PARTY: &str = "%F0%9F%8E%89";

fn mention(id: &str) -> String {
    format!(r#"<span data-type="mention" data-id="{id}">@{id}</span>"#)
}

/// `/api/rooms/{room}/messages/{id}` followed by `rest`.
fn at(room: &str, id: &str, rest: &str) -> String {
    format!("/api/rooms/{room}/messages/{id}{rest}")
}

fn ids(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

fn assert_status(reply: &Reply, status: StatusCode) {
    assert_eq!(reply.status, status, "{}", reply.body);
}

async fn get_message(app: &TestApp, user: &str, room: &str, id: &str) -> Reply {
    app.call(Method::GET, &at(room, id, ""), Some(user), None).await
}

async fn edit(app: &TestApp, user: &str, room: &str, id: &str, text: &str) -> Reply {
    let body = json!({ "text": text });
    app.call(Method::PATCH, &at(room, id, ""), Some(user), Some(body)).await
}

async fn delete_message(app: &TestApp, user: &str, room: &str, id: &str) -> Reply {
    app.call(Method::DELETE, &at(room, id, ""), Some(user), None).await
}

/// POST pins, DELETE unpins.
async fn pin(app: &TestApp, method: Method, user: &str, room: &str, id: &str) -> Reply {
    app.call(method, &at(room, id, "/pin"), Some(user), None).await
}

async fn vote(app: &TestApp, user: &str, room: &str, id: &str, option: Value) -> Reply {
    let body = json!({ "optionId": option });
    app.call(Method::PUT, &at(room, id, "/vote"), Some(user), Some(body))
        .await
}

/// PUT adds the caller's reaction, DELETE removes it; `emoji` is percent-encoded.
async fn react(app: &TestApp, method: Method, user: &str, room: &str, id: &str, emoji: &str) -> Reply {
    let path = at(room, id, &format!("/reactions/{emoji}"));
    app.call(method, &path, Some(user), None).await
}

async fn forward(app: &TestApp, user: &str, room: &str, id: &str, to: Value) -> Reply {
    let body = json!({ "roomIds": to });
    app.call(Method::POST, &at(room, id, "/forward"), Some(user), Some(body))
        .await
}

async fn create_message(app: &TestApp, user: &str, room: &str, body: Value) -> Reply {
    let path = format!("/api/rooms/{room}/messages");
    app.call(Method::POST, &path, Some(user), Some(body)).await
}

async fn create_poll(app: &TestApp, user: &str, room: &str, question: &str, options: &[&str]) -> Reply {
    let body = json!({ "type": "Poll", "poll": { "question": question, "options": options } });
    create_message(app, user, room, body).await
}

/// Creates a poll and returns its id (the send must succeed).
async fn new_poll(app: &TestApp, room: &str, options: &[&str]) -> String {
    let created = create_poll(app, "alice", room, "Lunch?", options).await;
    assert_status(&created, StatusCode::CREATED);
    created.body["id"].as_str().unwrap().to_owned()
}

/// Sends a reply to `to` and returns it (the send must succeed).
async fn reply(app: &TestApp, user: &str, room: &str, to: &str, text: &str) -> Value {
    let reply = create_message(app, user, room, json!({ "text": text, "replyTo": to })).await;
    assert_status(&reply, StatusCode::CREATED);
    reply.body
}

/// Gives `user`, a member, a role with ManageMessages, as the owner alice.
async fn moderator(app: &TestApp, room: &str, user: &str) {
    app.grant("alice", room, user, &["ManageMessages"], 10).await;
}

/// `(unreadCount, mentionCount)` of `room` in `user`'s room list.
async fn unread(app: &TestApp, user: &str, room: &str) -> (u64, u64) {
    let list = app.call(Method::GET, "/api/rooms", Some(user), None).await;
    assert_status(&list, StatusCode::OK);
    let rooms = list.body.as_array().unwrap();
    let entry = rooms
        .iter()
        .find(|r| r["id"] == room)
        .unwrap_or_else(|| panic!("{room} not in {user}'s rooms: {}", list.body));
    let count = |name: &str| entry[name].as_u64().unwrap();
    (count("unreadCount"), count("mentionCount"))
}

async fn mark_read(app: &TestApp, user: &str, room: &str, body: Value) {
    let reply = app.act(Method::POST, user, &format!("/rooms/{room}/read"), body).await;
    assert_status(&reply, StatusCode::NO_CONTENT);
}

/// Votes per option id, in option order.
fn tallies(message: &Value) -> Vec<(String, u64)> {
    message["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["id"].as_str().unwrap().to_owned(), o["votes"].as_u64().unwrap()))
        .collect()
}

fn tally(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(id, n)| ((*id).to_owned(), *n)).collect()
}

// ---- Polls ----------------------------------------------------------------------------------

async fn twenty_concurrent_votes_are_all_counted(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let created = create_poll(&app, "alice", &room, "Lunch?", &["Pizza", "Sushi", "Tacos"]).await;
    assert_status(&created, StatusCode::CREATED);
    assert_eq!(tallies(&created.body), tally(&[("1", 0), ("2", 0), ("3", 0)]));
    let poll = created.body["id"].as_str().unwrap().to_owned();
    let voters: Vec<String> = (0..20).map(|i| format!("u{i}")).collect();
    for voter in &voters {
        app.join(voter, &room).await;
    }

    let mut votes = tokio::task::JoinSet::new();
    for (i, voter) in voters.iter().enumerate() {
        let (http, url, voter) = (
            app.http.clone(),
            format!("{}{}", app.base, at(&room, &poll, "/vote")),
            voter.clone(),
        );
        let option = ["1", "2", "3"][i % 3];
        votes.spawn(async move {
            let response = http
                .put(url)
                .bearer_auth(crate::helpers::token(&voter))
                .json(&json!({ "optionId": option }))
                .send()
                .await
                .unwrap();
            (voter, response.status())
        });
    }
    for (voter, status) in votes.join_all().await {
        assert_eq!(status, StatusCode::OK, "{backend:?}: {voter}'s vote");
    }

    let read = get_message(&app, "u0", &room, &poll).await;
    assert_status(&read, StatusCode::OK);
    assert_eq!(
        tallies(&read.body),
        tally(&[("1", 7), ("2", 7), ("3", 6)]),
        "{backend:?}: every vote counted once"
    );
    assert_eq!(read.body["poll"]["myVote"], "1");
    assert_eq!(read.body["poll"]["question"], "Lunch?");
    let texts: Vec<&str> = read.body["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Pizza", "Sushi", "Tacos"]);
}

async fn a_vote_can_be_changed_and_withdrawn(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let poll = new_poll(&app, &room, &["Pizza", "Sushi"]).await;
    vote(&app, "alice", &room, &poll, json!("1")).await;
    let bobs = vote(&app, "bob", &room, &poll, json!("1")).await;
    assert_eq!(tallies(&bobs.body), tally(&[("1", 2), ("2", 0)]));
    assert_eq!(bobs.body["poll"]["myVote"], "1");

    let changed = vote(&app, "bob", &room, &poll, json!("2")).await;
    assert_eq!(tallies(&changed.body), tally(&[("1", 1), ("2", 1)]));
    assert_eq!(changed.body["poll"]["myVote"], "2");

    let withdrawn = vote(&app, "bob", &room, &poll, Value::Null).await;
    assert_status(&withdrawn, StatusCode::OK);
    assert_eq!(tallies(&withdrawn.body), tally(&[("1", 1), ("2", 0)]));
    assert!(withdrawn.body["poll"].get("myVote").is_none(), "{}", withdrawn.body);
    let read = get_message(&app, "bob", &room, &poll).await;
    assert!(read.body["poll"].get("myVote").is_none(), "{}", read.body);
    assert_eq!(
        get_message(&app, "alice", &room, &poll).await.body["poll"]["myVote"],
        "1"
    );

    vote(&app, "bob", &room, &poll, json!("9"))
        .await
        .assert_error(422, "VALIDATION");
}

async fn polls_cannot_be_edited_and_messages_cannot_be_voted_on(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let poll = new_poll(&app, &room, &["Pizza", "Sushi"]).await;
    edit(&app, "alice", &room, &poll, "x")
        .await
        .assert_error(400, "BAD_REQUEST");
    let message = app.post("alice", &room, "not a poll").await;
    vote(&app, "alice", &room, &message, json!("1"))
        .await
        .assert_error(400, "BAD_REQUEST");
}

async fn invalid_polls_are_refused(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let eleven: Vec<String> = (1..=11).map(|i| format!("option {i}")).collect();
    let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
    for (question, options) in [
        ("One?", &["only"][..]),
        ("Twice?", &["same", "same"][..]),
        ("   ", &["a", "b"][..]),
        ("Eleven?", &eleven[..]),
    ] {
        create_poll(&app, "alice", &room, question, options)
            .await
            .assert_error(422, "VALIDATION");
    }
    assert!(app.read_all("alice", &room, "asc", 50).await.is_empty());
}

// ---- Edits ----------------------------------------------------------------------------------

async fn the_author_edits_and_mentions_are_recomputed(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "<p>old</p>").await;
    let text = format!("<p>new {}</p>", mention("bob"));
    let edited = edit(&app, "alice", &room, &id, &text).await;
    assert_status(&edited, StatusCode::OK);
    assert_eq!(edited.body["text"], text.as_str());
    assert!(edited.body["editedAt"].is_string(), "{}", edited.body);
    assert_eq!(edited.body["mentions"]["users"], json!(["bob"]));
    let read = get_message(&app, "bob", &room, &id).await;
    assert_eq!(read.body["text"], text.as_str());
    assert_eq!(read.body["editedAt"], edited.body["editedAt"]);
}

async fn only_the_author_or_manage_messages_may_edit(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    let id = app.post("bob", &room, "bob's").await;
    edit(&app, "carol", &room, &id, "carol's now")
        .await
        .assert_error(403, "FORBIDDEN");
    moderator(&app, &room, "carol").await;
    let edited = edit(&app, "carol", &room, &id, "moderated text").await;
    assert_status(&edited, StatusCode::OK);
    assert_eq!(edited.body["text"], "moderated text");
    assert_eq!(edited.body["authorId"], "bob", "an edit keeps the author");
}

// ---- Pins -----------------------------------------------------------------------------------

async fn a_concurrent_edit_and_unpin_both_land(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for round in 0..10 {
        let id = app.post("alice", &room, &format!("original {round}")).await;
        let pinned = pin(&app, Method::POST, "alice", &room, &id).await;
        assert_status(&pinned, StatusCode::OK);
        assert_eq!(pinned.body["isPinned"], true);
        let new_text = format!("edited {round}");
        let (edit, unpin) = tokio::join!(
            edit(&app, "alice", &room, &id, &new_text),
            pin(&app, Method::DELETE, "alice", &room, &id),
        );
        assert_status(&edit, StatusCode::OK);
        assert_status(&unpin, StatusCode::OK);
        let after = get_message(&app, "alice", &room, &id).await.body;
        assert_eq!(
            after["text"],
            new_text.as_str(),
            "{backend:?} round {round}: the edit landed"
        );
        assert_ne!(after["isPinned"], true, "{backend:?} round {round}: the unpin landed");
    }
}

async fn a_pin_writes_one_line_and_an_unpin_none(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "pin me").await;
    let pin_lines = async || -> Vec<Value> {
        app.read_all("alice", &room, "asc", 50)
            .await
            .into_iter()
            .filter(|m| m["type"] == "PinMessage")
            .collect()
    };
    assert_status(&pin(&app, Method::POST, "alice", &room, &id).await, StatusCode::OK);
    let lines = pin_lines().await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["pinnedMessageId"], id.as_str());
    assert_status(&pin(&app, Method::POST, "alice", &room, &id).await, StatusCode::OK);
    assert_eq!(pin_lines().await.len(), 1, "pinning a pinned message writes nothing");
    let unpinned = pin(&app, Method::DELETE, "alice", &room, &id).await;
    assert_status(&unpinned, StatusCode::OK);
    assert_ne!(unpinned.body["isPinned"], true);
    assert_eq!(pin_lines().await.len(), 1, "an unpin writes no line");
}

// ---- Deletes --------------------------------------------------------------------------------

async fn a_deleted_message_is_gone_from_reads_and_operations(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    let id = app.post("alice", &room, "doomed").await;
    let kept = app.post("alice", &room, "kept").await;
    assert_eq!(
        delete_message(&app, "alice", &room, &id).await.status,
        StatusCode::NO_CONTENT
    );

    get_message(&app, "alice", &room, &id)
        .await
        .assert_error(404, "NOT_FOUND");
    for order in ["asc", "desc"] {
        let listed = ids(&app.read_all("alice", &room, order, 50).await);
        assert_eq!(listed, std::slice::from_ref(&kept), "{backend:?} {order}");
    }
    edit(&app, "alice", &room, &id, "back")
        .await
        .assert_error(404, "NOT_FOUND");
    pin(&app, Method::POST, "alice", &room, &id)
        .await
        .assert_error(404, "NOT_FOUND");
    react(&app, Method::PUT, "alice", &room, &id, THUMBS_UP)
        .await
        .assert_error(404, "NOT_FOUND");
    forward(&app, "alice", &room, &id, json!([other]))
        .await
        .assert_error(404, "NOT_FOUND");
    create_message(&app, "alice", &room, json!({ "text": "re", "replyTo": id }))
        .await
        .assert_error(404, "NOT_FOUND");
    delete_message(&app, "alice", &room, &id)
        .await
        .assert_error(404, "NOT_FOUND");

    let poll = new_poll(&app, &room, &["yes", "no"]).await;
    assert_eq!(
        delete_message(&app, "alice", &room, &poll).await.status,
        StatusCode::NO_CONTENT
    );
    vote(&app, "alice", &room, &poll, json!("1"))
        .await
        .assert_error(404, "NOT_FOUND");
}

/// The raw `Messages` row of a message.
async fn raw_row(backend: &Backend, room: &str, id: &str) -> tabletalk::storage::Entity {
    let chat = backend.chat().await;
    chat.tables()
        .get(&chat.schema().messages, room, id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{backend:?}: the row of {id} is gone"))
}

async fn a_tombstone_keeps_no_text(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let secret = "launch codes 0451";
    let id = app
        .post("alice", &room, &format!("<p>{secret} {}</p>", mention("bob")))
        .await;
    assert_eq!(
        delete_message(&app, "alice", &room, &id).await.status,
        StatusCode::NO_CONTENT
    );

    let row = raw_row(&backend, &room, &id).await;
    assert!(row.datetime("deletedAt").is_some(), "{row:?}");
    assert_eq!(row.str("deletedBy"), Some("alice"));
    assert_eq!(row.str("message"), Some(""));
    assert_ne!(row.bool("moderated"), Some(true), "the author's own delete");
    for (name, value) in &row.properties {
        if let Stored::String(text) = value {
            assert!(
                !text.contains(secret),
                "{backend:?}: {name} still holds the text: {text}"
            );
            assert!(
                !text.contains("bob"),
                "{backend:?}: {name} still holds the mention: {text}"
            );
        }
    }
}

async fn a_moderators_delete_is_marked_moderated(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    let id = app.post("bob", &room, "rude").await;
    delete_message(&app, "carol", &room, &id)
        .await
        .assert_error(403, "FORBIDDEN");
    moderator(&app, &room, "carol").await;
    assert_eq!(
        delete_message(&app, "carol", &room, &id).await.status,
        StatusCode::NO_CONTENT
    );
    let row = raw_row(&backend, &room, &id).await;
    assert_eq!(row.bool("moderated"), Some(true), "{row:?}");
    assert_eq!(row.str("deletedBy"), Some("carol"));
}

// ---- Reactions ------------------------------------------------------------------------------

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

// ---- Replies and threads --------------------------------------------------------------------

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

// ---- Forwards -------------------------------------------------------------------------------

async fn a_forward_reports_each_room_on_its_own(backend: Backend) {
    let app = spawn_app(&backend);
    let mut rooms = Vec::new();
    for _ in 0..3 {
        let room = app.create_room("alice").await;
        app.join("bob", &room).await;
        rooms.push(room);
    }
    let (a, b, c) = (&rooms[0], &rooms[1], &rooms[2]);
    let read_only = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{b}"),
            json!({ "readOnly": true }),
        )
        .await;
    assert_status(&read_only, StatusCode::OK);
    let text = "<p>worth sharing</p>";
    let id = app.post("alice", a, text).await;
    let nowhere = uuid::Uuid::new_v4().to_string();

    let outcomes = forward(&app, "bob", a, &id, json!([b, c, nowhere])).await;
    assert_status(&outcomes, StatusCode::OK);
    let outcomes = outcomes.body.as_array().unwrap().clone();
    let rooms_in_order: Vec<&str> = outcomes.iter().map(|o| o["roomId"].as_str().unwrap()).collect();
    assert_eq!(rooms_in_order, [b.as_str(), c.as_str(), nowhere.as_str()]);

    assert_eq!(
        (outcomes[0]["status"].as_u64(), &outcomes[0]["error"]["code"]),
        (Some(403), &json!("FORBIDDEN"))
    );
    assert_eq!(outcomes[1]["status"], 201);
    let copy = &outcomes[1]["message"];
    assert_eq!(copy["text"], text);
    assert_eq!(copy["authorId"], "bob");
    assert_eq!(copy["forwardedFrom"], json!({ "roomId": a, "messageId": id }));
    assert_eq!(
        (outcomes[2]["status"].as_u64(), &outcomes[2]["error"]["code"]),
        (Some(404), &json!("NOT_FOUND"))
    );

    assert_eq!(
        ids(&posts(app.read_all("bob", c, "asc", 50).await)),
        [copy["id"].as_str().unwrap()]
    );
    assert!(posts(app.read_all("bob", b, "asc", 50).await).is_empty());
}

async fn forwards_to_too_many_or_repeated_rooms_and_of_polls_are_refused(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    let id = app.post("alice", &room, "share").await;
    let eleven: Vec<String> = (0..11).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    forward(&app, "alice", &room, &id, json!(eleven))
        .await
        .assert_error(422, "VALIDATION");
    forward(&app, "alice", &room, &id, json!([other, other]))
        .await
        .assert_error(422, "VALIDATION");
    let poll = new_poll(&app, &room, &["yes", "no"]).await;
    forward(&app, "alice", &room, &poll, json!([other]))
        .await
        .assert_error(400, "BAD_REQUEST");
    assert!(
        app.read_all("alice", &other, "asc", 50).await.is_empty(),
        "nothing was forwarded"
    );
}

// ---- Mentions and unread counts -------------------------------------------------------------

async fn unread_and_mention_counts_follow_the_read_position(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
    }
    mark_read(&app, "bob", &room, json!({})).await;
    let first = app.post("alice", &room, "one").await;
    app.post("alice", &room, &format!("<p>two {}</p>", mention("bob")))
        .await;
    app.post("alice", &room, "three").await;

    assert_eq!(unread(&app, "bob", &room).await, (3, 1), "{backend:?}");
    let (carol_unread, carol_mentions) = unread(&app, "carol", &room).await;
    assert!(carol_unread >= 3, "{backend:?}: carol has not read alice's three");
    assert_eq!(carol_mentions, 0);

    mark_read(&app, "bob", &room, json!({})).await;
    assert_eq!(unread(&app, "bob", &room).await, (0, 0));
    mark_read(&app, "bob", &room, json!({ "messageId": first })).await;
    assert_eq!(
        unread(&app, "bob", &room).await,
        (2, 1),
        "unread again from after the first"
    );
}

async fn mentioning_everyone_needs_the_permission(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let everyone = format!("<p>hey {}</p>", mention("@everyone"));
    let allowed = app.send("bob", &room, &everyone, None).await;
    assert_status(&allowed, StatusCode::CREATED);
    assert_eq!(allowed.body["mentions"]["everyone"], true);

    let revoked = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}"),
            json!({ "everyonePermissions": [] }),
        )
        .await;
    assert_status(&revoked, StatusCode::OK);
    app.send("bob", &room, &everyone, None)
        .await
        .assert_error(403, "FORBIDDEN");
    let plain = app.send("bob", &room, "<p>hey all</p>", None).await;
    assert_status(&plain, StatusCode::CREATED);
    let owners = app.send("alice", &room, &everyone, None).await;
    assert_status(&owners, StatusCode::CREATED);
}
