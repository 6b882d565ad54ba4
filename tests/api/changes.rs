//! The change feed (`messageChanges`, docs/CATCHUP.md) and catch-up: a reader following its stored
//! cursor while writers create, edit and delete ends with the room's final state; budgets and
//! limits; every status; retention with its floor.

use std::collections::{BTreeMap, HashSet};

use futures::future::join_all;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::messages::get_message;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    a_reader_following_its_cursor_ends_with_the_rooms_final_state,
    budgets_share_1000_changes_and_never_starve_a_conversation,
    limits_are_clamped_and_edits_fold_into_one_entry,
    every_conversation_gets_its_own_status,
    retention_purges_every_row_of_expired_messages_and_raises_the_floor,
);

/// What a client cache holds of a message: its version and its state.
#[derive(Debug, Clone, PartialEq)]
struct Cached {
    version: u64,
    text: Option<String>,
}

/// A client cache of one conversation, fed only by `messageChanges`.
#[derive(Debug, Default)]
struct Cache {
    cursor: Option<String>,
    messages: BTreeMap<String, Cached>,
}

impl Cache {
    /// The catch-up algorithm of docs/CATCHUP.md: ask with the stored cursor and follow
    /// `hasMore`; apply each change as an upsert keyed by id, keeping the higher version. Checks
    /// on the way that versions only ever go forward.
    async fn catch_up(&mut self, app: &TestApp, user: &str, room: &str) {
        for _ in 0..10_000 {
            let reply = app.changes(user, &[(room, self.cursor.as_deref())], Some(7)).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            let entry = &reply.body["messageChanges"][0];
            assert_eq!(entry["status"], "OK", "{entry}");
            let mut last = self.cursor.as_deref().map_or(0, |c| cursor_version(c, room));
            for change in entry["changes"].as_array().unwrap() {
                let version = version_of(change["version"].as_str().unwrap());
                assert!(version > last, "versions go forward: {version} after {last}");
                last = version;
                let message = &change["message"];
                let id = message["id"].as_str().unwrap().to_owned();
                // A client decides from it what the author may do, as from a read's copy.
                let origin = message["origin"].as_str().unwrap_or_default();
                let written_by = if message["type"] == "Message" { "user" } else { "server" };
                assert_eq!(origin, written_by, "{change}");
                let cached = Cached {
                    version,
                    text: message["text"].as_str().map(str::to_owned),
                };
                match change["kind"].as_str().unwrap() {
                    "DELETED" => assert!(message["isDeleted"] == true && message["text"].is_null()),
                    "EDITED" => assert!(!change["editedAt"].is_null()),
                    "CREATED" => assert!(change["editedAt"].is_null()),
                    other => panic!("unknown kind {other}"),
                }
                if let Some(known) = self.messages.get(&id) {
                    assert!(
                        version > known.version,
                        "{id}: version {version} after {}",
                        known.version
                    );
                }
                self.messages.insert(id, cached);
            }
            let cursor = entry["cursor"].as_str().unwrap().to_owned();
            assert_eq!(
                cursor_version(&cursor, room),
                last,
                "the cursor is the last version returned"
            );
            self.cursor = Some(cursor);
            if entry["hasMore"] != true {
                return;
            }
        }
        panic!("the feed never ended");
    }
}

fn version_of(text: &str) -> u64 {
    text.parse().unwrap()
}

/// The version an (opaque) cursor resumes after, read as the server reads it.
fn cursor_version(text: &str, room: &str) -> u64 {
    tabletalk::messages::change_cursor::ChangeCursor::parse(text, room)
        .unwrap()
        .version
}

/// One writer's random work in a room: create, edit or delete its own messages. Returns the
/// final state of every message it created (None: deleted).
async fn write_randomly(
    app: &TestApp,
    user: &str,
    room: &str,
    seed: u64,
    steps: usize,
) -> Vec<(String, Option<String>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut mine: Vec<(String, Option<String>)> = Vec::new();
    for step in 0..steps {
        let live: Vec<usize> = (0..mine.len()).filter(|i| mine[*i].1.is_some()).collect();
        let roll = rng.random_range(0..100);
        if live.is_empty() || roll < 50 {
            let text = format!("{user} {seed} #{step}");
            let id = app.post(user, room, &text).await;
            mine.push((id, Some(text)));
        } else if roll < 70 {
            let i = live[rng.random_range(0..live.len())];
            let text = format!("{user} {seed} edit {step}");
            let reply = app
                .act(
                    Method::PATCH,
                    user,
                    &format!("/rooms/{room}/messages/{}", mine[i].0),
                    json!({ "text": text }),
                )
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            mine[i].1 = Some(text);
        } else if roll < 85 {
            // A pin or unpin rewrites the row without a new version (and a pin writes a line).
            let i = live[rng.random_range(0..live.len())];
            let method = if rng.random_bool(0.5) {
                Method::POST
            } else {
                Method::DELETE
            };
            let path = format!("/api/rooms/{room}/messages/{}/pin", mine[i].0);
            let reply = app.call(method, &path, Some(user), None).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        } else {
            let i = live[rng.random_range(0..live.len())];
            let path = format!("/api/rooms/{room}/messages/{}", mine[i].0);
            let reply = app.call(Method::DELETE, &path, Some(user), None).await;
            assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);
            mine[i].1 = None;
        }
    }
    mine
}

