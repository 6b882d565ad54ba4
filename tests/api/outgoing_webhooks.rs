//! Outgoing webhooks through the real binary, against a receiver in the test (a real local
//! HTTP server) that verifies every signature and dedupes by the delivery id: it sees each
//! message event (created, edited, deleted) exactly once through an outage of several minutes
//! on the test clock, with two processes' timers delivering at once and an answer lost after
//! the receiver acted; an endpoint failing for a day is disabled, its deliveries abandoned,
//! and its managers told. Bad input on every route is a documented 4xx.

use crate::helpers::TestClock;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use tabletalk::config::DEVELOPMENT_JWT_SECRET;

use crate::helpers::messages::{assert_status, delete_message, edit};
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    the_receiver_sees_each_event_once_with_a_valid_signature_through_an_outage,
    a_long_markdown_message_is_stored_and_delivered_as_its_rendering,
    an_endpoint_failing_for_a_day_is_disabled_and_its_managers_told,
    bad_input_on_the_outgoing_webhook_routes_is_a_documented_4xx,
    an_endpoint_gets_nothing_once_its_maker_is_banned,
    a_message_deleted_or_erased_before_its_delivery_is_never_posted,
);

/// A Functions custom handler on this clock, reaching the loopback receiver.
fn handler(clock: &TestClock, backend: &Backend) -> TestApp {
    spawn_app_with(
        backend,
        &[
            ("TABLETALK_JWT_SECRET", DEVELOPMENT_JWT_SECRET),
            ("TABLETALK_TEST_CLOCK_FILE", clock.path.to_str().unwrap()),
            ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "true"),
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "0"),
        ],
    )
}

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    delivery: String,
    answered: u16,
}

#[derive(Default)]
struct ReceiverState {
    secret: String,
    up: bool,
    /// Deliveries to act on and then answer 500, as if the answer was lost.
    lose_answer_of_next: usize,
    hits: Vec<Hit>,
    bad_signatures: Vec<String>,
    /// The events handled, by delivery id: what a receiver that dedupes keeps.
    handled: HashMap<String, Value>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<ReceiverState>>);

impl Receiver {
    fn state(&self) -> std::sync::MutexGuard<'_, ReceiverState> {
        self.0.lock().unwrap()
    }
}

