//! The notification rules, end to end against the push service stand-in: a
//! mention gets through Mentions-only and a room mute, never through Never or the user's
//! do-not-disturb, which holds back every push until it ends; votes and pins signal live.

use std::collections::HashMap;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{new_poll, pin, vote};
use crate::helpers::web_pubsub::start_hub;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with, spawn_push_app};
use crate::push::{Device, Service, set_level, start_service, subscribe, wait_for};

backend_tests!(
    a_mention_passes_mentions_only_and_mute_but_not_never_or_do_not_disturb,
    do_not_disturb_answers_bad_input_as_errors,
);

fn mentioning(users: &[&str]) -> String {
    let spans: Vec<String> = users
        .iter()
        .map(|u| format!(r#"<span data-type="mention" data-id="{u}">@{u}</span>"#))
        .collect();
    format!("<p>{}</p>", spans.join(" "))
}

/// Messages pushed to each device so far.
fn pushed(service: &Service) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for push in service.received.lock().unwrap().iter() {
        *counts.entry(push.device.clone()).or_default() += 1;
    }
    counts
}

async fn set_dnd(app: &TestApp, user: &str, until: Value) -> crate::helpers::Reply {
    app.act(Method::PUT, user, "/me/do-not-disturb", json!({ "until": until }))
        .await
}

async fn a_mention_passes_mentions_only_and_mute_but_not_never_or_do_not_disturb(backend: Backend) {
    let (service, addr) = start_service().await;
    let app = spawn_push_app(&backend, &[]);
    let room = app.create_room("alice").await;
    let users = ["bob", "carol", "erin", "gina", "dave", "hank"];
    for user in users {
        app.join(user, &room).await;
        subscribe(&app, user, &Device::new(user, addr)).await;
    }
    set_level(&app, "carol", &room, json!({ "notifications": "Mentions" })).await;
    set_level(&app, "erin", &room, json!({ "muted": true })).await;
    set_level(
        &app,
        "gina",
        &room,
        json!({ "notifications": "Mentions", "muted": true }),
    )
    .await;
    set_level(&app, "dave", &room, json!({ "notifications": "Never" })).await;
    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let set = set_dnd(&app, "hank", json!(until)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);

    app.post("alice", &room, "plain").await;
    wait_for(&service, 1).await;
    assert_eq!(
        pushed(&service),
        HashMap::from([("bob".to_owned(), 1)]),
        "only bob, at All"
    );

    app.post("alice", &room, &mentioning(&users)).await;
    wait_for(&service, 5).await;
    let counts = pushed(&service);
    assert_eq!(counts.get("carol"), Some(&1), "a mention passes Mentions-only");
    assert_eq!(counts.get("erin"), Some(&1), "a mention passes a mute");
    assert_eq!(counts.get("gina"), Some(&1), "and both at once");
    assert_eq!(counts.get("dave"), None, "never through Never");
    assert_eq!(counts.get("hank"), None, "never through do-not-disturb");
    assert_eq!(counts.get("bob"), Some(&2));

    // Ending do-not-disturb lets the next push through.
    let cleared = set_dnd(&app, "hank", Value::Null).await;
    assert_eq!((cleared.status, &cleared.body["until"]), (StatusCode::OK, &Value::Null));
    app.post("alice", &room, &mentioning(&["hank"])).await;
    wait_for(&service, 7).await;
    assert_eq!(pushed(&service).get("hank"), Some(&1));
}

async fn do_not_disturb_answers_bad_input_as_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let get = app
        .call(Method::GET, "/api/me/do-not-disturb", Some("alice"), None)
        .await;
    assert_eq!((get.status, &get.body["until"]), (StatusCode::OK, &Value::Null));
    let until = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let set = set_dnd(&app, "alice", json!(until)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let get = app
        .call(Method::GET, "/api/me/do-not-disturb", Some("alice"), None)
        .await;
    assert_eq!(get.body["until"], set.body["until"], "it reads back");

    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    set_dnd(&app, "alice", json!(past))
        .await
        .assert_error(422, "VALIDATION");
    let too_far = (chrono::Utc::now() + chrono::Duration::days(400)).to_rfc3339();
    set_dnd(&app, "alice", json!(too_far))
        .await
        .assert_error(422, "VALIDATION");
    set_dnd(&app, "alice", json!("tomorrow"))
        .await
        .assert_error(422, "VALIDATION");
    app.act(
        Method::PUT,
        "alice",
        "/me/do-not-disturb",
        json!({ "until": null, "extra": 1 }),
    )
    .await
    .assert_error(422, "VALIDATION");
    let not_json = app
        .http
        .put(format!("{}/api/me/do-not-disturb", app.base))
        .bearer_auth(crate::helpers::token("alice"))
        .body("until=now");
    let reply = not_json.send().await.unwrap();
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
    app.call(Method::GET, "/api/me/do-not-disturb", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    // The refused settings changed nothing.
    let get = app
        .call(Method::GET, "/api/me/do-not-disturb", Some("alice"), None)
        .await;
    assert_eq!(get.body["until"], set.body["until"]);
}

#[tokio::test]
async fn votes_and_pins_signal_live() {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );
    let room = app.create_room("alice").await;
    let poll = new_poll(&app, &room, &["soup", "salad"]).await;
    let got = crate::helpers::messages::get_message(&app, "alice", &room, &poll).await;
    let option = got.body["poll"]["options"][0]["id"].clone();
    assert_eq!(vote(&app, "alice", &room, &poll, option).await.status, StatusCode::OK);
    assert_eq!(
        pin(&app, Method::POST, "alice", &room, &poll).await.status,
        StatusCode::OK
    );
    let wanted = ["message.voted", "message.pinned"];
    let mut seen: Vec<(String, Value)> = Vec::new();
    for _ in 0..100 {
        seen = hub.sent.lock().unwrap().clone();
        if wanted.iter().all(|w| seen.iter().any(|(_, b)| b["type"] == *w)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for kind in wanted {
        let (group, body) = seen.iter().find(|(_, b)| b["type"] == kind).expect(kind);
        assert_eq!(group, &format!("room.{room}"));
        assert_eq!(body["messageId"], poll.as_str(), "{kind}");
    }
}
