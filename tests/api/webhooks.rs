//! Inbound webhooks: a room's managers create, list, rename, rotate and delete them; a
//! Slack-shaped body sent to the secret URL becomes a sanitized `Webhook` message through the
//! one door (read-only, the word filter and the limits apply; slowmode does not); a deleted or
//! rotated webhook answers 404 exactly as a missing one.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, delete_message, edit};
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app, spawn_app_with};

backend_tests!(
    a_slack_payload_becomes_a_sanitized_webhook_message_with_its_overrides,
    a_rotated_or_deleted_webhook_answers_as_a_missing_one,
    read_only_the_word_filter_and_the_limits_apply_to_a_webhook_but_slowmode_does_not,
    a_repeat_with_the_same_idempotency_key_stores_once,
    managing_webhooks_needs_manage_webhooks_and_a_stranger_sees_no_room,
    a_webhook_message_is_edited_and_deleted_only_with_manage_messages,
    bad_input_on_the_webhook_routes_is_a_documented_4xx,
    a_webhook_draws_from_its_own_bucket_and_the_rooms_ceiling,
    each_webhook_change_is_in_the_moderation_log_without_its_url,
    a_webhook_stops_when_its_maker_loses_the_right_to_manage_webhooks,
);

async fn create_hook(app: &TestApp, user: &str, room: &str, name: &str) -> Reply {
    app.act(
        Method::POST,
        user,
        &format!("/rooms/{room}/webhooks"),
        json!({ "name": name }),
    )
    .await
}

/// Creates a webhook as `user`; its id and secret URL.
async fn new_hook(app: &TestApp, user: &str, room: &str) -> (String, String) {
    let created = create_hook(app, user, room, "CI").await;
    assert_status(&created, StatusCode::CREATED);
    (
        created.body["id"].as_str().unwrap().to_owned(),
        created.body["url"].as_str().unwrap().to_owned(),
    )
}

/// Posts `body` to a secret URL, without a bearer token.
async fn hook_post(app: &TestApp, url: &str, body: Value, key: Option<&str>) -> Reply {
    let mut request = app.http.post(format!("{}{url}", app.base)).json(&body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    };
    Reply { status, headers, body }
}

async fn webhook_lines(app: &TestApp, user: &str, room: &str) -> Vec<Value> {
    app.read_all(user, room, "asc", 100)
        .await
        .into_iter()
        .filter(|m| m["type"] == "Webhook")
        .collect()
}

async fn a_slack_payload_becomes_a_sanitized_webhook_message_with_its_overrides(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let (id, url) = new_hook(&app, "alice", &room).await;
    assert!(url.starts_with(&format!("/api/hooks/{id}/")), "{url}");
    let body = json!({
        "text": "*Build* _passed_ ~failed~ <https://ci.example/run/1|run 1> for <@bob>\n<script>alert(1)</script>",
        "username": "Jenkins",
        "icon_url": "https://ci.example/logo.png",
        "channel": "#ignored", "icon_emoji": ":ghost:",
    });
    let sent = hook_post(&app, &url, body, None).await;
    assert_status(&sent, StatusCode::CREATED);
    let message = &sent.body;
    assert_eq!(message["type"], "Webhook");
    assert_eq!(message["authorId"], format!("webhook:{id}"));
    assert_eq!(message["authorName"], "Jenkins");
    assert_eq!(message["avatarUrl"], "https://ci.example/logo.png");
    let text = message["text"].as_str().unwrap();
    for part in [
        "<b>Build</b>",
        "<i>passed</i>",
        "<s>failed</s>",
        r#"<a href="https://ci.example/run/1" rel="noopener nofollow ugc">run 1</a>"#,
        r#"<span data-type="mention" data-id="bob">@bob</span>"#,
        "<br>",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert!(!text.contains("<script"), "{text}");
    assert_eq!(message["mentions"]["users"], json!(["bob"]));

    let plain = hook_post(&app, &url, json!({ "text": "our own body" }), None).await;
    assert_status(&plain, StatusCode::CREATED);
    assert_eq!(
        plain.body["authorName"], "CI",
        "without an override, the webhook's name"
    );
    assert!(plain.body.get("avatarUrl").is_none());
    let lines = webhook_lines(&app, "alice", &room).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["text"], "our own body");
}

