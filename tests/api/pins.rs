//! Pins: one pin line per pin and none for an unpin, and a pin racing an edit loses neither.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::messages::{assert_status, edit, get_message, pin};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    a_concurrent_edit_and_unpin_both_land,
    a_pin_writes_one_line_and_an_unpin_none,
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
