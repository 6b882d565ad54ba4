//! A room's own slash commands against a Slack-style handler in the test (a real local HTTP
//! server) that verifies every request the way Slack's documentation says — the timestamp
//! within five minutes, `v0=` and the hex HMAC-SHA256 of `v0:<timestamp>:<raw body>` keyed with
//! the signing secret — and answers as a Slack command handler does: `in_channel` (posted as the
//! command's bot), ephemeral JSON or plain text (shown only to the caller), blocks, and later
//! at the run's `response_url` as a handler that needs longer does. A handler
//! answering after 3 s or failing is reported (502, saying why) and posts nothing; a repeated client id runs the
//! handler once; managing commands needs ManageWebhooks, and bad input is a documented 4xx.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus, header};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::helpers::{Backend, TestApp, backend_tests, posts, spawn_app_with};

backend_tests!(
    a_slack_handler_runs_unchanged_and_its_answers_show_as_slack_shows_them,
    a_late_or_failing_handler_is_reported_and_posts_nothing,
    a_repeated_client_id_runs_the_handler_once,
    managing_a_rooms_commands_needs_manage_webhooks_and_bad_input_is_a_documented_4xx,
    a_command_is_refused_before_its_handler_acts,
    a_handler_answers_later_at_its_response_url_five_times_within_30_minutes,
);

#[derive(Default)]
struct HandlerState {
    signing_secret: String,
    /// The form fields of each request whose signature verified.
    runs: Vec<HashMap<String, String>>,
    bad_signatures: usize,
}

#[derive(Clone, Default)]
struct Handler(Arc<Mutex<HandlerState>>);

/// Slack's check (api.slack.com/authentication/verifying-requests-from-slack).
fn verified(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let Ok(timestamp) = header("X-Slack-Request-Timestamp").parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - timestamp).abs() > 60 * 5 {
        return false;
    }
    let mut basestring = format!("v0:{timestamp}:").into_bytes();
    basestring.extend_from_slice(body);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&basestring);
    let mine = format!("v0={}", hex(&mac.finalize().into_bytes()));
    mine == header("X-Slack-Signature")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn slash(State(handler): State<Handler>, headers: HeaderMap, body: Bytes) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    {
        let mut state = handler.0.lock().unwrap();
        if !verified(&state.signing_secret, &headers, &body) {
            state.bad_signatures += 1;
            return (AxumStatus::UNAUTHORIZED, "bad signature").into_response();
        }
        state.runs.push(form.clone());
    }
    let user = form.get("user_id").cloned().unwrap_or_default();
    match form.get("text").map(String::as_str).unwrap_or("") {
        "in" => axum::Json(json!({ "response_type": "in_channel", "text": format!("Deploying *main* for <@{user}>") }))
            .into_response(),
        "eph" => axum::Json(json!({ "text": "only _you_ see this" })).into_response(),
        "blocks" => axum::Json(json!({
            "response_type": "in_channel",
            "blocks": [
                { "type": "header", "text": { "type": "plain_text", "text": "Release 42" } },
                { "type": "section", "text": { "type": "mrkdwn", "text": "*ready* to ship" } }
            ]
        }))
        .into_response(),
        "plain" => ([(header::CONTENT_TYPE, "text/plain")], "pong").into_response(),
        "slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(4)).await;
            axum::Json(json!({ "response_type": "in_channel", "text": "too late" })).into_response()
        }
        "fail" => (AxumStatus::INTERNAL_SERVER_ERROR, "boom").into_response(),
        // As a handler that needs longer does: acknowledged now, answered at response_url.
        "later" => {
            let url = form.get("response_url").cloned().unwrap_or_default();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let answer = json!({ "response_type": "in_channel", "text": "deployed *later*" });
                let sent = reqwest::Client::new().post(url).json(&answer).send().await.unwrap();
                assert_eq!(sent.status(), StatusCode::OK);
            });
            AxumStatus::OK.into_response()
        }
        _ => AxumStatus::OK.into_response(),
    }
}

