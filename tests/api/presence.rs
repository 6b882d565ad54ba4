//! Presence end to end: online while a connection is open, away (with last seen) once the
//! last one closed, as members of the user's rooms read it (`GET …/members`) and hear it
//! (`presence` signals). Self-hosted, from the local hub's connections made by the official
//! `@azure/web-pubsub-client` under node; on Azure, from Web PubSub's `connected` and
//! `disconnected` events posted to the handler as the service posts them (CloudEvents binary
//! mode, `ce-signature` signed with the access key), a forged one refused. Plus the custom
//! status, and bad input on every new route.

use std::process::Stdio;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::helpers::web_pubsub::{Hub, start_hub};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    the_official_client_makes_its_user_online_and_away_when_the_last_tab_closes,
    azure_connection_events_make_presence_and_a_forged_signature_is_refused,
    two_processes_on_one_store_agree_on_presence_from_repeated_events,
    a_custom_status_shows_to_room_members_until_cleared,
    presence_routes_answer_bad_input_with_errors,
);

/// `user`'s presence in the member listing of `room`, as `viewer` sees it.
async fn presence(app: &TestApp, viewer: &str, room: &str, user: &str) -> Value {
    let member = app.member(viewer, room, user).await.expect("a member");
    member["presence"].clone()
}

