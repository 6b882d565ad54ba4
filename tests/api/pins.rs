//! Pins: one pin line per pin and none for an unpin, a pin racing an edit loses neither, and
//! the room's pins (`GET …/pins`) list what is pinned, to members only.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::TestApp;
use crate::helpers::messages::{assert_status, delete_message, edit, get_message, pin};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    a_concurrent_edit_and_unpin_both_land,
    a_pin_writes_one_line_and_an_unpin_none,
    the_pins_list_pinned_messages_newest_first_and_an_unpin_takes_one_off,
    the_pins_page_through_every_pinned_message_once,
    a_deleted_pinned_message_leaves_the_pins,
    a_stranger_reads_no_pins,
    concurrent_pins_and_unpins_leave_the_list_as_the_flags_say,
    a_message_pinned_before_pin_rows_unpins_and_joins_the_pins_when_pinned_again,
);

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

/// The ids of the room's pins as `user` reads them, following `nextCursor` with `limit`.
async fn pinned_ids(app: &TestApp, user: &str, room: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    for _ in 0..1000 {
        let path = format!("/api/rooms/{room}/pins?limit={limit}&cursor={cursor}");
        let page = app.call(Method::GET, &path, Some(user), None).await;
        assert_status(&page, StatusCode::OK);
        for message in page.body["messages"].as_array().unwrap() {
            assert_eq!(message["isPinned"], true, "{message}");
            ids.push(message["id"].as_str().unwrap().to_owned());
        }
        if page.body["hasMore"] != true {
            return ids;
        }
        cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    }
    panic!("paging did not end");
}

async fn the_pins_list_pinned_messages_newest_first_and_an_unpin_takes_one_off(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(app.post("alice", &room, &format!("m{n}")).await);
    }
    assert_eq!(pinned_ids(&app, "bob", &room, 50).await, Vec::<String>::new());
    for n in [3, 0, 4] {
        assert_status(&pin(&app, Method::POST, "alice", &room, &ids[n]).await, StatusCode::OK);
    }
    let newest_first = vec![ids[4].clone(), ids[3].clone(), ids[0].clone()];
    assert_eq!(pinned_ids(&app, "bob", &room, 50).await, newest_first, "{backend:?}");
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/pins"), Some("bob"), None)
        .await;
    assert_eq!(listed.body["messages"][1]["text"], "m3", "the pins carry the messages");
    assert_status(
        &pin(&app, Method::DELETE, "alice", &room, &ids[3]).await,
        StatusCode::OK,
    );
    assert_eq!(
        pinned_ids(&app, "bob", &room, 50).await,
        vec![ids[4].clone(), ids[0].clone()],
        "{backend:?}: the unpinned message left the list"
    );
    assert_status(
        &pin(&app, Method::DELETE, "alice", &room, &ids[3]).await,
        StatusCode::OK,
    );
    assert_status(&pin(&app, Method::POST, "alice", &room, &ids[4]).await, StatusCode::OK);
    assert_eq!(
        pinned_ids(&app, "bob", &room, 50).await,
        vec![ids[4].clone(), ids[0].clone()],
        "{backend:?}: unpinning twice or pinning twice changes nothing"
    );
}

async fn the_pins_page_through_every_pinned_message_once(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let mut pinned = Vec::new();
    for n in 0..7 {
        let id = app.post("alice", &room, &format!("m{n}")).await;
        if n != 2 {
            assert_status(&pin(&app, Method::POST, "alice", &room, &id).await, StatusCode::OK);
            pinned.push(id);
        }
    }
    pinned.reverse();
    for limit in [1, 2, 4, 6, 100] {
        assert_eq!(
            pinned_ids(&app, "alice", &room, limit).await,
            pinned,
            "{backend:?} limit {limit}"
        );
    }
}