async fn a_reader_following_its_cursor_ends_with_the_rooms_final_state(backend: Backend) {
    // Two server processes share the store, so writers contend for the counter across
    // processes as well as inside each one.
    let apps = [spawn_app(&backend), spawn_app(&backend)];
    let rounds = 6;
    for round in 0..rounds {
        let seed = rand::random::<u32>() as u64;
        let room = apps[0].create_room("w0").await;
        let writers = ["w0", "w1", "w2", "w3"];
        for writer in &writers[1..] {
            apps[1].join(writer, &room).await;
        }
        apps[0].join("reader", &room).await;

        let done = std::sync::atomic::AtomicBool::new(false);
        let reading = async {
            let mut cache = Cache::default();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                cache.catch_up(&apps[1], "reader", &room).await;
            }
            // One more pass after the last write: the reader must now be complete.
            cache.catch_up(&apps[1], "reader", &room).await;
            cache
        };
        let writing = async {
            let writes = writers
                .iter()
                .enumerate()
                .map(|(i, writer)| write_randomly(&apps[i % 2], writer, &room, seed + i as u64, 15));
            let outcomes = join_all(writes).await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            outcomes
        };
        let (cache, outcomes) = tokio::join!(reading, writing);

        // The final state: every message the writers created, deleted or with its last text;
        // the server's join lines live.
        let mut expected: BTreeMap<String, Option<String>> = outcomes.into_iter().flatten().collect();
        let everything = apps[0].read_all("reader", &room, "asc", 100).await;
        for line in everything.iter().filter(|m| m["type"] != "Message") {
            expected.insert(
                line["id"].as_str().unwrap().to_owned(),
                line["text"].as_str().map(str::to_owned),
            );
        }
        let live: HashSet<&str> = everything.iter().map(|m| m["id"].as_str().unwrap()).collect();
        let seen: BTreeMap<String, Option<String>> = cache
            .messages
            .iter()
            .map(|(id, m)| (id.clone(), m.text.clone()))
            .collect();
        assert_eq!(
            seen, expected,
            "{backend:?} round {round} (seed {seed}): the reader's view"
        );
        let seen_live: HashSet<&str> = seen
            .iter()
            .filter(|(_, t)| t.is_some())
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(
            seen_live, live,
            "{backend:?} round {round} (seed {seed}): live messages"
        );
        // And each live message at the version the server holds now.
        for message in &everything {
            let id = message["id"].as_str().unwrap();
            assert_eq!(
                cache.messages[id].version,
                message["version"].as_u64().unwrap(),
                "{backend:?} round {round} (seed {seed}): {id}'s version"
            );
        }
    }
}

/// Sends `n` messages into `room` as `user`, 16 at a time.
async fn fill(app: &TestApp, user: &str, room: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
        let sends = chunk
            .iter()
            .map(|i| async move { app.post(user, room, &format!("m{i}")).await });
        ids.extend(join_all(sends).await);
    }
    ids
}