/// Waits (up to 15 s) until `user`'s state in `room` reads `state`; answers the presence.
async fn until_state(app: &TestApp, room: &str, user: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let presence = presence(app, "alice", room, user).await;
        if presence["state"] == state {
            return presence;
        }
        assert!(Instant::now() < deadline, "{user} never became {state}: {presence}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One tab: the official client connected with a negotiated URL of `user`, showing `room`
/// (`PUT /api/live/view` with its connection id: the server puts it in the room's group, where
/// the room's presence signals go).
struct Tab {
    node: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Tab {
    async fn open(app: &TestApp, node_modules: &str, user: &str, room: &str) -> Tab {
        let negotiated = app.call(Method::POST, "/api/negotiate", Some(user), None).await;
        assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/presence_client.cjs");
        let mut node = tokio::process::Command::new("node")
            .arg(script)
            .arg(negotiated.body["url"].as_str().unwrap())
            .env("NODE_PATH", node_modules)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let lines = BufReader::new(node.stdout.take().unwrap()).lines();
        let mut tab = Tab { node, lines };
        let connected = tab.read().await;
        assert_eq!(connected["event"], "connected", "{connected}");
        let connection = connected["connectionId"].as_str().expect("a connection id");
        let shown = crate::live::view(app, user, connection, Some(room)).await;
        assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
        tab
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("the client said something within 30 s")
            .unwrap()
            .expect("the client is still running");
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line}"))
    }

    /// The next presence signal about `user` this tab receives.
    async fn presence_of(&mut self, user: &str) -> Value {
        loop {
            let line = self.read().await;
            if line["event"] == "server-message" && line["data"]["type"] == "presence" && line["data"]["userId"] == user
            {
                return line["data"].clone();
            }
        }
    }

    /// Closes the tab (the client stops its connection) and waits for node to exit.
    async fn close(mut self) {
        drop(self.node.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(10), self.node.wait())
            .await
            .expect("the client exits")
            .unwrap();
        assert!(status.success());
    }
}

async fn the_official_client_makes_its_user_online_and_away_when_the_last_tab_closes(backend: Backend) {
    let Some(node_modules) = crate::helpers::provided("TABLETALK_TEST_WPS_CLIENT") else {
        return;
    };
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let before = presence(&app, "alice", &room, "bob").await;
    assert_eq!(before["state"], "away", "never connected: {before}");
    assert_eq!(before["lastSeen"], Value::Null);

    // Alice watches the room; bob opens two tabs.
    let mut watcher = Tab::open(&app, &node_modules, "alice", &room).await;
    let first = Tab::open(&app, &node_modules, "bob", &room).await;
    let second = Tab::open(&app, &node_modules, "bob", &room).await;
    let online = until_state(&app, &room, "bob", "online").await;
    assert!(online["lastSeen"].is_string(), "{online}");
    let signal = watcher.presence_of("bob").await;
    assert_eq!(signal["state"], "online", "{signal}");
    assert_eq!(signal["roomId"], room.as_str());

    // One tab closes: still online.
    first.close().await;
    let third = Tab::open(&app, &node_modules, "bob", &room).await;
    assert_eq!(presence(&app, "alice", &room, "bob").await["state"], "online");
    third.close().await;
    assert_eq!(presence(&app, "alice", &room, "bob").await["state"], "online");

    // The last one closes: away, last seen then; the room hears it (coalesced, so it may come
    // at the end of the interval, with the last state).
    second.close().await;
    let away = until_state(&app, &room, "bob", "away").await;
    assert!(
        away["lastSeen"].as_str().unwrap() >= online["lastSeen"].as_str().unwrap(),
        "{away}"
    );
    let signal = watcher.presence_of("bob").await;
    assert_eq!(signal["state"], "away", "{signal}");
    assert_eq!(signal["lastSeen"], away["lastSeen"]);
    watcher.close().await;
}

/// `Hex(HMAC-SHA256(key, connection id))` per key, as Web PubSub writes `ce-signature`.
fn signature(keys: &[&str], connection: &str) -> String {
    keys.iter()
        .map(|key| {
            let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
            mac.update(connection.as_bytes());
            let bytes = mac.finalize().into_bytes();
            format!(
                "sha256={}",
                bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Posts a system event (`connected` or `disconnected`) of `user`'s `connection` to the app's
/// handler as Web PubSub does, with `signature` as `ce-signature`; answers the status.
async fn post_event(app: &TestApp, event: &str, user: &str, connection: &str, signature: Option<&str>) -> StatusCode {
    let body = match event {
        "disconnected" => json!({ "reason": "closed by the client" }),
        _ => json!({}),
    };
    let mut request = app
        .http
        .post(format!("{}/api/live/events", app.base))
        .header("WebHook-Request-Origin", "chat.webpubsub.azure.com")
        .header("ce-specversion", "1.0")
        .header("ce-type", format!("azure.webpubsub.sys.{event}"))
        .header("ce-source", format!("/hubs/chat/client/{connection}"))
        .header("ce-id", uuid::Uuid::new_v4().to_string())
        .header("ce-time", chrono::Utc::now().to_rfc3339())
        .header("ce-userId", user)
        .header("ce-connectionId", connection)
        .header("ce-hub", "chat")
        .header("ce-eventName", event)
        .json(&body);
    if let Some(signature) = signature {
        request = request.header("ce-signature", signature);
    }
    request.send().await.unwrap().status()
}

/// Waits (up to 15 s) for the stand-in to receive a presence signal about `user` in state
/// `state` on `room`'s group.
async fn until_signal(hub: &Hub, room: &str, user: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = hub.sent.lock().unwrap().iter().find_map(|(group, body)| {
            (group == &format!("room.{room}")
                && body["type"] == "presence"
                && body["userId"] == user
                && body["state"] == state)
                .then(|| body.clone())
        });
        if let Some(body) = found {
            return body;
        }
        assert!(Instant::now() < deadline, "no {state} signal of {user}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn azure_connection_events_make_presence_and_a_forged_signature_is_refused(backend: Backend) {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(&backend, &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let key = hub.access_key.as_str();
    // Alice's client shows the room: the group the room's presence signals go to holds it.
    hub.connect(&app, "conn-alice", "alice").await;
    let shown = crate::live::view(&app, "alice", "conn-alice", Some(&room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    let group = format!("room.{room}");
    assert!(hub.in_group("conn-alice", &group));

    // The abuse-protection preflight.
    let preflight = app
        .http
        .request(Method::OPTIONS, format!("{}/api/live/events", app.base))
        .header("WebHook-Request-Origin", "chat.webpubsub.azure.com")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::OK);
    assert_eq!(
        preflight.headers()["webhook-allowed-origin"],
        "chat.webpubsub.azure.com"
    );

    // Two connections of bob, signed with the primary key (and a secondary the app does not
    // hold, as the service signs with both).
    let signed = |c: &str| signature(&[key, "the-secondary-key"], c);
    assert_eq!(
        post_event(&app, "connected", "bob", "c1", Some(&signed("c1"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(presence(&app, "alice", &room, "bob").await["state"], "online");
    until_signal(&hub, &room, "bob", "online").await;
    assert!(hub.in_group("conn-alice", &group), "the signal reaches alice's client");
    assert_eq!(
        post_event(&app, "connected", "bob", "c2", Some(&signed("c2"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post_event(&app, "disconnected", "bob", "c1", Some(&signed("c1"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        presence(&app, "alice", &room, "bob").await["state"],
        "online",
        "c2 is open"
    );

    // Forged: another key, another connection's signature, none at all. Nothing changes.
    let forged = signature(&["not-the-key"], "c2");
    assert_eq!(
        post_event(&app, "disconnected", "bob", "c2", Some(&forged)).await,
        StatusCode::UNAUTHORIZED
    );
    let replayed = signed("c1");
    assert_eq!(
        post_event(&app, "disconnected", "bob", "c2", Some(&replayed)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post_event(&app, "disconnected", "bob", "c2", None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post_event(&app, "connected", "mallory", "c9", Some("sha256=00")).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(presence(&app, "alice", &room, "bob").await["state"], "online");

    // The real close of the last connection: away, and the room's group hears it.
    assert_eq!(
        post_event(&app, "disconnected", "bob", "c2", Some(&signed("c2"))).await,
        StatusCode::NO_CONTENT
    );
    let away = presence(&app, "alice", &room, "bob").await;
    assert_eq!(away["state"], "away");
    let signal = until_signal(&hub, &room, "bob", "away").await;
    assert_eq!(signal["lastSeen"], away["lastSeen"]);
    assert_eq!(signal["roomId"], room.as_str());
}

async fn two_processes_on_one_store_agree_on_presence_from_repeated_events(backend: Backend) {
    let (hub, connection) = start_hub(&[]).await;
    let settings = [("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())];
    let first = spawn_app_with(&backend, &settings);
    let second = spawn_app_with(&backend, &settings);
    let room = first.create_room("alice").await;
    first.join("bob", &room).await;
    let signed = |c: &str| signature(&[hub.access_key.as_str()], c);

    // Events of one user's connections reach either process, some twice.
    assert_eq!(
        post_event(&first, "connected", "bob", "c1", Some(&signed("c1"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post_event(&second, "connected", "bob", "c2", Some(&signed("c2"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post_event(&second, "disconnected", "bob", "c1", Some(&signed("c1"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post_event(&first, "connected", "bob", "c1", Some(&signed("c1"))).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(presence(&first, "alice", &room, "bob").await["state"], "online");
    for app in [&first, &second, &first] {
        assert_eq!(
            post_event(app, "disconnected", "bob", "c2", Some(&signed("c2"))).await,
            StatusCode::NO_CONTENT
        );
    }
    assert_eq!(presence(&second, "alice", &room, "bob").await["state"], "away");
    assert_eq!(presence(&first, "alice", &room, "bob").await["state"], "away");
}

async fn a_custom_status_shows_to_room_members_until_cleared(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let set = app
        .act(
            Method::PUT,
            "bob",
            "/me/status",
            json!({ "text": "  in a meeting  ", "emoji": "📅", "expiresAt": until }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    assert_eq!(set.body["status"]["text"], "in a meeting");
    let shown = presence(&app, "alice", &room, "bob").await;
    assert_eq!(shown["status"]["text"], "in a meeting");
    assert_eq!(shown["status"]["emoji"], "📅");
    assert!(shown["status"]["expiresAt"].is_string());
    let mine = app.call(Method::GET, "/api/me/status", Some("bob"), None).await;
    assert_eq!(mine.body["status"]["emoji"], "📅");

    // Markup is plain text here: stored as given, never interpreted (clients escape it).
    let only_emoji = app
        .act(Method::PUT, "bob", "/me/status", json!({ "emoji": "🌴" }))
        .await;
    assert_eq!(only_emoji.status, StatusCode::OK, "{}", only_emoji.body);
    assert_eq!(
        presence(&app, "alice", &room, "bob").await["status"],
        json!({ "emoji": "🌴" })
    );

    let cleared = app.call(Method::DELETE, "/api/me/status", Some("bob"), None).await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.body);
    assert_eq!(cleared.body["status"], Value::Null);
    assert_eq!(presence(&app, "alice", &room, "bob").await["status"], Value::Null);
}

async fn presence_routes_answer_bad_input_with_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let status = format!("{}/api/me/status", app.base);
    let bob = crate::helpers::token("bob");
    let put = |body: Value| app.act(Method::PUT, "bob", "/me/status", body);
    put(json!({})).await.assert_error(422, "VALIDATION");
    put(json!({ "text": "x".repeat(101) }))
        .await
        .assert_error(422, "VALIDATION");
    put(json!({ "text": "   " })).await.assert_error(422, "VALIDATION");
    put(json!({ "text": "a\u{7}b" })).await.assert_error(422, "VALIDATION");
    put(json!({ "emoji": "a b" })).await.assert_error(422, "VALIDATION");
    put(json!({ "emoji": "🙂".repeat(17) }))
        .await
        .assert_error(422, "VALIDATION");
    put(json!({ "text": 5 })).await.assert_error(422, "VALIDATION");
    put(json!({ "text": "x", "state": "online" }))
        .await
        .assert_error(422, "VALIDATION");
    put(json!({ "text": "x", "expiresAt": "2000-01-01T00:00:00Z" }))
        .await
        .assert_error(422, "VALIDATION");
    put(json!({ "text": "x", "expiresAt": "tomorrow" }))
        .await
        .assert_error(422, "VALIDATION");
    let far = (chrono::Utc::now() + chrono::Duration::days(400)).to_rfc3339();
    put(json!({ "text": "x", "expiresAt": far }))
        .await
        .assert_error(422, "VALIDATION");
    let not_json = app
        .http
        .put(&status)
        .bearer_auth(&bob)
        .body("text=hi")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let truncated = app
        .http
        .put(&status)
        .bearer_auth(&bob)
        .header("content-type", "application/json")
        .body("{\"text\":")
        .send()
        .await
        .unwrap();
    assert_eq!(truncated.status(), StatusCode::BAD_REQUEST);
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        app.call(method, "/api/me/status", None, Some(json!({ "text": "x" })))
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    // Nothing was stored by the refusals.
    let mine = app.call(Method::GET, "/api/me/status", Some("bob"), None).await;
    assert_eq!(mine.body["status"], Value::Null);

    // The event handler: no Web PubSub here, so no event is believed; a preflight without an
    // origin is refused.
    assert_eq!(
        post_event(&app, "connected", "bob", "c1", Some(&signature(&["k"], "c1"))).await,
        StatusCode::UNAUTHORIZED
    );
    let bare = app
        .http
        .post(format!("{}/api/live/events", app.base))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    let body: Value = bare.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHORIZED");
    let preflight = app
        .http
        .request(Method::OPTIONS, format!("{}/api/live/events", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::BAD_REQUEST);
    // A stranger's member listing (and so its presence) answers as a missing room.
    app.call(
        Method::GET,
        &format!("/api/rooms/{room}/members"),
        Some("mallory"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}