/// Verifies `t=<unix>,v1=<hex>` over `<t>.<body>`, as docs/OUTGOING_WEBHOOKS.md tells.
fn signature_is_valid(secret: &str, header: &str, body: &[u8]) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = Some(value.to_owned()),
            Some(("v1", value)) => v1 = Some(value.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else { return false };
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    expected == v1
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> AxumStatus {
    let mut state = receiver.state();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let delivery = header("x-tabletalk-delivery");
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !signature_is_valid(&state.secret, &header("x-tabletalk-signature"), &body)
        || parsed["id"] != delivery.as_str()
        || parsed["type"] != header("x-tabletalk-event").as_str()
    {
        state.bad_signatures.push(delivery.clone());
        return AxumStatus::UNAUTHORIZED;
    }
    let answered = if !state.up {
        AxumStatus::SERVICE_UNAVAILABLE
    } else {
        state.handled.entry(delivery.clone()).or_insert(parsed);
        if state.lose_answer_of_next > 0 {
            state.lose_answer_of_next -= 1;
            AxumStatus::INTERNAL_SERVER_ERROR
        } else {
            AxumStatus::OK
        }
    };
    state.hits.push(Hit {
        delivery,
        answered: answered.as_u16(),
    });
    answered
}

async fn start_receiver() -> (Receiver, String) {
    let receiver = Receiver::default();
    receiver.state().up = true;
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (receiver, url)
}

/// Runs the timer until the receiver has handled `count` events (a nudged run in the
/// background may be holding one); bounded.
async fn deliver_until(app: &TestApp, receiver: &Receiver, count: usize) {
    for _ in 0..50 {
        if receiver.state().handled.len() >= count {
            return;
        }
        app.run_timer("deliverWebhooks").await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "the receiver handled {} events, not {count}",
        receiver.state().handled.len()
    );
}

async fn register(app: &TestApp, user: &str, room: &str, body: Value) -> Reply {
    app.act(Method::POST, user, &format!("/rooms/{room}/outgoing-webhooks"), body)
        .await
}

async fn hooks(app: &TestApp, room: &str) -> Vec<Value> {
    let reply = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/outgoing-webhooks"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body.as_array().unwrap().clone()
}

async fn deliveries(app: &TestApp, room: &str, id: &str) -> Vec<Value> {
    let path = format!("/api/rooms/{room}/outgoing-webhooks/{id}/deliveries");
    let reply = app.call(Method::GET, &path, Some("alice"), None).await;
    assert_status(&reply, StatusCode::OK);
    reply.body.as_array().unwrap().clone()
}

/// Registers the receiver for `room`; the endpoint's id. The secret goes to the receiver.
async fn register_receiver(app: &TestApp, room: &str, receiver: &Receiver, url: &str) -> String {
    let created = register(app, "alice", room, json!({ "url": url })).await;
    assert_status(&created, StatusCode::CREATED);
    let secret = created.body["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(
        created.body["events"],
        json!(["message.created", "message.edited", "message.deleted"])
    );
    assert_eq!(created.body["status"], "active");
    receiver.state().secret = secret.to_owned();
    let listed = hooks(app, room).await;
    assert_eq!(listed.len(), 1);
    assert!(
        listed[0].get("secret").is_none(),
        "the secret is shown once: {}",
        listed[0]
    );
    created.body["id"].as_str().unwrap().to_owned()
}

/// The longest Markdown a message may have, of characters JSON escapes: its event row and
/// its delivery hold the rendering (not the source too), within a property of 32 Ki.
async fn a_long_markdown_message_is_stored_and_delivered_as_its_rendering(backend: Backend) {
    let clock = TestClock::new();
    let app = handler(&clock, &backend);
    let (receiver, url) = start_receiver().await;
    let room = app.create_room("alice").await;
    register_receiver(&app, &room, &receiver, &url).await;
    let source = "\"".repeat(9_000);
    let sent = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/messages"),
            json!({ "text": source, "format": "markdown" }),
        )
        .await;
    assert_status(&sent, StatusCode::CREATED);
    deliver_until(&app, &receiver, 1).await;
    let state = receiver.state();
    let event = state.handled.values().next().unwrap();
    let message = &event["message"];
    assert_eq!(message["text"], sent.body["text"], "{}", &event.to_string()[..200]);
    assert!(message.get("source").is_none(), "the source stays home");
}

