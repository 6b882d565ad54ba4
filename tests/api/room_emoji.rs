//! A room's own emoji, on both stores: a member with ManageRoom names an image they uploaded;
//! `:name:` in the room's Markdown (sent or edited) marks it; members list the emoji and fetch
//! the image with the attachments' membership check; the image is no message's; deleting the
//! emoji deletes the image, and old messages keep showing the name. Every refusal is the
//! documented 4xx.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::attachments::{download, png, send_with, uploaded};
use crate::helpers::messages::{create_message, get_message};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app};

backend_tests!(
    a_rooms_own_emoji_is_made_used_shown_to_members_and_deleted,
    making_an_emoji_needs_manage_room_and_bad_input_is_a_documented_4xx,
);

const MARK: &str = r#"<span data-type="emoji" data-id="partyparrot">:partyparrot:</span>"#;

async fn make(app: &TestApp, user: &str, room: &str, name: &str, attachment: &str) -> crate::helpers::Reply {
    let body = json!({ "name": name, "attachmentId": attachment });
    app.act(Method::POST, user, &format!("/rooms/{room}/emoji"), body).await
}

async fn listed(app: &TestApp, user: &str, room: &str) -> Vec<Value> {
    let list = app
        .call(Method::GET, &format!("/api/rooms/{room}/emoji"), Some(user), None)
        .await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    list.body.as_array().cloned().unwrap()
}

async fn markdown(app: &TestApp, user: &str, room: &str, text: &str) -> Value {
    let sent = create_message(app, user, room, json!({ "text": text, "format": "markdown" })).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    sent.body
}

async fn a_rooms_own_emoji_is_made_used_shown_to_members_and_deleted(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    let image = uploaded(&app, "owner", &room, "parrot.gif", "image/gif", &png(2000)).await;
    let made = make(&app, "owner", &room, "partyparrot", &image).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let url = format!("/api/rooms/{room}/attachments/{image}");
    assert_eq!(made.body["url"], url.as_str());
    assert_eq!(made.body["name"], "partyparrot");

    // Every member lists it and fetches its image; a non-member gets neither.
    let list = listed(&app, "bob", &room).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["url"], url.as_str());
    let (status, stored) = download(&app, "bob", &url).await;
    assert_eq!(status, StatusCode::FOUND);
    assert_eq!(stored.unwrap().bytes().await.unwrap().as_ref(), png(2000).as_slice());
    assert_eq!(download(&app, "mallory", &url).await.0, StatusCode::NOT_FOUND);
    app.call(Method::GET, &format!("/api/rooms/{room}/emoji"), Some("mallory"), None)
        .await
        .assert_error(404, "NOT_FOUND");

    // `:partyparrot:` in Markdown marks it, outside code; an edit renders it again.
    let sent = markdown(&app, "bob", &room, "ship it :partyparrot: `:partyparrot:` :tada:").await;
    let text = sent["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!("<p>ship it {MARK} <code>:partyparrot:</code> 🎉</p>"),
        "{sent}"
    );
    let id = sent["id"].as_str().unwrap();
    let edited = app
        .call(
            Method::PATCH,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("bob"),
            Some(json!({ "text": "**done** :partyparrot:", "format": "markdown" })),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    assert_eq!(edited.body["text"], format!("<p><strong>done</strong> {MARK}</p>"));

    // Its image is the emoji's: no message carries it.
    send_with(&app, "owner", &room, &[&image])
        .await
        .assert_error(409, "CONFLICT");

    // Deleted: the image goes, old messages keep the name, new ones write it as text.
    let gone = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/emoji/partyparrot"),
            Some("owner"),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    assert!(listed(&app, "bob", &room).await.is_empty());
    assert_eq!(download(&app, "bob", &url).await.0, StatusCode::NOT_FOUND);
    let old = get_message(&app, "bob", &room, id).await;
    assert!(old.body["text"].as_str().unwrap().contains(MARK), "{}", old.body);
    let after = markdown(&app, "bob", &room, "more :partyparrot:").await;
    assert_eq!(after["text"], "<p>more :partyparrot:</p>");
    app.call(
        Method::DELETE,
        &format!("/api/rooms/{room}/emoji/partyparrot"),
        Some("owner"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");

    let log = app.moderation_log("owner", &room).await;
    let actions: Vec<&str> = log.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"emojiCreated") && actions.contains(&"emojiDeleted"),
        "{actions:?}"
    );
}

async fn making_an_emoji_needs_manage_room_and_bad_input_is_a_documented_4xx(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    let owners = uploaded(&app, "owner", &room, "a.png", "image/png", &png(100)).await;
    let bobs = uploaded(&app, "bob", &room, "b.png", "image/png", &png(100)).await;

    make(&app, "bob", &room, "wave2", &bobs)
        .await
        .assert_error(403, "FORBIDDEN");
    make(&app, "mallory", &room, "wave2", &bobs)
        .await
        .assert_error(404, "NOT_FOUND");
    // Another member's upload is not the caller's to name.
    make(&app, "owner", &room, "wave2", &bobs)
        .await
        .assert_error(422, "VALIDATION");
    make(&app, "owner", &room, "wave2", "nothing-here")
        .await
        .assert_error(422, "VALIDATION");
    for bad in ["", "Wave", "wa ve", "tada", &"a".repeat(33)] {
        make(&app, "owner", &room, bad, &owners)
            .await
            .assert_error(422, "VALIDATION");
    }
    let pdf = uploaded(&app, "owner", &room, "a.pdf", "application/pdf", &png(100)).await;
    make(&app, "owner", &room, "doc", &pdf)
        .await
        .assert_error(422, "VALIDATION");
    let big = uploaded(&app, "owner", &room, "big.png", "image/png", &png(300 * 1024)).await;
    make(&app, "owner", &room, "big", &big)
        .await
        .assert_error(422, "VALIDATION");
    // A refused image stays the uploader's to send.
    assert_eq!(
        send_with(&app, "owner", &room, &[&big]).await.status,
        StatusCode::CREATED
    );
    let bad_body = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/emoji"),
            json!({ "name": "x" }),
        )
        .await;
    bad_body.assert_error(422, "VALIDATION");

    assert_eq!(
        make(&app, "owner", &room, "wave2", &owners).await.status,
        StatusCode::CREATED
    );
    let again = uploaded(&app, "owner", &room, "c.png", "image/png", &png(100)).await;
    make(&app, "owner", &room, "wave2", &again)
        .await
        .assert_error(409, "CONFLICT");
    // The name taken freed the second image: it can still be sent.
    assert_eq!(
        send_with(&app, "owner", &room, &[&again]).await.status,
        StatusCode::CREATED
    );
    app.call(
        Method::DELETE,
        &format!("/api/rooms/{room}/emoji/wave2"),
        Some("bob"),
        None,
    )
    .await
    .assert_error(403, "FORBIDDEN");
    app.call(
        Method::DELETE,
        &format!("/api/rooms/{room}/emoji/No%20Such"),
        Some("owner"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}
