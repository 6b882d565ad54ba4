//! Markdown: a message sent or edited with `format: markdown` is rendered once, on the
//! server, into the sanitized HTML every reader gets, and keeps its source (what a client
//! edits); HTML sends are as they were. The same answers on both stores.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::messages::{assert_status, create_message, get_message};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    markdown_renders_once_to_sanitized_html,
    an_edit_renders_again_and_html_stays_html,
    a_member_named_in_markdown_is_mentioned,
    markdown_answers_bad_input_with_its_documented_errors,
);

const UGC: &str = r#"rel="noopener nofollow ugc""#;

async fn markdown_renders_once_to_sanitized_html(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let table: Vec<(&str, String)> = vec![
        (
            "Who owns the **launch email**?",
            "<p>Who owns the <strong>launch email</strong>?</p>".into(),
        ),
        (
            "agenda: https://example.com/agenda",
            format!(r#"<p>agenda: <a href="https://example.com/agenda" {UGC}>https://example.com/agenda</a></p>"#),
        ),
        (
            "[the plan](https://example.com/plan) and ~~old~~ _new_",
            format!(r#"<p><a href="https://example.com/plan" {UGC}>the plan</a> and <del>old</del> <em>new</em></p>"#),
        ),
        ("line one\nline two", "<p>line one<br>\nline two</p>".into()),
        (":tada: shipped at 10:30", "<p>🎉 shipped at 10:30</p>".into()),
        (
            "```\nlet x = 1 < 2;\n```",
            "<pre><code>let x = 1 &lt; 2;\n</code></pre>".into(),
        ),
        // Hostile: none of it runs, loads or links anywhere unsafe.
        (
            "<script>alert(1)</script>",
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>".into(),
        ),
        (
            "[x](javascript:alert(1))",
            "<p><a rel=\"noopener nofollow ugc\">x</a></p>".into(),
        ),
        (
            "![cat](https://cats.example/c.png)",
            format!(r#"<p><a href="https://cats.example/c.png" {UGC}>cat</a></p>"#),
        ),
    ];
    for (source, html) in table {
        let sent = create_message(&app, "alice", &room, json!({ "text": source, "format": "markdown" })).await;
        assert_status(&sent, StatusCode::CREATED);
        assert_eq!(sent.body["text"], html, "{source:?}");
        assert_eq!(sent.body["source"], source, "{source:?}");
        // What a reader gets later is the same rendering, read back from the store.
        let read = get_message(&app, "alice", &room, sent.body["id"].as_str().unwrap()).await;
        assert_eq!(read.body["text"], html, "{source:?}");
        assert_eq!(read.body["source"], source);
    }
    // Nesting 10,000 deep: answered, with an output bounded by the input.
    for source in [
        format!("{}x{}", "*".repeat(4_000), "*".repeat(4_000)),
        format!("{}x", "> ".repeat(4_000)),
    ] {
        let sent = create_message(&app, "alice", &room, json!({ "text": source, "format": "markdown" })).await;
        assert_status(&sent, StatusCode::CREATED);
        assert!(sent.body["text"].as_str().unwrap().len() < 4 * source.len());
    }
}

async fn an_edit_renders_again_and_html_stays_html(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let sent = create_message(
        &app,
        "alice",
        &room,
        json!({ "text": "**draft**", "format": "markdown" }),
    )
    .await;
    let id = sent.body["id"].as_str().unwrap().to_owned();
    let path = format!("/api/rooms/{room}/messages/{id}");
    let edited = app
        .call(
            Method::PATCH,
            &path,
            Some("alice"),
            Some(json!({ "text": "*final* see https://x.example", "format": "markdown" })),
        )
        .await;
    assert_status(&edited, StatusCode::OK);
    assert_eq!(
        edited.body["text"],
        format!(r#"<p><em>final</em> see <a href="https://x.example" {UGC}>https://x.example</a></p>"#)
    );
    assert_eq!(edited.body["source"], "*final* see https://x.example");
    // The change feed carries the source too, for a client that edits what it synced.
    let changes = app.changes("alice", &[(&room, None)], None).await;
    let change = changes.body["messageChanges"][0]["changes"]
        .as_array()
        .and_then(|changes| changes.iter().find(|c| c["message"]["id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        change["message"]["source"], "*final* see https://x.example",
        "{}",
        changes.body
    );
    // Edited as HTML, it has no Markdown source any more.
    let html = app
        .call(
            Method::PATCH,
            &path,
            Some("alice"),
            Some(json!({ "text": "<p>**as is**</p>" })),
        )
        .await;
    assert_status(&html, StatusCode::OK);
    assert_eq!(html.body["text"], "<p>**as is**</p>");
    assert!(html.body.get("source").is_none(), "{}", html.body);
    // A send without a format is HTML, as it always was.
    let plain = create_message(&app, "alice", &room, json!({ "text": "<p>**as is**</p>" })).await;
    assert_eq!(plain.body["text"], "<p>**as is**</p>");
    assert!(plain.body.get("source").is_none());
    // A deleted message keeps neither.
    let deleted = app.call(Method::DELETE, &path, Some("alice"), None).await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    let read = get_message(&app, "alice", &room, &id).await;
    assert!(read.body.get("source").is_none(), "{}", read.body);
}

async fn a_member_named_in_markdown_is_mentioned(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let sent = create_message(
        &app,
        "alice",
        &room,
        json!({ "text": "@bob can you check? (not @carol, not `@bob`)", "format": "markdown" }),
    )
    .await;
    assert_status(&sent, StatusCode::CREATED);
    assert_eq!(
        sent.body["text"],
        "<p><span data-type=\"mention\" data-id=\"bob\">@bob</span> can you check? (not @carol, not <code>@bob</code>)</p>"
    );
    assert_eq!(sent.body["mentions"]["users"], json!(["bob"]));
    // A name no member row could have is nobody, not a failure.
    let odd = format!("@{} hi", "😀".repeat(256));
    let sent_odd = create_message(&app, "alice", &room, json!({ "text": odd, "format": "markdown" })).await;
    assert_status(&sent_odd, StatusCode::CREATED);
    // Bob's unread count for the room counts the mention.
    let rooms = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    let listed = rooms
        .body
        .as_array()
        .and_then(|rooms| rooms.iter().find(|r| r["id"] == room.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed["mentionCount"], 1, "{}", rooms.body);
}

async fn markdown_answers_bad_input_with_its_documented_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for (body, status) in [
        (json!({ "text": "x", "format": "rtf" }), 422),
        (json!({ "text": "x", "format": 7 }), 422),
        (json!({ "text": "   ", "format": "markdown" }), 422),
        (json!({ "text": "x".repeat(10_001), "format": "markdown" }), 422),
        // Ten thousand characters whose rendering outgrows what a row keeps.
        (
            json!({ "text": "https://ex.example/a ".repeat(476), "format": "markdown" }),
            422,
        ),
    ] {
        let reply = create_message(&app, "alice", &room, body.clone()).await;
        let shown: String = reply.body.to_string().chars().take(300).collect();
        assert_eq!(reply.status.as_u16(), status, "{shown}");
        assert!(reply.body["code"].is_string(), "{shown}");
    }
}