async fn budgets_share_1000_changes_and_never_starve_a_conversation(backend: Backend) {
    let app = spawn_app(&backend);
    let mut rooms = Vec::new();
    for _ in 0..100 {
        rooms.push(app.create_room("alice").await);
    }
    for room in &rooms {
        fill(&app, "alice", room, 49).await;
    }
    // 100 conversations × 50 changes (49 messages + nothing else: the owner's room has no
    // join line), asked with the largest limit: 10 each, 1000 in all.
    let asked: Vec<(&str, Option<&str>)> = rooms.iter().map(|r| (r.as_str(), None)).collect();
    let reply = app.changes("alice", &asked, Some(200)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let entries = reply.body["messageChanges"].as_array().unwrap();
    assert_eq!(entries.len(), 100);
    let total: usize = entries.iter().map(|e| e["changes"].as_array().unwrap().len()).sum();
    assert!(total <= 1000, "{total}");
    for (entry, room) in entries.iter().zip(&rooms) {
        assert_eq!(entry["conversationId"], room.as_str(), "request order");
        let n = entry["changes"].as_array().unwrap().len();
        assert!(n >= 1 && entry["hasMore"] == true, "{n}");
    }
}

async fn limits_are_clamped_and_edits_fold_into_one_entry(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    fill(&app, "alice", &room, 250).await;
    for (limit, expected) in [
        (Some(0), 1),
        (Some(1), 1),
        (Some(200), 200),
        (Some(201), 200),
        (None, 100),
    ] {
        let reply = app.changes("alice", &[(&room, None)], limit).await;
        let changes = reply.body["messageChanges"][0]["changes"].as_array().unwrap().len();
        assert_eq!(changes, expected, "limit {limit:?}");
    }

    // Three edits since the stored cursor: one EDITED entry, with the latest text.
    let id = app.post("alice", &room, "draft").await;
    let mut cache = Cache::default();
    cache.catch_up(&app, "alice", &room).await;
    let cursor = cache.cursor.clone();
    for text in ["one", "two", "three"] {
        let path = format!("/rooms/{room}/messages/{id}");
        app.act(Method::PATCH, "alice", &path, json!({ "text": text })).await;
    }
    let reply = app.changes("alice", &[(&room, cursor.as_deref())], None).await;
    let changes = reply.body["messageChanges"][0]["changes"].as_array().unwrap().clone();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["kind"], "EDITED");
    assert_eq!(changes[0]["message"]["text"], "three");
    assert_eq!(changes[0]["message"]["id"], id.as_str());
}

async fn every_conversation_gets_its_own_status(backend: Backend) {
    let app = spawn_app(&backend);
    let open = app.create_room("alice").await;
    let left = app.create_room("alice").await;
    let removed = app.create_room("alice").await;
    let private = app.create_room("carol").await;
    for room in [&open, &left, &removed] {
        app.join("bob", room).await;
        app.post("alice", room, "hi").await;
    }
    app.call(Method::POST, &format!("/api/rooms/{left}/leave"), Some("bob"), None)
        .await;
    app.call(
        Method::POST,
        &format!("/api/rooms/{removed}/members/bob/kick"),
        Some("alice"),
        None,
    )
    .await;
    let missing = uuid::Uuid::new_v4().to_string();
    let asked = [
        (open.as_str(), Some("999999")),
        (left.as_str(), Some("1")),
        (removed.as_str(), None),
        (private.as_str(), Some("2")),
        (missing.as_str(), None),
        ("not-a-room", Some("5")),
        (open.as_str(), None),
    ];
    let reply = app.changes("bob", &asked, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let entries = reply.body["messageChanges"].as_array().unwrap();
    let statuses: Vec<&str> = entries.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        [
            "RESET",
            "NO_ACCESS",
            "NO_ACCESS",
            "NO_ACCESS",
            "NO_ACCESS",
            "NO_ACCESS",
            "OK"
        ]
    );
    // A cursor ahead of the counter (say, the store was restored from an older backup) is
    // answered from the beginning.
    assert_eq!(
        entries[0]["changes"].as_array().unwrap().len(),
        entries[6]["changes"].as_array().unwrap().len()
    );
    for (entry, (_, after)) in entries.iter().zip(asked).skip(1).take(5) {
        assert_eq!(entry["cursor"], after.unwrap_or("0"), "NO_ACCESS echoes the cursor");
        assert_eq!(entry["changes"], json!([]));
        assert_eq!(entry["hasMore"], false);
    }

    app.changes("bob", &[(&open, Some("12abc"))], None)
        .await
        .assert_error(422, "VALIDATION");
    let other_workspace = json!({ "input": { "serverId": "other", "conversations": [] } });
    app.act(Method::POST, "bob", "/messageChanges", other_workspace)
        .await
        .assert_error(403, "FORBIDDEN");
    let too_many: Vec<(&str, Option<&str>)> = (0..101).map(|_| (open.as_str(), None)).collect();
    app.changes("bob", &too_many, None)
        .await
        .assert_error(422, "VALIDATION");
}

