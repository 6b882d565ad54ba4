//! Automation events through the real binary: a person's message in a public room publishes
//! one CloudEvents automation event to the automation topic (an Event Grid stand-in in the
//! test that checks the key and the envelope) besides the notification event; a message of an
//! automation, of a webhook or in a private room publishes none, and every message carries
//! its origin, so nothing an automation writes can set an automation off.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::assert_status;
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app_with};

backend_tests!(an_automations_own_message_produces_no_automation_event);

const TOPIC_KEY: &str = "automation-topic-key";

#[derive(Clone, Default)]
struct Topic(Arc<Mutex<Vec<Value>>>);

async fn publish(State(topic): State<Topic>, headers: HeaderMap, body: Bytes) -> AxumStatus {
    if headers.get("aeg-sas-key").and_then(|v| v.to_str().ok()) != Some(TOPIC_KEY) {
        return AxumStatus::UNAUTHORIZED;
    }
    let content_type = headers["content-type"].to_str().unwrap_or_default();
    assert!(
        content_type.starts_with("application/cloudevents+json"),
        "{content_type}"
    );
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["specversion"], "1.0");
    for field in ["id", "source", "type", "subject", "time"] {
        assert!(event[field].is_string(), "CloudEvents requires {field}: {event}");
    }
    topic.0.lock().unwrap().push(event);
    AxumStatus::OK
}

async fn start_topic() -> (Topic, String) {
    let topic = Topic::default();
    let app = axum::Router::new()
        .route("/api/events", axum::routing::post(publish))
        .with_state(topic.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}/api/events", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (topic, url)
}

/// Posts `text` to an inbound webhook's secret URL; the message.
async fn hook_post(app: &TestApp, url: &str, text: &str) -> Value {
    let response = app
        .http
        .post(format!("{}{url}", app.base))
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap();
    let reply = Reply::from(response).await;
    assert_status(&reply, StatusCode::CREATED);
    reply.body
}

async fn new_hook(app: &TestApp, room: &str, body: Value) -> String {
    let created = app
        .act(Method::POST, "alice", &format!("/rooms/{room}/webhooks"), body)
        .await;
    assert_status(&created, StatusCode::CREATED);
    created.body["url"].as_str().unwrap().to_owned()
}

/// Waits (bounded) until the topic took an event of `message`.
async fn wait_for_event(topic: &Topic, message: &str) -> Value {
    for _ in 0..200 {
        if let Some(event) = topic
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["data"]["messageId"] == message)
        {
            return event.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("no automation event for {message}");
}

async fn an_automations_own_message_produces_no_automation_event(backend: Backend) {
    let (topic, url) = start_topic().await;
    let app = spawn_app_with(
        &backend,
        &[
            ("TABLETALK_AUTOMATION_EVENTGRID_ENDPOINT", url.as_str()),
            ("TABLETALK_AUTOMATION_EVENTGRID_KEY", TOPIC_KEY),
        ],
    );
    let room = app.create_room("alice").await;
    let automation = new_hook(&app, &room, json!({ "name": "triage bot", "automation": true })).await;
    let plain = new_hook(&app, &room, json!({ "name": "CI" })).await;

    // The automation's own message and a webhook's: their origin, and no event.
    let by_automation = hook_post(&app, &automation, "triaged").await;
    assert_eq!(by_automation["origin"], "automation");
    let by_webhook = hook_post(&app, &plain, "build passed").await;
    assert_eq!(by_webhook["origin"], "webhook");
    // A person's message in a private room: none either.
    let private = app
        .call(
            Method::POST,
            "/api/rooms",
            Some("alice"),
            Some(json!({ "name": "inner", "visibility": "private" })),
        )
        .await;
    assert_status(&private, StatusCode::CREATED);
    let private_room = private.body["id"].as_str().unwrap().to_owned();
    app.post("alice", &private_room, "between us").await;

    // A person's message in the public room: one event, sent after the others.
    let sent = app.send("alice", &room, "hello automations", None).await;
    assert_status(&sent, StatusCode::CREATED);
    assert_eq!(sent.body["origin"], "user");
    let id = sent.body["id"].as_str().unwrap().to_owned();
    let event = wait_for_event(&topic, &id).await;
    assert_eq!(event["type"], "tabletalk.automation.message.created");
    assert_eq!(event["id"], format!("automation/{room}/{id}"));
    assert_eq!(event["subject"], format!("rooms/{room}/messages/{id}"));
    assert_eq!(event["data"]["roomId"], room.as_str());
    assert_eq!(event["data"]["origin"], "user");
    assert_eq!(event["data"]["preview"], "hello automations");

    // One more person's message, so whatever the earlier sends published has arrived.
    let last = app.send("alice", &room, "one more", None).await;
    wait_for_event(&topic, last.body["id"].as_str().unwrap()).await;
    let events = topic.0.lock().unwrap().clone();
    let about: Vec<&str> = events
        .iter()
        .map(|e| e["data"]["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(about.len(), 2, "only the person's two messages: {events:?}");
    for silent in [&by_automation, &by_webhook] {
        assert!(!about.contains(&silent["id"].as_str().unwrap()));
    }

    // Reads tell the origin too.
    let messages = app.read_all("alice", &room, "asc", 100).await;
    let origin_of = |id: &Value| {
        messages
            .iter()
            .find(|m| m["id"] == *id)
            .map(|m| m["origin"].clone())
            .unwrap()
    };
    assert_eq!(origin_of(&by_automation["id"]), "automation");
    assert_eq!(origin_of(&by_webhook["id"]), "webhook");
    assert_eq!(origin_of(&json!(id)), "user");
}
