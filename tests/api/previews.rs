//! Link previews: the server fetches a member's first link in the background, through the
//! SSRF-safe client, against a page server on loopback (which the test setting
//! `TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK` opens, and nothing else private); caches it per
//! URL; attaches it to the message without a new version; and the author may remove it.
//!
//! The server runs one preview worker, taking jobs in the order they were sent, so once the
//! preview of a later message shows, every earlier message's fetch is over: that is how a
//! test knows a refused link got no preview, without sleeping.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode as AxumStatus, Uri, header};
use axum::response::Response;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::assert_status;
use crate::helpers::web_pubsub::{Hub, start_hub};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app_with};

backend_tests!(
    a_members_link_gets_the_pages_open_graph_preview_without_a_new_version,
    refused_links_get_no_preview,
    a_cached_url_is_not_fetched_again,
    the_author_removes_their_messages_preview,
    a_preview_and_its_removal_signal_the_room,
    bad_input_on_removing_a_preview_gets_documented_errors,
);

/// The page server on loopback: what it serves by path, and how often each path was asked.
struct Pages {
    base: String,
    /// The same server reached through the IPv4-mapped IPv6 form of loopback, which the rule
    /// refuses (it would reach this server if it were let through).
    mapped: String,
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

impl Pages {
    fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

fn html(body: String) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .body(Body::from(body))
        .unwrap()
}

fn page(title: &str) -> String {
    format!("<!doctype html><html><head><title>{title}</title></head><body>hello</body></html>")
}

fn redirect(to: &str) -> Response {
    Response::builder()
        .status(AxumStatus::FOUND)
        .header(header::LOCATION, to)
        .body(Body::empty())
        .unwrap()
}

async fn serve_pages() -> Pages {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let mapped = format!("http://[::ffff:127.0.0.1]:{port}");
    let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let (counted, me, mapped_me) = (hits.clone(), base.clone(), mapped.clone());
    let router = axum::Router::new().fallback(move |uri: Uri| {
        let (hits, me, mapped) = (counted.clone(), me.clone(), mapped.clone());
        async move {
            let path = uri.path().to_owned();
            *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
            match path.as_str() {
                "/article" => html(
                    r#"<html><head><title>Tag title</title>
                    <meta property="og:title" content="The &quot;OG&quot; title">
                    <meta property="og:description" content="What the article says">
                    <meta property="og:site_name" content="Loopback News">
                    <meta property="og:image" content="/card.png">
                    </head><body>text</body></html>"#
                        .to_owned(),
                ),
                "/hop" => redirect(&format!("{me}/landing")),
                "/landing" => html(page("Landed after a redirect")),
                "/to-private" => redirect("http://10.0.0.1/secret"),
                "/to-metadata" => redirect("http://169.254.169.254/latest/meta-data/"),
                "/to-mapped-private" => redirect("http://[::ffff:10.0.0.1]/secret"),
                // Reaches this very server unless refused: the hit count on /secret tells.
                "/to-mapped-loopback" => redirect(&format!("{mapped}/secret")),
                "/to-localhost" => redirect(&format!("http://localhost:{port}/secret")),
                "/loop" => redirect(&format!("{me}/loop")),
                "/secret" => html(page("Never shown")),
                "/oversize" => html(format!("<title>Too big</title>{}", "x".repeat(2 * 1024 * 1024))),
                "/oversize-streamed" => {
                    // No Content-Length: the fetch must stop reading at its cap.
                    let chunk = format!("<title>Too big</title>{}", "y".repeat(64 * 1024));
                    let chunks = std::iter::repeat_n(chunk, 64).map(Ok::<_, std::io::Error>);
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/html")
                        .body(Body::from_stream(futures::stream::iter(chunks)))
                        .unwrap()
                }
                "/image" => Response::builder()
                    .header(header::CONTENT_TYPE, "image/png")
                    .body(Body::from("<title>Not a page</title>"))
                    .unwrap(),
                "/json" => Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(r#"{"title":"Not a page"}"#))
                    .unwrap(),
                "/missing" => Response::builder()
                    .status(AxumStatus::NOT_FOUND)
                    .header(header::CONTENT_TYPE, "text/html")
                    .body(Body::from(page("Not found")))
                    .unwrap(),
                other => html(page(&format!("Page {other}"))),
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Pages {
        base,
        mapped: mapped_me,
        hits,
    }
}

fn spawn_previewing_app(backend: &Backend) -> TestApp {
    spawn_app_with(backend, &[("TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK", "true")])
}

async fn get_message(app: &TestApp, user: &str, room: &str, id: &str) -> Value {
    let reply = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some(user),
            None,
        )
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body
}

/// The message once its preview shows (the fetch runs in the background; waiting is bounded).
async fn previewed(app: &TestApp, room: &str, id: &str) -> Value {
    for _ in 0..400 {
        let message = get_message(app, "alice", room, id).await;
        if message.get("preview").is_some() {
            return message;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("message {id} never got its preview");
}

async fn a_members_link_gets_the_pages_open_graph_preview_without_a_new_version(backend: Backend) {
    let pages = serve_pages().await;
    let app = spawn_previewing_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let link = pages.url("/article");
    let sent = app.send("alice", &room, &format!("read this: {link} !"), None).await;
    assert_status(&sent, StatusCode::CREATED);
    assert!(
        sent.body.get("preview").is_none(),
        "the send does not wait for the fetch"
    );
    let id = sent.body["id"].as_str().unwrap().to_owned();

    let message = previewed(&app, &room, &id).await;
    assert_eq!(
        message["preview"],
        json!({
            "url": link,
            "title": "The \"OG\" title",
            "description": "What the article says",
            "siteName": "Loopback News",
            "imageUrl": pages.url("/card.png"),
        })
    );
    assert_eq!(
        message["version"], sent.body["version"],
        "companion data: no new version"
    );
    assert!(message.get("editedAt").is_none());

    // Every reader sees it, in pages too.
    let page = app
        .call(Method::GET, &format!("/api/rooms/{room}/messages"), Some("bob"), None)
        .await;
    let listed = page.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id.as_str())
        .cloned();
    assert_eq!(listed.unwrap()["preview"]["title"], "The \"OG\" title");

    // A redirect on loopback is followed (and checked): the landing page's title, the link's URL.
    let hop = app
        .post("bob", &room, &format!("<a href=\"{}\">hop</a>", pages.url("/hop")))
        .await;
    let message = previewed(&app, &room, &hop).await;
    assert_eq!(message["preview"]["title"], "Landed after a redirect");
    assert_eq!(message["preview"]["url"], pages.url("/hop"));
    assert_eq!(pages.hits("/landing"), 1);
}

async fn refused_links_get_no_preview(backend: Backend) {
    let pages = serve_pages().await;
    let app = spawn_previewing_app(&backend);
    let room = app.create_room("alice").await;
    let refused = [
        "/to-private",
        "/to-metadata",
        "/to-mapped-private",
        "/to-mapped-loopback",
        "/to-localhost",
        "/loop",
        "/oversize",
        "/oversize-streamed",
        "/image",
        "/json",
        "/missing",
    ];
    let mut ids = Vec::new();
    for path in refused {
        ids.push((path, app.post("alice", &room, &pages.url(path)).await));
    }
    // The address literal itself: refused before any request (IPv4-mapped loopback).
    ids.push((
        "mapped",
        app.post("alice", &room, &format!("{}/secret", pages.mapped)).await,
    ));
    // A webhook's message gets no preview, whatever it links to.
    let hook = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/webhooks"),
            json!({ "name": "CI" }),
        )
        .await;
    assert_status(&hook, StatusCode::CREATED);
    let hook_url = format!("{}{}", app.base, hook.body["url"].as_str().unwrap());
    let hooked = app
        .http
        .post(hook_url)
        .json(&json!({ "text": pages.url("/from-a-webhook") }))
        .send()
        .await
        .unwrap();
    assert_eq!(hooked.status(), StatusCode::CREATED);

    // The worker takes jobs in order: once this one shows, every fetch above is over.
    let last = app.post("alice", &room, &pages.url("/last")).await;
    assert_eq!(previewed(&app, &room, &last).await["preview"]["title"], "Page /last");
    for (path, id) in ids {
        let message = get_message(&app, "alice", &room, &id).await;
        assert!(message.get("preview").is_none(), "{path}: {message}");
    }
    assert_eq!(pages.hits("/secret"), 0, "no redirect reached a refused address");
    assert_eq!(pages.hits("/from-a-webhook"), 0, "a webhook's link is never fetched");
    for path in ["/to-private", "/oversize", "/oversize-streamed", "/image", "/json"] {
        assert_eq!(pages.hits(path), 1, "{path} was fetched once, never retried");
    }
    assert!(
        pages.hits("/loop") <= 4,
        "at most a few redirects: {}",
        pages.hits("/loop")
    );

    // A failed fetch is cached too: the same link is not fetched again for a while.
    let again = app.post("alice", &room, &pages.url("/image")).await;
    let last = app.post("alice", &room, &pages.url("/last-again")).await;
    previewed(&app, &room, &last).await;
    assert!(get_message(&app, "alice", &room, &again).await.get("preview").is_none());
    assert_eq!(pages.hits("/image"), 1);
}

async fn a_cached_url_is_not_fetched_again(backend: Backend) {
    let pages = serve_pages().await;
    let app = spawn_previewing_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let link = pages.url("/cached");
    let first = app.post("alice", &room, &link).await;
    previewed(&app, &room, &first).await;
    let second = app.post("bob", &room, &format!("same: {link}")).await;
    let message = previewed(&app, &room, &second).await;
    assert_eq!(message["preview"]["title"], "Page /cached");
    assert_eq!(
        pages.hits("/cached"),
        1,
        "the second message's preview came from the cache"
    );
}

async fn the_author_removes_their_messages_preview(backend: Backend) {
    let pages = serve_pages().await;
    let app = spawn_previewing_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, &pages.url("/mine")).await;
    previewed(&app, &room, &id).await;
    let path = format!("/api/rooms/{room}/messages/{id}/preview");

    app.call(Method::DELETE, &path, Some("bob"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::DELETE, &path, Some("mallory"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    assert!(get_message(&app, "alice", &room, &id).await.get("preview").is_some());

    let removed = app.call(Method::DELETE, &path, Some("alice"), None).await;
    assert_status(&removed, StatusCode::NO_CONTENT);
    let message = get_message(&app, "bob", &room, &id).await;
    assert!(message.get("preview").is_none(), "{message}");
    let again = app.call(Method::DELETE, &path, Some("alice"), None).await;
    assert_status(&again, StatusCode::NO_CONTENT);

    // A removal before the fetch lands holds too: the next message with the same (cached)
    // link is removed at once, and after a later message's preview it still shows none.
    let early = app.post("alice", &room, &pages.url("/mine")).await;
    let early_path = format!("/api/rooms/{room}/messages/{early}/preview");
    assert_status(
        &app.call(Method::DELETE, &early_path, Some("alice"), None).await,
        StatusCode::NO_CONTENT,
    );
    let last = app.post("alice", &room, &pages.url("/after")).await;
    previewed(&app, &room, &last).await;
    assert!(get_message(&app, "alice", &room, &early).await.get("preview").is_none());
}

async fn bad_input_on_removing_a_preview_gets_documented_errors(backend: Backend) {
    let app = spawn_previewing_app(&backend);
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "no link").await;
    let remove = |room: String, id: String, user: Option<&'static str>| {
        let app = &app;
        async move {
            app.call(
                Method::DELETE,
                &format!("/api/rooms/{room}/messages/{id}/preview"),
                user,
                None,
            )
            .await
        }
    };
    remove(room.clone(), id.clone(), None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    remove("not-a-room".into(), id.clone(), Some("alice"))
        .await
        .assert_error(404, "NOT_FOUND");
    let missing_room = "00000000-0000-4000-8000-000000000000".to_owned();
    remove(missing_room, id.clone(), Some("alice"))
        .await
        .assert_error(404, "NOT_FOUND");
    for bad in ["not-a-message", "0", "9999999999999999999", "%3A%3A"] {
        remove(room.clone(), bad.into(), Some("alice"))
            .await
            .assert_error(404, "NOT_FOUND");
    }
    // A deleted message has no preview to remove.
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("alice"),
            None,
        )
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    remove(room.clone(), id.clone(), Some("alice"))
        .await
        .assert_error(404, "NOT_FOUND");
}

/// The `message.previewed` signals the hub was sent for `id`, waiting (bounded) for `count`.
async fn previewed_signals(hub: &Hub, room: &str, id: &str, count: usize) -> usize {
    let seen = || {
        let sent = hub.sent.lock().unwrap();
        sent.iter()
            .filter(|(group, body)| {
                group == &format!("room.{room}") && body["type"] == "message.previewed" && body["messageId"] == id
            })
            .count()
    };
    for _ in 0..200 {
        if seen() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen()
}

async fn a_preview_and_its_removal_signal_the_room(backend: Backend) {
    let pages = serve_pages().await;
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(
        &backend,
        &[
            ("TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK", "true"),
            ("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str()),
        ],
    );
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, &pages.url("/signalled")).await;
    previewed(&app, &room, &id).await;
    assert_eq!(
        previewed_signals(&hub, &room, &id, 1).await,
        1,
        "attached: the room is told"
    );
    let path = format!("/api/rooms/{room}/messages/{id}/preview");
    assert_status(
        &app.call(Method::DELETE, &path, Some("alice"), None).await,
        StatusCode::NO_CONTENT,
    );
    assert_eq!(
        previewed_signals(&hub, &room, &id, 2).await,
        2,
        "removed: the room is told"
    );
}