async fn a_rotated_or_deleted_webhook_answers_as_a_missing_one(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let (id, url) = new_hook(&app, "alice", &room).await;
    let text = || json!({ "text": "hi" });
    assert_status(&hook_post(&app, &url, text(), None).await, StatusCode::CREATED);

    let rotated = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/webhooks/{id}/rotate"),
            json!({}),
        )
        .await;
    assert_status(&rotated, StatusCode::OK);
    let new_url = rotated.body["url"].as_str().unwrap().to_owned();
    assert_ne!(new_url, url);
    let missing = hook_post(&app, &format!("/api/hooks/{}/nothing", "0".repeat(48)), text(), None).await;
    missing.assert_error(404, "NOT_FOUND");
    let old = hook_post(&app, &url, text(), None).await;
    old.assert_error(404, "NOT_FOUND");
    assert_eq!(
        old.body, missing.body,
        "a rotated token answers exactly as a missing webhook"
    );
    assert_status(&hook_post(&app, &new_url, text(), None).await, StatusCode::CREATED);

    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/webhooks/{id}"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&deleted, StatusCode::NO_CONTENT);
    let gone = hook_post(&app, &new_url, text(), None).await;
    assert_eq!((gone.status, &gone.body), (missing.status, &missing.body));
    let garbage = hook_post(&app, "/api/hooks/not-an-id/x", text(), None).await;
    assert_eq!((garbage.status, &garbage.body), (missing.status, &missing.body));
    assert_eq!(webhook_lines(&app, "alice", &room).await.len(), 2);
}

async fn read_only_the_word_filter_and_the_limits_apply_to_a_webhook_but_slowmode_does_not(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_WRITE_LIMITS", "on")]);
    let room = app.create_room("alice").await;
    let (_, url) = new_hook(&app, "alice", &room).await;
    let configure = async |change: Value| {
        let reply = app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), change).await;
        assert_status(&reply, StatusCode::OK);
    };
    configure(json!({ "slowmodeSeconds": 3600 })).await;
    for text in ["one", "two", "three"] {
        let sent = hook_post(&app, &url, json!({ "text": text }), None).await;
        assert_status(&sent, StatusCode::CREATED);
    }
    let repeat = hook_post(&app, &url, json!({ "text": "three" }), None).await;
    repeat.assert_error(429, "TOO_MANY_REQUESTS");
    assert!(repeat.headers.get("retry-after").is_some());

    configure(json!({ "wordFilter": { "words": ["darn"] } })).await;
    hook_post(&app, &url, json!({ "text": "*darn* it" }), None)
        .await
        .assert_error(403, "FORBIDDEN");
    configure(json!({ "readOnly": true })).await;
    hook_post(&app, &url, json!({ "text": "four" }), None)
        .await
        .assert_error(403, "FORBIDDEN");
    configure(json!({ "readOnly": false })).await;
    assert_status(
        &hook_post(&app, &url, json!({ "text": "four" }), None).await,
        StatusCode::CREATED,
    );
    let everyone = r#"<span data-type="mention" data-id="@everyone">@everyone</span>"#;
    let pinged = hook_post(&app, &url, json!({ "text": format!("<!here> {everyone}") }), None).await;
    assert_status(&pinged, StatusCode::CREATED);
    assert!(pinged.body.get("mentions").is_none(), "{}", pinged.body);
    let texts: Vec<Value> = webhook_lines(&app, "alice", &room)
        .await
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(texts.len(), 5, "{texts:?}");
}

async fn a_repeat_with_the_same_idempotency_key_stores_once(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let (_, url) = new_hook(&app, "alice", &room).await;
    let body = || json!({ "text": "deploy done" });
    let first = hook_post(&app, &url, body(), Some("deploy-42")).await;
    assert_status(&first, StatusCode::CREATED);
    let (a, b) = tokio::join!(
        hook_post(&app, &url, body(), Some("deploy-42")),
        hook_post(&app, &url, body(), Some("deploy-42")),
    );
    for repeat in [a, b] {
        assert_status(&repeat, StatusCode::OK);
        assert_eq!(repeat.body["id"], first.body["id"]);
    }
    assert_status(
        &hook_post(&app, &url, body(), Some("deploy-43")).await,
        StatusCode::CREATED,
    );
    assert_eq!(webhook_lines(&app, "alice", &room).await.len(), 2);
}

