//! Events that are never lost, end to end: the binary runs as a Functions custom handler
//! publishing to an Event Grid stand-in (which checks the key and the CloudEvents envelope and
//! delivers each event back as the Functions host invokes an `eventGridTrigger`), with a push
//! service that decrypts every push. Also the notification webhook's handshakes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::get_message;
use crate::helpers::{Backend, TestApp, TestClock, backend_tests, spawn_app_with, spawn_push_handler};
use crate::push::{Device, Service, decrypt, start_service, subscribe, wait_for};

backend_tests!(an_event_grid_outage_loses_no_event_and_repeats_push_nothing);

const TOPIC_KEY: &str = "test-topic-key";

/// The Event Grid stand-in: accepts CloudEvents with the topic key, then delivers each to the
/// app's `notify` function in the Functions host's invocation payload.
#[derive(Clone)]
struct Topic {
    accepted: Arc<Mutex<Vec<Value>>>,
    invocations: Arc<Mutex<Vec<u16>>>,
    app: String,
}

async fn publish(State(topic): State<Topic>, headers: HeaderMap, body: Bytes) -> AxumStatus {
    if headers.get("aeg-sas-key").and_then(|v| v.to_str().ok()) != Some(TOPIC_KEY) {
        return AxumStatus::UNAUTHORIZED;
    }
    let content_type = headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("application/cloudevents+json"),
        "{content_type}"
    );
    let event: Value = serde_json::from_slice(&body).unwrap();
    for field in ["id", "source", "type"] {
        assert!(event[field].is_string(), "CloudEvents requires {field}: {event}");
    }
    assert_eq!(event["specversion"], "1.0");
    topic.accepted.lock().unwrap().push(event.clone());
    // Delivered after accepting, as Event Grid does; the host double-encodes the event.
    tokio::spawn(async move {
        let status = invoke(&topic.app, "notify", json!({ "eventGridEvent": event.to_string() })).await;
        topic.invocations.lock().unwrap().push(status.0);
    });
    AxumStatus::OK
}