async fn retention_purges_every_row_of_expired_messages_and_raises_the_floor(backend: Backend) {
    // Housekeeping is run by the test itself, at a chosen time.
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "0")]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let old: Vec<String> = fill(&app, "alice", &room, 70).await;
    let reply = json!({ "text": "late reply", "replyTo": old[0] });
    let old_reply = app
        .act(Method::POST, "bob", &format!("/rooms/{room}/messages"), reply)
        .await;
    let old_reply = old_reply.body["id"].as_str().unwrap().to_owned();
    app.call(
        Method::PUT,
        &format!("/api/rooms/{room}/messages/{}/reactions/ok", old[1]),
        Some("bob"),
        None,
    )
    .await;
    // A client that synced part of the old history and then went away.
    let early = app.changes("bob", &[(&room, None)], Some(10)).await;
    let early = early.body["messageChanges"][0]["cursor"].as_str().unwrap().to_owned();

    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let boundary = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let fresh = fill(&app, "alice", &room, 3).await;
    // An old message edited now takes a version above the fresh ones: when it expires, the
    // floor must still stay below every live message.
    let edit = json!({ "text": "edited late" });
    let edited = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}/messages/{}", old[5]),
            edit,
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    let set = json!({ "retentionSeconds": 3600 });
    assert_eq!(
        app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), set)
            .await
            .status,
        StatusCode::OK
    );

    let chat = backend.chat().await;
    let report = chat
        .housekeeping(boundary + chrono::Duration::seconds(3600))
        .await
        .unwrap();
    assert!(report.messages_purged >= 71, "{report:?}");

    let rows = |table: &tabletalk::storage::TableName| {
        let (chat, room) = (&chat, room.clone());
        let table = table.clone();
        async move {
            let query = tabletalk::storage::RangeQuery::partition(room, 1000);
            chat.store()
                .tables()
                .query_up_to(&table, &query, 100_000)
                .await
                .unwrap()
                .0
        }
    };
    let schema = chat.store().schema();
    let gone: HashSet<String> = old.iter().cloned().chain([old_reply.clone()]).collect();
    for table in [&schema.messages, &schema.metadata] {
        for row in rows(table).await {
            let names: Vec<&str> = [row.row_key.as_str(), row.str("messageId").unwrap_or("")].into();
            let prefix = row.row_key.split(':').next().unwrap_or("");
            assert!(
                !names.iter().any(|n| gone.contains(*n)) && !gone.contains(prefix),
                "{table}: {} survived",
                row.row_key
            );
        }
    }
    let index: HashSet<String> = rows(&schema.ascending).await.into_iter().map(|r| r.row_key).collect();
    assert_eq!(
        index.len(),
        3,
        "only the fresh messages' index rows are left: {index:?}"
    );
    let left = app.read_all("bob", &room, "asc", 100).await;
    let left: HashSet<&str> = left.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        left,
        fresh.iter().map(String::as_str).collect::<HashSet<_>>(),
        "fresh messages untouched"
    );

    // A cursor from before the purge is below the floor: RESET, read from the floor (a
    // cursor at the floor saw everything purged, and stays OK).
    let reply = app.changes("bob", &[(&room, Some(early.as_str()))], None).await;
    let entry = &reply.body["messageChanges"][0];
    assert_eq!(entry["status"], "RESET", "{entry}");
    let ids: HashSet<&str> = entry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        fresh.iter().map(String::as_str).collect(),
        "after the floor: the fresh messages"
    );
    // A cursor at or past the floor is fine.
    let reply = app.changes("bob", &[(&room, entry["cursor"].as_str())], None).await;
    assert_eq!(reply.body["messageChanges"][0]["status"], "OK");
    // An initial sync after the purge gets every live message, nothing purged.
    app.join("carol", &room).await;
    let mut initial = Cache::default();
    initial.catch_up(&app, "carol", &room).await;
    let synced: HashSet<&str> = initial.messages.keys().map(String::as_str).collect();
    let everything = app.read_all("carol", &room, "asc", 100).await;
    let live: HashSet<&str> = everything.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(synced, live, "{backend:?}: an initial sync after a purge");
    assert_eq!(live.len(), fresh.len() + 1, "the fresh messages and carol's join line");
}

#[tokio::test]
async fn the_local_server_runs_housekeeping_itself() {
    let backend = Backend::embedded();
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "1")]);
    let room = app.create_room("alice").await;
    let expiring = app.post("alice", &room, "soon gone").await;
    let set = json!({ "retentionSeconds": 1 });
    let patched = app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), set).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let mut last = None;
    for _ in 0..300 {
        let reply = get_message(&app, "alice", &room, &expiring).await;
        if reply.status == StatusCode::NOT_FOUND {
            return;
        }
        last = Some((reply.status, reply.body));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let chat = backend.chat().await;
    let room_id = tabletalk::ids::RoomId::parse(&room).unwrap();
    let report = chat.housekeeping(chrono::Utc::now()).await;
    let listed = chat
        .store()
        .tables()
        .get(&chat.store().schema().housekeeping, "rooms", &room)
        .await
        .unwrap();
    let room_row = chat
        .store()
        .tables()
        .get(&chat.store().schema().rooms, &room, "room")
        .await
        .unwrap();
    let still = chat
        .reading
        .get_message(
            &crate::helpers::principal("alice"),
            &room_id,
            &tabletalk::keys::MessageKey::parse(&expiring).unwrap(),
        )
        .await;
    panic!(
        "the expired message was never purged: {last:?}; listed {listed:?}; room {room_row:?}; \
         a purge from here: {report:?}, then the message: {still:?}"
    );
}
