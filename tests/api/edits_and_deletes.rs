//! Edits (by the author, or with ManageMessages; mentions recomputed) and deletes (a tombstone
//! that keeps no text, gone from every read and operation, marked when a moderator deletes).

use reqwest::{Method, StatusCode};
use serde_json::json;
use tabletalk::storage::Value as Stored;

use crate::helpers::messages::{
    THUMBS_UP, assert_status, create_message, delete_message, edit, forward, get_message, ids, mention, moderator,
    new_poll, pin, react, vote,
};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    the_author_edits_and_mentions_are_recomputed,
    only_the_author_or_manage_messages_may_edit,
    a_deleted_message_is_gone_from_reads_and_operations,
    a_tombstone_keeps_no_text,
    a_moderators_delete_is_marked_moderated,
);

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
    chat.store()
        .tables()
        .get(&chat.store().schema().messages, room, id)
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