/// Invokes a function as the Functions host does (`POST /<name>`); returns the
/// status and the invocation response.
async fn invoke(app: &str, function: &str, data: Value) -> (u16, Value) {
    let payload = json!({
        "Data": data,
        "Metadata": { "sys": { "MethodName": function, "UtcNow": chrono::Utc::now(), "RandGuid": "x" } }
    });
    let response = reqwest::Client::new()
        .post(format!("{app}/{function}"))
        .json(&payload)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The pushes `device` received, decrypted.
fn pushes_to(service: &Service, device: &Device) -> Vec<Value> {
    service
        .received
        .lock()
        .unwrap()
        .iter()
        .filter(|push| push.device == device.name)
        .map(|push| serde_json::from_slice(&decrypt(&device.secret, &device.auth, &push.body)).unwrap())
        .collect()
}

/// Event Grid is down when the message is sent: the send succeeds and the message is stored.
/// Once the topic is back, the timer republishes the event and exactly one push arrives; the
/// event delivered again (trigger and webhook) pushes nothing more.
async fn an_event_grid_outage_loses_no_event_and_repeats_push_nothing(backend: Backend) {
    let (service, push_addr) = start_service().await;
    // Event Grid is unreachable: every connection to it is dropped before a byte of answer
    // (counted, so the test knows the send's own attempt has failed).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let topic_addr: SocketAddr = listener.local_addr().unwrap();
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reachable = Arc::new(tokio::sync::Notify::new());
    let endpoint = format!("http://{topic_addr}/api/events");
    // The outbox's age is read on the server's clock, which the test moves.
    let mut clock = TestClock::new();
    let mut settings = clock.settings().to_vec();
    settings.extend([
        ("TABLETALK_EVENTGRID_ENDPOINT", endpoint.as_str()),
        ("TABLETALK_EVENTGRID_KEY", TOPIC_KEY),
    ]);
    let app = spawn_push_handler(&backend, &settings);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let bobs = Device::new("bob", push_addr);
    subscribe(&app, "bob", &bobs).await;

    let topic = Topic {
        accepted: Arc::default(),
        invocations: Arc::default(),
        app: app.base.clone(),
    };
    let router = axum::Router::new()
        .route("/api/events", axum::routing::post(publish))
        .with_state(topic.clone());
    let (counter, switch) = (Arc::clone(&dropped), Arc::clone(&reachable));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    drop(accepted);
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                _ = switch.notified() => break,
            }
        }
        axum::serve(listener, router).await.unwrap()
    });

    let id = app.post("alice", &room, "<p>are you there?</p>").await;
    let stored = get_message(&app, "bob", &room, &id).await;
    assert_eq!(stored.status, StatusCode::OK, "{backend:?}: the message is stored");
    assert_eq!(
        app.run_timer("republishEvents").await,
        "republished 0 events",
        "{backend:?}: too young to republish"
    );

    // The send's own attempt failed; Event Grid comes back, and once the event is old
    // enough the timer publishes it.
    for _ in 0..200 {
        if dropped.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the send tried Event Grid"
    );
    // A little longer, so no retry of that attempt can reach the topic once it is back.
    tokio::time::sleep(Duration::from_secs(1)).await;
    reachable.notify_one();
    // Past the outbox's five seconds, on the server's clock.
    clock.advance_ms(6000);
    assert!(
        topic.accepted.lock().unwrap().is_empty(),
        "{backend:?}: nothing published yet"
    );
    assert_eq!(app.run_timer("republishEvents").await, "republished 1 events");
    let received = wait_for(&service, 1).await;
    assert_eq!(received.len(), 1, "{backend:?}: exactly one push");
    let pushes = pushes_to(&service, &bobs);
    assert_eq!(pushes[0]["messageId"], id.as_str());
    assert_eq!(pushes[0]["preview"], "are you there?");
    assert_eq!(*topic.invocations.lock().unwrap(), [200]);
    let event = topic.accepted.lock().unwrap()[0].clone();
    assert_eq!(event["id"], format!("{room}/{id}"));
    assert_eq!(event["type"], "tabletalk.message.created");

    // Nothing is left to republish, and every repeat of the event is absorbed.
    assert_eq!(app.run_timer("republishEvents").await, "republished 0 events");
    let (status, _) = invoke(&app.base, "notify", json!({ "eventGridEvent": event })).await;
    assert_eq!(status, 200);
    let webhook = app
        .http
        .post(format!("{}/api/events/notifications", app.base))
        .header("content-type", "application/cloudevents+json; charset=utf-8")
        .body(event.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(webhook.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        service.received.lock().unwrap().len(),
        1,
        "{backend:?}: a repeated event pushes nothing"
    );
    assert_eq!(topic.accepted.lock().unwrap().len(), 1);
}

/// The webhook form of the notification function: Event Grid's validation handshake, the
/// CloudEvents preflight, and clear refusals of what is not an event.
#[tokio::test]
async fn the_notification_webhook_answers_event_grid() {
    let app = spawn_app_with(&Backend::embedded(), &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")]);
    let url = format!("{}/api/events/notifications", app.base);
    let handshake = json!([{
        "id": "1", "topic": "t", "subject": "", "eventTime": "2026-11-30T00:00:00Z", "dataVersion": "1",
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "data": { "validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6", "validationUrl": "https://example.invalid" }
    }]);
    let reply = app
        .http
        .post(&url)
        .header("aeg-event-type", "SubscriptionValidation")
        .json(&handshake)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["validationResponse"], "512d38b6-c7b8-40c8-89fe-f46f9e9622b6");

    let preflight = app
        .http
        .request(Method::OPTIONS, &url)
        .header("WebHook-Request-Origin", "eventgrid.azure.net")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::OK);
    assert_eq!(preflight.headers()["webhook-allowed-origin"], "eventgrid.azure.net");
    let bare = app.http.request(Method::OPTIONS, &url).send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::BAD_REQUEST);

    for garbage in ["not json", "42", r#"{"type":"tabletalk.message.created"}"#] {
        let reply = app.http.post(&url).body(garbage).send().await.unwrap();
        assert_eq!(reply.status(), StatusCode::BAD_REQUEST, "{garbage}");
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["code"], "BAD_REQUEST", "{garbage}");
    }
    let other = json!({ "specversion": "1.0", "id": "x", "source": "s", "type": "other.event", "data": {} });
    let reply = app.http.post(&url).json(&other).send().await.unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    assert_eq!(reply.json::<Value>().await.unwrap()["processed"], 0);
}