/// The handler, listening on loopback: its URL.
async fn start(handler: &Handler) -> String {
    let app = axum::Router::new()
        .route("/slack/commands", axum::routing::post(slash))
        .with_state(handler.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/slack/commands")
}

/// A server that may reach the loopback handler, a room owned by "owner" with member "alice",
/// and `/deploy` registered to the handler.
async fn set_up(backend: &Backend) -> (TestApp, Handler, String) {
    set_up_on(spawn_app_with(backend, &[ALLOW_LOOPBACK])).await
}

const ALLOW_LOOPBACK: (&str, &str) = ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "true");

/// As [`set_up`], on `app`.
async fn set_up_on(app: TestApp) -> (TestApp, Handler, String) {
    let room = app.create_room("owner").await;
    app.join("alice", &room).await;
    let handler = Handler::default();
    let url = start(&handler).await;
    let created = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/slash-commands"),
            json!({ "name": "deploy", "url": url, "description": "ships a branch" }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let secret = created.body["signingSecret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 32, "{secret}");
    handler.0.lock().unwrap().signing_secret = secret;
    (app, handler, room)
}

async fn a_slack_handler_runs_unchanged_and_its_answers_show_as_slack_shows_them(backend: Backend) {
    let (app, handler, room) = set_up(&backend).await;

    // Every member sees it among the room's commands, with its description (not its URL).
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/commands"), Some("alice"), None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let commands = listed.body.as_array().unwrap();
    assert!(
        commands.contains(&json!({ "name": "deploy", "usage": "ships a branch", "own": true })),
        "{commands:?}"
    );
    assert!(
        commands.iter().any(|c| c["name"] == "me" && c["own"] == false),
        "{commands:?}"
    );
    // Built-ins a member's permissions do not allow are not offered to them; the owner's are.
    assert!(
        !commands.iter().any(|c| c["name"] == "kick" || c["name"] == "topic"),
        "{commands:?}"
    );
    let owners = app
        .call(Method::GET, &format!("/api/rooms/{room}/commands"), Some("owner"), None)
        .await;
    assert!(
        owners.body.as_array().unwrap().iter().any(|c| c["name"] == "kick"),
        "{}",
        owners.body
    );
    app.call(
        Method::GET,
        &format!("/api/rooms/{room}/commands"),
        Some("mallory"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");

    let posted = app.command("alice", &room, "/deploy in", None).await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
    let message = &posted.body["message"];
    assert!(message["text"].as_str().unwrap().contains("<b>main</b>"), "{message}");
    assert_eq!(
        message["mentions"]["users"],
        json!(["alice"]),
        "Slack's <@user> is a mention: {message}"
    );
    assert_eq!(message["authorName"], "/deploy", "{message}");
    assert_eq!(message["origin"], "webhook", "{message}");
    let blocks = app.command("alice", &room, "/deploy blocks", None).await;
    let text = blocks.body["message"]["text"].as_str().unwrap_or_default().to_owned();
    assert!(
        text.contains("Release 42") && text.contains("<b>ready</b>"),
        "{}",
        blocks.body
    );

    let ephemeral = app.command("alice", &room, "/deploy eph", None).await;
    assert_eq!(ephemeral.status, StatusCode::OK, "{}", ephemeral.body);
    assert!(
        ephemeral.body["ephemeral"].as_str().unwrap().contains("<i>you</i>"),
        "{}",
        ephemeral.body
    );
    assert!(ephemeral.body["message"].is_null(), "{}", ephemeral.body);
    let plain = app.command("alice", &room, "/deploy plain", None).await;
    assert!(
        plain.body["ephemeral"].as_str().unwrap().contains("pong"),
        "{}",
        plain.body
    );
    let acknowledged = app.command("alice", &room, "/deploy", None).await;
    assert_eq!(acknowledged.status, StatusCode::OK, "{}", acknowledged.body);

    // Two posted (in_channel), none of the ephemeral ones; the handler got Slack's form.
    let shown: Vec<Value> = app.read_all("owner", &room, "desc", 50).await;
    let bots = shown.iter().filter(|m| m["authorName"] == "/deploy").count();
    assert_eq!(bots, 2, "{shown:?}");
    let state = handler.0.lock().unwrap();
    assert_eq!(state.bad_signatures, 0);
    assert_eq!(state.runs.len(), 5);
    let first = &state.runs[0];
    for (field, value) in [
        ("command", "/deploy"),
        ("text", "in"),
        ("user_id", "alice"),
        ("channel_id", room.as_str()),
    ] {
        assert_eq!(first.get(field).map(String::as_str), Some(value), "{field}: {first:?}");
    }
    for field in ["user_name", "channel_name", "team_id", "trigger_id", "api_app_id"] {
        assert!(first.get(field).is_some_and(|v| !v.is_empty()), "{field}: {first:?}");
    }
}

async fn a_late_or_failing_handler_is_reported_and_posts_nothing(backend: Backend) {
    let (app, _handler, room) = set_up(&backend).await;
    let started = std::time::Instant::now();
    let late = app.command("alice", &room, "/deploy slow", None).await;
    late.assert_error(502, "BAD_GATEWAY");
    assert!(
        late.body["message"].as_str().unwrap().contains("3 seconds"),
        "{}",
        late.body
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "answered when the 3 s were up"
    );
    let failed = app.command("alice", &room, "/deploy fail", None).await;
    failed.assert_error(502, "BAD_GATEWAY");
    assert!(
        failed.body["message"].as_str().unwrap().contains("500"),
        "{}",
        failed.body
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let shown = app.read_all("owner", &room, "desc", 50).await;
    assert!(!shown.iter().any(|m| m["authorName"] == "/deploy"), "{shown:?}");
}

async fn a_repeated_client_id_runs_the_handler_once(backend: Backend) {
    let (app, handler, room) = set_up(&backend).await;
    // A handler that may have acted (it answered late) keeps the id: the repeat runs nothing.
    app.command("alice", &room, "/deploy slow", Some("deploy-0"))
        .await
        .assert_error(502, "BAD_GATEWAY");
    let repeat = app.command("alice", &room, "/deploy slow", Some("deploy-0")).await;
    assert_eq!(repeat.body["repeated"], true, "{}", repeat.body);
    assert_eq!(handler.0.lock().unwrap().runs.len(), 1, "the late handler ran once");
    handler.0.lock().unwrap().runs.clear();
    let first = app.command("alice", &room, "/deploy in", Some("deploy-1")).await;
    assert_eq!(first.body["repeated"], false, "{}", first.body);
    let again = app.command("alice", &room, "/deploy in", Some("deploy-1")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["repeated"], true, "{}", again.body);
    assert_eq!(handler.0.lock().unwrap().runs.len(), 1, "the handler ran once");
    let shown = app.read_all("owner", &room, "desc", 50).await;
    assert_eq!(shown.iter().filter(|m| m["authorName"] == "/deploy").count(), 1);
}

async fn managing_a_rooms_commands_needs_manage_webhooks_and_bad_input_is_a_documented_4xx(backend: Backend) {
    let (app, handler, room) = set_up(&backend).await;
    let path = format!("/rooms/{room}/slash-commands");
    let url = handler_url(&app, &room).await;
    app.act(Method::POST, "alice", &path, json!({ "name": "mine", "url": url }))
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::GET, &format!("/api{path}"), Some("alice"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::GET, &format!("/api{path}"), Some("mallory"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    for (body, status, code) in [
        (json!({ "name": "me", "url": url }), 422, "VALIDATION"),
        (json!({ "name": "Deploy", "url": url }), 422, "VALIDATION"),
        (json!({ "name": "x".repeat(33), "url": url }), 422, "VALIDATION"),
        (
            json!({ "name": "ftp", "url": "ftp://example.com/x" }),
            422,
            "VALIDATION",
        ),
        (json!({ "name": "nourl", "url": "" }), 422, "VALIDATION"),
        (json!({ "name": "deploy", "url": url }), 409, "CONFLICT"),
        (json!({ "name": "extra", "url": url, "secret": "x" }), 422, "VALIDATION"),
        (json!({ "name": 5, "url": url }), 422, "VALIDATION"),
    ] {
        let reply = app.act(Method::POST, "owner", &path, body.clone()).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.body);
        assert_eq!(reply.body["code"], code, "{body}: {}", reply.body);
    }
    let listed = app.call(Method::GET, &format!("/api{path}"), Some("owner"), None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body.as_array().unwrap().len(), 1, "{}", listed.body);
    assert!(
        !listed
            .body
            .to_string()
            .contains(&handler.0.lock().unwrap().signing_secret),
        "no secret listed"
    );
    let log = app.moderation_log("owner", &room).await;
    assert!(log.body.to_string().contains("slashCommandCreated"), "{}", log.body);

    for name in ["nothing", "a%23b", "a%2Fb", "Deploy"] {
        app.call(Method::DELETE, &format!("/api{path}/{name}"), Some("owner"), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    for line in ["/a#b", "/a/b", "/De?ploy"] {
        app.command("alice", &room, line, None)
            .await
            .assert_error(422, "VALIDATION");
    }
    app.call(Method::DELETE, &format!("/api{path}/deploy"), Some("alice"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    let deleted = app
        .call(Method::DELETE, &format!("/api{path}/deploy"), Some("owner"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    app.command("alice", &room, "/deploy in", None)
        .await
        .assert_error(422, "VALIDATION");
    assert!(handler.0.lock().unwrap().runs.is_empty(), "nothing ran");
    assert!(posts(app.read_all("owner", &room, "desc", 50).await).is_empty());
}

/// The URL `/deploy` was registered with.
async fn handler_url(app: &TestApp, room: &str) -> String {
    let listed = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/slash-commands"),
            Some("owner"),
            None,
        )
        .await;
    listed.body[0]["url"].as_str().unwrap().to_owned()
}

/// Nobody outside the room runs its command; what would refuse the caller's own message (a
/// read-only room) refuses it before the handler acts; and a command whose maker may no longer
/// manage the room's integrations runs nothing.
async fn a_command_is_refused_before_its_handler_acts(backend: Backend) {
    let (app, handler, room) = set_up(&backend).await;
    let stranger = app.command("mallory", &room, "/deploy in", None).await;
    stranger.assert_error(404, "NOT_FOUND");

    let settings = json!({ "readOnly": true });
    let changed = app
        .act(Method::PATCH, "owner", &format!("/rooms/{room}"), settings)
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    app.command("alice", &room, "/deploy in", None)
        .await
        .assert_error(403, "FORBIDDEN");
    let settings = json!({ "readOnly": false });
    app.act(Method::PATCH, "owner", &format!("/rooms/{room}"), settings)
        .await;

    // A manager registers /ping and is then removed from the room.
    app.join("mod", &room).await;
    app.grant("owner", &room, "mod", &["ManageWebhooks"], 5).await;
    let url = handler_url(&app, &room).await;
    let made = app
        .act(
            Method::POST,
            "mod",
            &format!("/rooms/{room}/slash-commands"),
            json!({ "name": "ping", "url": url }),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    app.kick("owner", &room, "mod").await;
    app.command("alice", &room, "/ping in", None)
        .await
        .assert_error(403, "FORBIDDEN");

    assert!(handler.0.lock().unwrap().runs.is_empty(), "no handler ran");
}

/// POSTs `answer` to `response_url` as a handler does (no bearer).
async fn answer_at(app: &TestApp, response_url: &str, answer: Value) -> crate::helpers::Reply {
    let path = &response_url[response_url.find("/api/").expect("an absolute URL under /api/")..];
    app.call(Method::POST, path, None, Some(answer)).await
}

async fn a_handler_answers_later_at_its_response_url_five_times_within_30_minutes(backend: Backend) {
    let mut clock = crate::helpers::TestClock::new();
    let (app, handler, room) = set_up_on(clock.spawn(&backend, &[ALLOW_LOOPBACK])).await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("alice"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    let mut alice_live = crate::live::connect(negotiated.body["url"].as_str().unwrap()).await;

    // Acknowledged at once; the answer the handler sends later is posted as the command's bot.
    let acknowledged = app.command("alice", &room, "/deploy later", None).await;
    assert_eq!(acknowledged.status, StatusCode::OK, "{}", acknowledged.body);
    assert!(acknowledged.body["message"].is_null(), "{}", acknowledged.body);
    let mut later = None;
    for _ in 0..50 {
        let shown = app.read_all("owner", &room, "desc", 50).await;
        later = shown.into_iter().find(|m| m["authorName"] == "/deploy");
        if later.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let later = later.expect("the later answer is posted");
    assert!(later["text"].as_str().unwrap().contains("<b>later</b>"), "{later}");
    let url = handler.0.lock().unwrap().runs[0]["response_url"].clone();
    assert!(
        url.starts_with("http://") && url.contains(&format!("/api/slash-responses/{room}/")),
        "{url}"
    );

    // An ephemeral answer reaches the caller alone, live, and is stored nowhere.
    let ephemeral = answer_at(&app, &url, json!({ "text": "only _you_ see this" })).await;
    assert_eq!(ephemeral.status, StatusCode::OK, "{}", ephemeral.body);
    assert_eq!(ephemeral.body["ephemeral"], true, "{}", ephemeral.body);
    assert!(ephemeral.body["message"].is_null(), "{}", ephemeral.body);
    let told = loop {
        let frame = crate::live::next_frame(&mut alice_live).await;
        if frame["data"]["type"] == "command.answered" {
            break frame;
        }
    };
    assert_eq!(told["data"]["roomId"], room.as_str(), "{told}");
    assert_eq!(told["data"]["command"], "deploy", "{told}");
    assert!(told["data"]["html"].as_str().unwrap().contains("<i>you</i>"), "{told}");

    // Five answers in all (the handler's and four more); the sixth is refused.
    for n in 0..3 {
        let posted = answer_at(
            &app,
            &url,
            json!({ "response_type": "in_channel", "text": format!("step {n}") }),
        )
        .await;
        assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
        assert_eq!(posted.body["message"]["authorName"], "/deploy", "{}", posted.body);
    }
    answer_at(&app, &url, json!({ "text": "one more" }))
        .await
        .assert_error(409, "CONFLICT");
    let shown = app.read_all("owner", &room, "desc", 50).await;
    assert_eq!(
        shown.iter().filter(|m| m["authorName"] == "/deploy").count(),
        4,
        "{shown:?}"
    );

    // A URL nobody was given, and bad bodies, are refused as documented.
    let unknown = format!("/api/slash-responses/{room}/{}", "x".repeat(43));
    answer_at(&app, &unknown, json!({ "text": "hi" }))
        .await
        .assert_error(404, "NOT_FOUND");
    let other_room = format!("/api/slash-responses/{}/{}", uuid::Uuid::new_v4(), "x".repeat(43));
    answer_at(&app, &other_room, json!({ "text": "hi" }))
        .await
        .assert_error(404, "NOT_FOUND");
    answer_at(&app, &url, json!({ "text": 5 }))
        .await
        .assert_error(422, "VALIDATION");

    // A URL takes answers for 30 minutes.
    app.command("alice", &room, "/deploy", None).await;
    let second = handler.0.lock().unwrap().runs[1]["response_url"].clone();
    assert_ne!(second, url, "each run has its own URL");
    clock.advance_s(29 * 60);
    let in_time = answer_at(&app, &second, json!({ "text": "still here" })).await;
    assert_eq!(in_time.status, StatusCode::OK, "{}", in_time.body);
    clock.advance_s(2 * 60);
    answer_at(&app, &second, json!({ "text": "too late" }))
        .await
        .assert_error(404, "NOT_FOUND");

    // Deleting the command revokes its runs' URLs (run at the handler's time: it refuses a
    // signature five minutes off its clock).
    clock.advance_s(-31 * 60);
    app.command("alice", &room, "/deploy", None).await;
    let third = handler.0.lock().unwrap().runs[2]["response_url"].clone();
    let url_of_handler = handler_url(&app, &room).await;
    let deleted = app
        .act(
            Method::DELETE,
            "owner",
            &format!("/rooms/{room}/slash-commands/deploy"),
            json!({}),
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    answer_at(&app, &third, json!({ "text": "orphan" }))
        .await
        .assert_error(404, "NOT_FOUND");
    // A command registered again under the name (later: the test clock stands still) is
    // another: the old runs may not answer for it.
    clock.advance_s(1);
    let again = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/slash-commands"),
            json!({ "name": "deploy", "url": url_of_handler }),
        )
        .await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    answer_at(&app, &third, json!({ "text": "impostor" }))
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(handler.0.lock().unwrap().bad_signatures, 0);
}