async fn the_receiver_sees_each_event_once_with_a_valid_signature_through_an_outage(backend: Backend) {
    let mut clock = TestClock::new();
    let (a, b) = (handler(&clock, &backend), handler(&clock, &backend));
    let (receiver, url) = start_receiver().await;
    let room = a.create_room("alice").await;
    let hook = register_receiver(&a, &room, &receiver, &url).await;

    let first = a.post("alice", &room, "first").await;
    deliver_until(&a, &receiver, 1).await;

    // The outage: a new message, an edit and a delete while every attempt fails, for six
    // minutes of the test clock, with both processes' timers running.
    receiver.state().up = false;
    let second = a.post("alice", &room, "second").await;
    assert_status(&edit(&a, "alice", &room, &first, "first, edited").await, StatusCode::OK);
    assert_status(
        &delete_message(&a, "alice", &room, &second).await,
        StatusCode::NO_CONTENT,
    );
    for _ in 0..12 {
        tokio::join!(a.run_timer("deliverWebhooks"), b.run_timer("deliverWebhooks"));
        clock.advance_s(30);
    }
    let failed = receiver.state().hits.iter().filter(|h| h.answered == 503).count();
    assert!(failed >= 3, "the endpoint was tried through the outage: {failed}");
    let during = hooks(&a, &room).await;
    assert_eq!(during[0]["status"], "active");
    assert_eq!(during[0]["lastDelivery"]["status"], "pending", "{}", during[0]);
    assert_eq!(during[0]["lastDelivery"]["statusCode"], 503);
    assert!(during[0]["failingSince"].is_string());
    let pending = deliveries(&a, &room, &hook).await;
    assert!(
        pending
            .iter()
            .any(|d| d["status"] == "pending" && d["attempts"].as_u64() > Some(1))
    );

    // Back up; the first answer is lost after the receiver acted, so that delivery comes again.
    {
        let mut state = receiver.state();
        state.up = true;
        state.lose_answer_of_next = 1;
    }
    for _ in 0..20 {
        if receiver.state().handled.len() >= 3 && pending_count(&a, &room, &hook).await == 0 {
            break;
        }
        clock.advance_s(300);
        tokio::join!(a.run_timer("deliverWebhooks"), b.run_timer("deliverWebhooks"));
    }

    let state = receiver.state();
    assert!(
        state.bad_signatures.is_empty(),
        "bad signatures: {:?}",
        state.bad_signatures
    );
    let mut events: Vec<(String, String)> = state
        .handled
        .values()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["message"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    events.sort();
    // The second message was deleted before its creation could be posted: that delivery was
    // abandoned with its text, and the endpoint hears of the deletion alone.
    let mut expected = vec![
        ("message.created".to_owned(), first.clone()),
        ("message.edited".to_owned(), first.clone()),
        ("message.deleted".to_owned(), second.clone()),
    ];
    expected.sort();
    assert_eq!(events, expected, "each event exactly once after dedupe by id");
    let edited = state.handled.values().find(|e| e["type"] == "message.edited").unwrap();
    assert!(edited["message"]["text"].as_str().unwrap().contains("first, edited"));
    assert_eq!(edited["message"]["origin"], "user");
    assert_eq!(edited["roomId"], room.as_str());
    let ok: Vec<&Hit> = state.hits.iter().filter(|h| h.answered == 200).collect();
    let mut once: Vec<&str> = ok.iter().map(|h| h.delivery.as_str()).collect();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), ok.len(), "a delivery answered 2xx is never posted again");
    assert!(
        state.hits.iter().any(|h| h.answered == 500),
        "one answer was lost, so one delivery came twice"
    );
    drop(state);

    let listed = deliveries(&a, &room, &hook).await;
    assert_eq!(listed.len(), 4);
    let (abandoned, delivered): (Vec<&Value>, Vec<&Value>) = listed
        .iter()
        .partition(|d| d["event"] == "message.created" && d["messageId"] == second.as_str());
    assert_eq!(abandoned[0]["status"], "abandoned", "{listed:?}");
    assert!(
        delivered
            .iter()
            .all(|d| d["status"] == "delivered" && d["statusCode"] == 200),
        "{listed:?}"
    );
    let after = hooks(&a, &room).await;
    assert_eq!(after[0]["lastDelivery"]["status"], "delivered");
    assert!(after[0].get("failingSince").is_none(), "{}", after[0]);
}

async fn pending_count(app: &TestApp, room: &str, hook: &str) -> usize {
    deliveries(app, room, hook)
        .await
        .iter()
        .filter(|d| d["status"] == "pending")
        .count()
}

async fn an_endpoint_failing_for_a_day_is_disabled_and_its_managers_told(backend: Backend) {
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let (receiver, url) = start_receiver().await;
    receiver.state().up = false;
    let room = app.create_room("alice").await;
    let hook = register_receiver(&app, &room, &receiver, &url).await;
    app.post("alice", &room, "nobody hears this").await;
    app.run_timer("deliverWebhooks").await;
    // Hourly for 23 hours: failing, still active.
    for _ in 0..23 {
        clock.advance_s(3600 + 1);
        app.run_timer("deliverWebhooks").await;
    }
    assert_eq!(hooks(&app, &room).await[0]["status"], "active");
    // Past a day of failures: disabled.
    for _ in 0..2 {
        clock.advance_s(3600 + 1);
        app.run_timer("deliverWebhooks").await;
    }
    let listed = hooks(&app, &room).await;
    assert_eq!(listed[0]["status"], "disabled", "{}", listed[0]);
    assert!(listed[0]["disabledAt"].is_string());
    app.run_timer("deliverWebhooks").await;
    let abandoned = deliveries(&app, &room, &hook).await;
    assert_eq!(abandoned.len(), 1);
    assert_eq!(abandoned[0]["status"], "abandoned", "{abandoned:?}");
    assert!(abandoned[0]["attempts"].as_u64().unwrap() >= 20);

    // The managers are told in the room, with no URL in the line.
    let messages = app.read_all("alice", &room, "asc", 100).await;
    let notice = messages
        .iter()
        .find(|m| m["type"] == "System" && m["text"].as_str().unwrap().contains("outgoing webhook was disabled"))
        .expect("a System line tells the room's managers");
    assert!(!notice["text"].as_str().unwrap().contains("127.0.0.1"));

    // Nothing is posted to it any more.
    let hits = receiver.state().hits.len();
    receiver.state().up = true;
    app.post("alice", &room, "after").await;
    clock.advance_s(3600);
    app.run_timer("deliverWebhooks").await;
    app.run_timer("deliverWebhooks").await;
    assert_eq!(receiver.state().hits.len(), hits);
    assert!(receiver.state().bad_signatures.is_empty());
}