/// An event is only a pointer: a forged one pushes the stored message (its sender and text),
/// one naming no message pushes nothing, and the same event delivered three times at once —
/// while the first run is still pushing — pushes once.
#[tokio::test]
async fn forged_and_concurrent_deliveries_push_the_stored_message_once() {
    let backend = Backend::embedded();
    let (service, push_addr) = start_service().await;
    let bobs = Device::new("bob", push_addr);
    // Sent while push was not configured, so no event was processed for it.
    let (room, id) = {
        let app = spawn_app_with(&backend, &[]);
        let room = app.create_room("alice").await;
        app.join("bob", &room).await;
        (room.clone(), app.post("alice", &room, "<p>the real text</p>").await)
    };
    let app = spawn_push_handler(&backend, &[]);
    subscribe(&app, "bob", &bobs).await;
    let forged = |message: &str| {
        json!({ "specversion": "1.0", "id": format!("{room}/{message}"), "source": "/x",
            "type": "tabletalk.message.created",
            "data": { "id": format!("{room}/{message}"), "roomId": room, "messageId": message,
                "senderId": "mallory", "senderName": "Mallory", "preview": "click here" } })
    };
    let (status, _) = invoke(
        &app.base,
        "notify",
        json!({ "eventGridEvent": forged("2516062669865313804") }),
    )
    .await;
    assert_eq!(status, 200, "an event naming no message is dropped, not retried");

    *service.delay.lock().unwrap() = Duration::from_millis(700);
    let event = forged(&id).to_string();
    let runs = futures::future::join_all(
        (0..3).map(|_| invoke(&app.base, "notify", json!({ "eventGridEvent": event.clone() }))),
    )
    .await;
    let statuses: Vec<u16> = runs.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 500),
        "the busy ones fail, to be retried: {statuses:?}"
    );
    // Event Grid retries the failed deliveries later (refused while the first run still
    // pushes): they find the event done.
    let mut retried = invoke(&app.base, "notify", json!({ "eventGridEvent": event.clone() })).await;
    for _ in 0..100 {
        if retried.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        retried = invoke(&app.base, "notify", json!({ "eventGridEvent": event.clone() })).await;
    }
    let (status, response) = retried;
    assert_eq!(status, 200, "{response}");
    assert!(
        response["Logs"][0].as_str().unwrap().contains("repeat: true"),
        "{response}"
    );

    let pushes = pushes_to(&service, &bobs);
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    assert_eq!(pushes[0]["messageId"], id.as_str());
    assert_eq!(
        pushes[0]["preview"], "the real text",
        "the stored text, not the event's"
    );
    assert_eq!(pushes[0]["senderName"], "alice (test)");
}