async fn a_deleted_pinned_message_leaves_the_pins(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let kept = app.post("alice", &room, "kept").await;
    let gone = app.post("alice", &room, "gone").await;
    for id in [&kept, &gone] {
        assert_status(&pin(&app, Method::POST, "alice", &room, id).await, StatusCode::OK);
    }
    assert_status(
        &delete_message(&app, "alice", &room, &gone).await,
        StatusCode::NO_CONTENT,
    );
    for limit in [1, 50] {
        assert_eq!(
            pinned_ids(&app, "alice", &room, limit).await,
            vec![kept.clone()],
            "{backend:?}"
        );
    }
}

async fn a_stranger_reads_no_pins(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "pinned").await;
    assert_status(&pin(&app, Method::POST, "alice", &room, &id).await, StatusCode::OK);
    let stranger = app
        .call(Method::GET, &format!("/api/rooms/{room}/pins"), Some("carol"), None)
        .await;
    stranger.assert_error(404, "NOT_FOUND");
    let missing = format!("/api/rooms/{}/pins", uuid::Uuid::new_v4());
    let unknown = app.call(Method::GET, &missing, Some("carol"), None).await;
    assert_eq!(unknown.body, stranger.body, "a stranger cannot tell the room exists");
}

/// Pins and unpins of the same messages at once: whatever wins, each message is listed
/// exactly when its flag says it is pinned.
async fn concurrent_pins_and_unpins_leave_the_list_as_the_flags_say(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(app.post("alice", &room, &format!("m{n}")).await);
    }
    // Within alice's write burst: 3 sends and 18 pins or unpins.
    for round in 0..2 {
        let calls = ids.iter().flat_map(|id| {
            [Method::POST, Method::DELETE, Method::POST]
                .into_iter()
                .map(|method| pin(&app, method, "alice", &room, id))
        });
        for reply in futures::future::join_all(calls).await {
            assert!(
                reply.status == StatusCode::OK || reply.body["code"] == "CONFLICT",
                "{backend:?} round {round}: {} {}",
                reply.status,
                reply.body
            );
        }
        let mut flagged = Vec::new();
        for id in ids.iter().rev() {
            if get_message(&app, "alice", &room, id).await.body["isPinned"] == true {
                flagged.push(id.clone());
            }
        }
        assert_eq!(
            pinned_ids(&app, "alice", &room, 50).await,
            flagged,
            "{backend:?} round {round}"
        );
    }
}

/// A message whose flag was set before pin rows existed: on each store, its unpin lands (there
/// is no row to delete), and pinning it again lists it.
async fn a_message_pinned_before_pin_rows_unpins_and_joins_the_pins_when_pinned_again(backend: Backend) {
    use tabletalk::storage::{Entity, UpdateMode, Value};
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let chat = backend.chat().await;
    let legacy = async |id: &str| {
        let flag = Entity::new(room.as_str(), id).with("isPinned", Value::Bool(true));
        let store = chat.store();
        store
            .tables()
            .upsert(&store.schema().messages, &flag, UpdateMode::Merge)
            .await
            .unwrap();
    };
    let unpinned = app.post("alice", &room, "unpinned later").await;
    let repinned = app.post("alice", &room, "pinned again").await;
    legacy(&unpinned).await;
    legacy(&repinned).await;
    assert_eq!(
        get_message(&app, "alice", &room, &unpinned).await.body["isPinned"],
        true
    );
    assert_eq!(
        pinned_ids(&app, "alice", &room, 50).await,
        Vec::<String>::new(),
        "{backend:?}"
    );
    let unpin = pin(&app, Method::DELETE, "alice", &room, &unpinned).await;
    assert_status(&unpin, StatusCode::OK);
    assert_ne!(
        get_message(&app, "alice", &room, &unpinned).await.body["isPinned"],
        true
    );
    assert_status(
        &pin(&app, Method::POST, "alice", &room, &repinned).await,
        StatusCode::OK,
    );
    assert_eq!(
        pinned_ids(&app, "alice", &room, 50).await,
        vec![repinned],
        "{backend:?}"
    );
}