async fn managing_webhooks_needs_manage_webhooks_and_a_stranger_sees_no_room(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let stranger = create_hook(&app, "mallory", &room, "x").await;
    stranger.assert_error(404, "NOT_FOUND");
    let missing_room = create_hook(&app, "mallory", &uuid::Uuid::new_v4().to_string(), "x").await;
    assert_eq!(stranger.body, missing_room.body);
    create_hook(&app, "bob", &room, "x")
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::GET, &format!("/api/rooms/{room}/webhooks"), Some("bob"), None)
        .await
        .assert_error(403, "FORBIDDEN");

    app.grant("alice", &room, "bob", &["ManageWebhooks"], 1).await;
    let (id, _) = new_hook(&app, "bob", &room).await;
    let renamed = app
        .act(
            Method::PATCH,
            "bob",
            &format!("/rooms/{room}/webhooks/{id}"),
            json!({ "name": " Deploys " }),
        )
        .await;
    assert_status(&renamed, StatusCode::OK);
    assert_eq!(renamed.body["name"], "Deploys");
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/webhooks"), Some("alice"), None)
        .await;
    assert_status(&listed, StatusCode::OK);
    let hooks = listed.body.as_array().unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["name"], "Deploys");
    assert_eq!(hooks[0]["createdBy"], "bob");
    assert!(
        hooks[0].get("url").is_none() && hooks[0].get("tokenHash").is_none(),
        "{}",
        hooks[0]
    );
    app.call(
        Method::DELETE,
        &format!("/api/rooms/{room}/webhooks/{id}"),
        Some("mallory"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

async fn a_webhook_message_is_edited_and_deleted_only_with_manage_messages(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let (_, url) = new_hook(&app, "alice", &room).await;
    let id = hook_post(&app, &url, json!({ "text": "status" }), None).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    edit(&app, "bob", &room, &id, "mine now")
        .await
        .assert_error(403, "FORBIDDEN");
    delete_message(&app, "bob", &room, &id)
        .await
        .assert_error(403, "FORBIDDEN");
    app.grant("alice", &room, "bob", &["ManageMessages"], 1).await;
    assert_status(&edit(&app, "bob", &room, &id, "fixed").await, StatusCode::OK);
    assert_status(&delete_message(&app, "bob", &room, &id).await, StatusCode::NO_CONTENT);
}

async fn bad_input_on_the_webhook_routes_is_a_documented_4xx(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let (id, url) = new_hook(&app, "alice", &room).await;
    let hooks = format!("/rooms/{room}/webhooks");
    for (body, status, code) in [
        (json!({ "name": "" }), 422, "VALIDATION"),
        (json!({ "name": "x".repeat(81) }), 422, "VALIDATION"),
        (json!({ "name": "a\u{7}b" }), 422, "VALIDATION"),
        (json!({ "name": 5 }), 422, "VALIDATION"),
        (json!({ "name": "x", "extra": 1 }), 422, "VALIDATION"),
        (json!({}), 422, "VALIDATION"),
    ] {
        app.act(Method::POST, "alice", &hooks, body.clone())
            .await
            .assert_error(status, code);
        app.act(Method::PATCH, "alice", &format!("{hooks}/{id}"), body)
            .await
            .assert_error(status, code);
    }
    app.act(
        Method::PATCH,
        "alice",
        &format!("{hooks}/nothing"),
        json!({ "name": "x" }),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.act(Method::POST, "alice", &format!("{hooks}/nothing/rotate"), json!({}))
        .await
        .assert_error(404, "NOT_FOUND");
    // Ids that are no webhook id of this room, with characters no row key may hold, too.
    let other_room = app.create_room("alice").await;
    let (elsewhere, _) = new_hook(&app, "alice", &other_room).await;
    for bad in ["a%2Fb", "a%23b", "%3F", &elsewhere, &"f".repeat(48)] {
        app.act(
            Method::PATCH,
            "alice",
            &format!("{hooks}/{bad}"),
            json!({ "name": "x" }),
        )
        .await
        .assert_error(404, "NOT_FOUND");
        app.act(Method::POST, "alice", &format!("{hooks}/{bad}/rotate"), json!({}))
            .await
            .assert_error(404, "NOT_FOUND");
        app.call(Method::DELETE, &format!("/api{hooks}/{bad}"), Some("alice"), None)
            .await
            .assert_error(404, "NOT_FOUND");
        hook_post(&app, &format!("/api/hooks/{bad}/x"), json!({ "text": "x" }), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    app.act(
        Method::POST,
        "alice",
        "/rooms/not-a-room/webhooks",
        json!({ "name": "x" }),
    )
    .await
    .assert_error(404, "NOT_FOUND");

    for (body, code) in [
        (json!({}), "VALIDATION"),
        (json!({ "text": "" }), "VALIDATION"),
        (json!({ "text": " \n " }), "VALIDATION"),
        (json!({ "text": 7 }), "VALIDATION"),
        (json!({ "text": "x".repeat(20_000) }), "VALIDATION"),
        // Markup that made the conversion quadratic (seconds of CPU a request): now refused
        // by its length before any conversion.
        (json!({ "text": "*a ".repeat(85_000) }), "VALIDATION"),
        (json!({ "text": "x", "username": "u".repeat(81) }), "VALIDATION"),
        (json!({ "text": "x", "icon_url": "javascript:alert(1)" }), "VALIDATION"),
        (json!({ "text": "x", "icon_url": 3 }), "VALIDATION"),
    ] {
        hook_post(&app, &url, body, None).await.assert_error(422, code);
    }
    hook_post(&app, &url, json!({ "text": "x" }), Some("has space"))
        .await
        .assert_error(422, "VALIDATION");
    let raw = async |content_type: Option<&str>, body: &'static str| {
        let mut request = app.http.post(format!("{}{url}", app.base)).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body["code"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        raw(Some("application/json"), "{not json").await,
        (400, "BAD_REQUEST".into())
    );
    assert_eq!(raw(None, r#"{"text":"x"}"#).await, (400, "BAD_REQUEST".into()));
    let big = "x".repeat(300 * 1024);
    let too_big = app
        .http
        .post(format!("{}{url}", app.base))
        .json(&json!({ "text": big }))
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status().as_u16(), 413);
    assert!(webhook_lines(&app, "alice", &room).await.is_empty());
}

async fn a_webhook_draws_from_its_own_bucket_and_the_rooms_ceiling(backend: Backend) {
    let clock = crate::helpers::TestClock::new();
    let app = clock.spawn(&backend, &[("TABLETALK_WRITE_LIMITS", "on")]);
    let room = app.create_room("alice").await;
    let (_, url) = new_hook(&app, "alice", &room).await;
    for i in 0..40 {
        let sent = hook_post(&app, &url, json!({ "text": format!("build {i}") }), None).await;
        assert_status(&sent, StatusCode::CREATED);
    }
    let over = hook_post(&app, &url, json!({ "text": "build 40" }), None).await;
    over.assert_error(429, "TOO_MANY_REQUESTS");
    app.post("alice", &room, "alice has a bucket of her own").await;

    let ceiling = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}"),
            json!({ "maxSendsPerSecond": 1 }),
        )
        .await;
    assert_status(&ceiling, StatusCode::OK);
    let (_, second) = new_hook(&app, "alice", &room).await;
    assert_status(
        &hook_post(&app, &second, json!({ "text": "one" }), None).await,
        StatusCode::CREATED,
    );
    hook_post(&app, &second, json!({ "text": "two" }), None)
        .await
        .assert_error(429, "TOO_MANY_REQUESTS");
}

/// Making, renaming, rotating and deleting a webhook each leave one log line with the
/// webhook's id (and name), never its secret URL; a change of a webhook gone logs nothing;
/// a member who may manage webhooks reads the log.
async fn each_webhook_change_is_in_the_moderation_log_without_its_url(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.grant("alice", &room, "bob", &["ManageWebhooks"], 1).await;
    let (id, url) = new_hook(&app, "bob", &room).await;
    let hook = format!("/rooms/{room}/webhooks/{id}");
    let renamed = app.act(Method::PATCH, "bob", &hook, json!({ "name": "Deploys" })).await;
    assert_status(&renamed, StatusCode::OK);
    let rotated = app.act(Method::POST, "bob", &format!("{hook}/rotate"), json!({})).await;
    assert_status(&rotated, StatusCode::OK);
    let new_url = rotated.body["url"].as_str().unwrap().to_owned();
    let deleted = app
        .call(Method::DELETE, &format!("/api{hook}"), Some("bob"), None)
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    app.call(Method::DELETE, &format!("/api{hook}"), Some("bob"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.act(Method::PATCH, "bob", &hook, json!({ "name": "Gone" }))
        .await
        .assert_error(404, "NOT_FOUND");

    let log = crate::moderation_log::whole_log(&app, "bob", &room).await;
    let webhook_lines: Vec<&Value> = log
        .iter()
        .filter(|e| e["action"].as_str().is_some_and(|a| a.starts_with("webhook")))
        .collect();
    let actions: Vec<&str> = webhook_lines.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        ["webhookDeleted", "webhookRotated", "webhookRenamed", "webhookCreated"],
        "{backend:?}: newest first, one line each"
    );
    for line in &webhook_lines {
        assert_eq!(line["actorId"], "bob", "{line}");
        assert_eq!(line["details"]["webhookId"], id.as_str(), "{line}");
    }
    assert_eq!(webhook_lines[3]["details"]["name"], "CI");
    assert_eq!(webhook_lines[2]["details"]["name"], "Deploys");
    let text = serde_json::to_string(&log).unwrap();
    for secret in [&url, &new_url] {
        let token = secret.rsplit('/').next().unwrap();
        assert!(!text.contains(token), "{backend:?}: a token in the log: {text}");
    }
}

/// A webhook acts with its maker's standing: once they are kicked, banned, gone, erased or
/// stripped of ManageWebhooks, their webhook's posts are refused (and given the right back,
/// it works again).
async fn a_webhook_stops_when_its_maker_loses_the_right_to_manage_webhooks(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for (maker, loss) in [
        ("kicked", "kick"),
        ("banned", "ban"),
        ("leaver", "leave"),
        ("erased", "erase"),
        ("demoted", "role"),
    ] {
        app.join(maker, &room).await;
        let role = app.grant("alice", &room, maker, &["ManageWebhooks"], 10).await;
        let (_, url) = new_hook(&app, maker, &room).await;
        assert_status(
            &hook_post(&app, &url, json!({ "text": "before" }), None).await,
            StatusCode::CREATED,
        );
        let members = format!("/rooms/{room}/members/{maker}");
        let lost = match loss {
            "kick" => {
                app.act(Method::POST, "alice", &format!("{members}/kick"), json!({}))
                    .await
            }
            "ban" => {
                app.act(Method::POST, "alice", &format!("{members}/ban"), json!({}))
                    .await
            }
            "leave" => {
                app.call(Method::POST, &format!("/api/rooms/{room}/leave"), Some(maker), None)
                    .await
            }
            "erase" => app.call(Method::POST, "/api/me/erase", Some(maker), None).await,
            _ => {
                app.act(
                    Method::PUT,
                    "alice",
                    &format!("{members}/roles"),
                    json!({ "roleIds": [] }),
                )
                .await
            }
        };
        assert!(lost.status.is_success(), "{loss}: {}", lost.body);
        // An erasure runs in the background: its maker's webhook stops once it left the room.
        let mut answer = hook_post(&app, &url, json!({ "text": "after" }), None).await;
        for _ in 0..100 {
            if answer.status != StatusCode::CREATED {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            answer = hook_post(&app, &url, json!({ "text": "after" }), None).await;
        }
        answer.assert_error(403, "FORBIDDEN");
        if loss == "role" {
            let back = json!({ "roleIds": [role] });
            assert_status(
                &app.act(Method::PUT, "alice", &format!("{members}/roles"), back).await,
                StatusCode::OK,
            );
            assert_status(
                &hook_post(&app, &url, json!({ "text": "again" }), None).await,
                StatusCode::CREATED,
            );
        }
    }
}