/// Delivers `event` to the notification webhook as Event Grid does; returns the status.
async fn deliver_to_webhook(app: &TestApp, event: &Value) -> u16 {
    app.http
        .post(format!("{}/api/events/notifications", app.base))
        .header("content-type", "application/cloudevents+json; charset=utf-8")
        .body(event.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A message sent while push was off, and an app with push on, a claim lease of one second
/// and `devices` of bob's subscribed to `service`: the CloudEvent of the message.
async fn slow_fan_out(backend: &Backend, service: &Service, devices: &[Device]) -> (TestApp, Value) {
    let (room, id) = {
        let app = spawn_app_with(backend, &[]);
        let room = app.create_room("alice").await;
        app.join("bob", &room).await;
        (room.clone(), app.post("alice", &room, "<p>slow</p>").await)
    };
    let app = spawn_push_handler(backend, &[("TABLETALK_PUSH_CLAIM_LEASE_SECONDS", "1")]);
    for device in devices {
        subscribe(&app, "bob", device).await;
    }
    // Each push takes the push service five seconds: far longer than the lease.
    *service.delay.lock().unwrap() = Duration::from_secs(5);
    let event = json!({ "specversion": "1.0", "id": format!("{room}/{id}"), "source": "/x",
        "type": "tabletalk.message.created",
        "data": { "id": format!("{room}/{id}"), "roomId": room, "messageId": id,
            "senderId": "alice", "senderName": "alice", "preview": "slow" } });
    (app, event)
}

/// Redelivers `event` as Event Grid retries a failed delivery, until one succeeds.
async fn redeliver_until_accepted(app: &TestApp, event: &Value) {
    for _ in 0..100 {
        if deliver_to_webhook(app, event).await == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the event was never accepted");
}

/// Event Grid waits 30 s for the webhook's answer: a fan-out to slow endpoints is answered as
/// soon as the event is claimed and recorded, and the pushes still arrive.
#[tokio::test]
async fn the_webhook_answers_before_a_slow_fan_out() {
    let backend = Backend::embedded();
    let (service, push_addr) = start_service().await;
    let devices = [
        Device::new("bob-phone", push_addr),
        Device::new("bob-laptop", push_addr),
    ];
    let (app, event) = slow_fan_out(&backend, &service, &devices).await;
    assert_eq!(deliver_to_webhook(&app, &event).await, 200);
    assert_eq!(
        *service.answered.lock().unwrap(),
        0,
        "the webhook waited for the push service's answers"
    );
    redeliver_until_accepted(&app, &event).await;
    let received = service.received.lock().unwrap().clone();
    let mut devices: Vec<&str> = received.iter().map(|push| push.device.as_str()).collect();
    devices.sort();
    assert_eq!(devices, ["bob-laptop", "bob-phone"], "each device pushed once");
    assert_eq!(*service.answered.lock().unwrap(), 2);
}

/// A delivery still pushing when its claim's first lease runs out keeps the event: a
/// redelivery arriving then (Event Grid gave up waiting) is refused as busy, not run again.
#[tokio::test]
async fn a_redelivery_after_the_lease_would_have_expired_pushes_nothing_again() {
    let backend = Backend::embedded();
    let (service, push_addr) = start_service().await;
    let devices = [
        Device::new("bob-phone", push_addr),
        Device::new("bob-laptop", push_addr),
    ];
    let (app, event) = slow_fan_out(&backend, &service, &devices).await;
    // The first delivery, whose answer Event Grid does not wait for.
    let first = {
        let (base, event) = (app.base.clone(), event.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/api/events/notifications"))
                .header("content-type", "application/cloudevents+json; charset=utf-8")
                .body(event.to_string())
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    for _ in 0..200 {
        if service.received.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(service.received.lock().unwrap().len(), 2, "both pushes are in flight");
    // Past the one-second lease the claim was first taken with; the pushes are still running.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(*service.answered.lock().unwrap(), 0, "the pushes are still in flight");
    assert_ne!(
        deliver_to_webhook(&app, &event).await,
        200,
        "a redelivery while the first run pushes is refused, to be retried"
    );
    redeliver_until_accepted(&app, &event).await;
    assert_eq!(first.await.unwrap().unwrap(), 200);
    let received = service.received.lock().unwrap().len();
    assert_eq!(received, 2, "the redelivery pushed again");
}

/// Once the webhook has answered, Event Grid will not deliver the event again: if the process
/// dies mid-fan-out (recycled, scaled in), the event waits in the outbox, and once the dead
/// run's claim has lapsed the timer republishes it and it is pushed.
#[tokio::test]
async fn a_fan_out_cut_short_after_the_answer_is_republished() {
    let backend = Backend::embedded();
    let (service, push_addr) = start_service().await;
    let devices = [Device::new("bob-phone", push_addr)];
    let started = Instant::now();
    let (app, event) = slow_fan_out(&backend, &service, &devices).await;
    assert_eq!(deliver_to_webhook(&app, &event).await, 200);
    for _ in 0..200 {
        if !service.received.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(service.received.lock().unwrap().len(), 1, "the push is in flight");
    drop(app); // the process dies before the push service answers
    *service.delay.lock().unwrap() = Duration::ZERO;

    let mut clock = TestClock::new();
    let mut settings = clock.settings().to_vec();
    settings.push(("TABLETALK_PUSH_CLAIM_LEASE_SECONDS", "1"));
    let app = spawn_push_handler(&backend, &settings);
    // Older than the outbox's five seconds on the server's clock; past the dead run's
    // one-second lease, which is kept in real time.
    clock.advance_ms(6000);
    tokio::time::sleep(Duration::from_millis(1100).saturating_sub(started.elapsed())).await;
    assert_eq!(app.run_timer("republishEvents").await, "republished 1 events");
    let received = service.received.lock().unwrap().len();
    assert_eq!(received, 2, "the event was pushed again after the restart");
    assert_eq!(app.run_timer("republishEvents").await, "republished 0 events");
    redeliver_until_accepted(&app, &event).await;
    assert_eq!(service.received.lock().unwrap().len(), 2, "and then it was done");
}