async fn bad_input_on_the_outgoing_webhook_routes_is_a_documented_4xx(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let long = format!("https://example.com/{}", "a".repeat(2100));
    // Public HTTPS only, as for push endpoints (this server allows no private ones).
    for (body, status, code) in [
        (json!({ "url": "not a url" }), 422, "VALIDATION"),
        (json!({ "url": "" }), 422, "VALIDATION"),
        (json!({ "url": "http://example.com/hook" }), 422, "VALIDATION"),
        (json!({ "url": "ftp://example.com/hook" }), 422, "VALIDATION"),
        (json!({ "url": "https://user:pw@example.com/hook" }), 422, "VALIDATION"),
        (json!({ "url": "https://127.0.0.1/hook" }), 422, "VALIDATION"),
        (json!({ "url": "https://169.254.169.254/latest" }), 422, "VALIDATION"),
        (json!({ "url": "https://localhost/hook" }), 422, "VALIDATION"),
        (json!({ "url": long }), 422, "VALIDATION"),
        (
            json!({ "url": "https://example.com/hook", "events": [] }),
            422,
            "VALIDATION",
        ),
    ] {
        register(&app, "alice", &room, body.clone())
            .await
            .assert_error(status, code);
    }
    for body in [
        json!({}),
        json!({ "url": 5 }),
        json!({ "url": "https://example.com/hook", "events": ["message.exploded"] }),
        json!({ "url": "https://example.com/hook", "secret": "mine" }),
        json!([]),
    ] {
        let reply = register(&app, "alice", &room, body.clone()).await;
        assert!(reply.status.is_client_error(), "{body}: {}", reply.body);
        assert!(
            reply.body["code"].is_string() && reply.body["message"].is_string(),
            "{}",
            reply.body
        );
    }
    let not_json = app
        .http
        .post(format!("{}/api/rooms/{room}/outgoing-webhooks", app.base))
        .bearer_auth(crate::helpers::token("alice"))
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert!(not_json.status().is_client_error());

    // Who may: ManageWebhooks; a stranger sees no room.
    let ok = json!({ "url": "https://example.com/hook" });
    register(&app, "bob", &room, ok.clone())
        .await
        .assert_error(403, "FORBIDDEN");
    register(&app, "mallory", &room, ok.clone())
        .await
        .assert_error(404, "NOT_FOUND");
    for path in [
        format!("/api/rooms/{room}/outgoing-webhooks"),
        format!("/api/rooms/{room}/outgoing-webhooks/{}/deliveries", "0".repeat(32)),
    ] {
        app.call(Method::GET, &path, Some("mallory"), None)
            .await
            .assert_error(404, "NOT_FOUND");
        app.call(Method::GET, &path, Some("bob"), None)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    register(&app, "alice", "not-a-room", ok.clone())
        .await
        .assert_error(404, "NOT_FOUND");

    // Ids that name nothing, or cannot name anything: 404.
    for id in ["0".repeat(32), "x".into(), "ZZ%20".into(), "a".repeat(200)] {
        app.call(
            Method::DELETE,
            &format!("/api/rooms/{room}/outgoing-webhooks/{id}"),
            Some("alice"),
            None,
        )
        .await
        .assert_error(404, "NOT_FOUND");
        app.call(
            Method::GET,
            &format!("/api/rooms/{room}/outgoing-webhooks/{id}/deliveries"),
            Some("alice"),
            None,
        )
        .await
        .assert_error(404, "NOT_FOUND");
    }

    // At most ten per room; a deleted one is gone.
    let mut ids = Vec::new();
    for _ in 0..10 {
        let created = register(&app, "alice", &room, ok.clone()).await;
        assert_status(&created, StatusCode::CREATED);
        ids.push(created.body["id"].as_str().unwrap().to_owned());
    }
    register(&app, "alice", &room, ok.clone())
        .await
        .assert_error(409, "CONFLICT");
    let path = format!("/api/rooms/{room}/outgoing-webhooks/{}", ids[0]);
    let deleted = app.call(Method::DELETE, &path, Some("alice"), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    app.call(Method::DELETE, &path, Some("alice"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::GET, &format!("{path}/deliveries"), Some("alice"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(hooks(&app, &room).await.len(), 9);
    app.call(Method::GET, &format!("/api/rooms/{room}/outgoing-webhooks"), None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

/// An outgoing webhook acts with its maker's standing: once its maker is banned, the room's
/// messages no longer reach it (what waits for it is abandoned), while another manager's
/// endpoint in the same room goes on receiving them.
async fn an_endpoint_gets_nothing_once_its_maker_is_banned(backend: Backend) {
    let clock = TestClock::new();
    let app = handler(&clock, &backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.grant("alice", &room, "bob", &["ManageWebhooks"], 10).await;
    let (bobs, bobs_url) = start_receiver().await;
    let (alices, alices_url) = start_receiver().await;
    for (user, receiver, url) in [("bob", &bobs, &bobs_url), ("alice", &alices, &alices_url)] {
        let created = register(&app, user, &room, json!({ "url": url })).await;
        assert_status(&created, StatusCode::CREATED);
        receiver.state().secret = created.body["secret"].as_str().unwrap().to_owned();
    }
    app.post("alice", &room, "before").await;
    deliver_until(&app, &bobs, 1).await;
    deliver_until(&app, &alices, 1).await;

    let banned = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/bob/ban"),
            json!({}),
        )
        .await;
    assert!(banned.status.is_success(), "{}", banned.body);
    app.post("alice", &room, "after the ban").await;
    deliver_until(&app, &alices, 2).await;
    for _ in 0..3 {
        app.run_timer("deliverWebhooks").await;
    }
    assert_eq!(bobs.state().handled.len(), 1, "the banned maker's endpoint got more");
    assert!(
        !bobs
            .state()
            .handled
            .values()
            .any(|event| event.to_string().contains("after the ban")),
        "the banned maker's endpoint got the room's message"
    );
}

/// A message deleted, or erased with its author, while its delivery waits (the endpoint is
/// down) is never posted: the waiting delivery is abandoned and its body dropped, and the
/// endpoint gets the deletion alone once it is back.
async fn a_message_deleted_or_erased_before_its_delivery_is_never_posted(backend: Backend) {
    let mut clock = TestClock::new();
    let app = handler(&clock, &backend);
    let (receiver, url) = start_receiver().await;
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let hook = register_receiver(&app, &room, &receiver, &url).await;

    receiver.state().up = false;
    let deleted = app.post("alice", &room, "words deleted before delivery").await;
    app.post("bob", &room, "words erased before delivery").await;
    app.run_timer("deliverWebhooks").await;
    assert_status(
        &delete_message(&app, "alice", &room, &deleted).await,
        StatusCode::NO_CONTENT,
    );
    let erase = app.call(Method::POST, "/api/me/erase", Some("bob"), None).await;
    assert!(erase.status.is_success(), "{}", erase.body);
    for _ in 0..600 {
        let status = app.call(Method::GET, "/api/me/erase", Some("bob"), None).await;
        if status.body["status"] == "done" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    receiver.state().up = true;
    clock.advance_s(3600);
    deliver_until(&app, &receiver, 2).await;
    for _ in 0..3 {
        app.run_timer("deliverWebhooks").await;
    }
    let handled: Vec<Value> = receiver.state().handled.values().cloned().collect();
    let kinds: Vec<&str> = handled.iter().map(|event| event["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["message.deleted", "message.deleted"], "{handled:?}");
    assert!(
        !handled
            .iter()
            .any(|event| event.to_string().contains("before delivery")),
        "a deleted text was posted: {handled:?}"
    );
    let listed = deliveries(&app, &room, &hook).await;
    let abandoned = listed
        .iter()
        .filter(|d| d["event"] == "message.created" && d["status"] == "abandoned");
    assert_eq!(abandoned.count(), 2, "{listed:?}");
}
