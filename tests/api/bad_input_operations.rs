//! Malformed input to the message operations, room settings, roles and moderation routes gets
//! its documented 4xx JSON error (never a 500), changes nothing, and an unauthenticated caller
//! gets 401 on every one of those routes before anything else is looked at.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::get_message;
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app, token};

backend_tests!(
    malformed_operations_get_documented_errors_and_change_nothing,
    every_operation_needs_authentication,
);

enum Body {
    Empty,
    Json(Value),
    /// Sent as is, labelled `application/json`.
    Raw(&'static str),
}

/// One malformed request and the error it must get.
struct Case {
    method: Method,
    path: String,
    body: Body,
    status: u16,
    code: &'static str,
}

fn case(method: Method, path: String, body: Body, status: u16, code: &'static str) -> Case {
    Case {
        method,
        path,
        body,
        status,
        code,
    }
}

/// Every case, against alice's `room` (where bob is a member and carol is not) and alice's
/// message `id` in it.
fn cases(room: &str, id: &str) -> Vec<Case> {
    use Body::{Empty, Json, Raw};
    let room_path = format!("/api/rooms/{room}");
    let message = format!("{room_path}/messages/{id}");
    let not_a_message = format!("{room_path}/messages/abc");
    let roles = format!("{room_path}/roles");
    let bob = format!("{room_path}/members/bob");
    let me = format!("{room_path}/members/me");
    let past = json!({ "until": "2000-01-01T00:00:00Z" });
    let (bad, invalid, missing) = ("BAD_REQUEST", "VALIDATION", "NOT_FOUND");
    vec![
        case(
            Method::PATCH,
            not_a_message.clone(),
            Json(json!({ "text": "x" })),
            404,
            missing,
        ),
        case(Method::DELETE, not_a_message, Empty, 404, missing),
        case(Method::PATCH, message.clone(), Raw("{\"text\":"), 400, bad),
        case(Method::PATCH, message.clone(), Json(json!({ "text": 5 })), 422, invalid),
        case(
            Method::PATCH,
            message.clone(),
            Json(json!({ "text": "x", "pinned": true })),
            422,
            invalid,
        ),
        case(
            Method::PUT,
            format!("{message}/vote"),
            Json(json!({ "optionId": 7 })),
            422,
            invalid,
        ),
        case(
            Method::PUT,
            format!("{message}/reactions/{}", "%F0%9F%91%8D".repeat(40)),
            Empty,
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{message}/forward"),
            Json(json!({ "roomIds": "x" })),
            422,
            invalid,
        ),
        case(Method::GET, format!("{message}/thread?limit=0"), Empty, 400, bad),
        case(Method::GET, format!("{message}/thread?cursor=garbage"), Empty, 400, bad),
        case(
            Method::PATCH,
            room_path.clone(),
            Json(json!({ "slowmodeSeconds": -1 })),
            422,
            invalid,
        ),
        case(
            Method::PATCH,
            room_path.clone(),
            Json(json!({ "slowmodeSeconds": 999_999 })),
            422,
            invalid,
        ),
        case(
            Method::PATCH,
            room_path.clone(),
            Json(json!({ "wordFilter": { "words": [""] } })),
            422,
            invalid,
        ),
        case(
            Method::PATCH,
            room_path.clone(),
            Json(json!({ "wordFilter": { "words": ["x"], "action": "BlockAndTimeout" } })),
            422,
            invalid,
        ),
        // Within the per-word and per-list limits, but more than one stored property holds.
        case(
            Method::PATCH,
            room_path.clone(),
            Json(json!({ "wordFilter": { "words": (0..1000).map(|i| format!("{i:0>93}")).collect::<Vec<_>>() } })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            roles.clone(),
            Json(json!({ "name": "mods", "position": 0 })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            roles.clone(),
            Json(json!({ "name": "", "position": 5 })),
            422,
            invalid,
        ),
        case(
            Method::PATCH,
            format!("{roles}/not-a-uuid"),
            Json(json!({ "name": "x" })),
            404,
            missing,
        ),
        case(Method::DELETE, format!("{roles}/not-a-uuid"), Empty, 404, missing),
        case(
            Method::PUT,
            format!("{bob}/roles"),
            Json(json!({ "roleIds": [uuid::Uuid::new_v4().to_string()] })),
            422,
            invalid,
        ),
        case(Method::POST, format!("{bob}/timeout"), Json(past.clone()), 422, invalid),
        case(
            Method::POST,
            format!("{bob}/timeout"),
            Json(json!({ "until": "not a date" })),
            422,
            invalid,
        ),
        case(Method::POST, format!("{bob}/ban"), Json(past), 422, invalid),
        case(
            Method::PATCH,
            me.clone(),
            Json(json!({ "nickname": "n".repeat(40) })),
            422,
            invalid,
        ),
        case(
            Method::PATCH,
            me,
            Json(json!({ "notifications": "Sometimes" })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/read"),
            Json(json!({ "messageId": "nope" })),
            404,
            missing,
        ),
        case(
            Method::POST,
            format!("{room_path}/members/carol/kick"),
            Empty,
            404,
            missing,
        ),
        case(
            Method::POST,
            format!("{bob}/ban"),
            Json(json!({ "until": "+10000-01-01T00:00:00Z" })),
            422,
            invalid,
        ),
        // Path segments that are not UTF-8 once percent-decoded.
        case(Method::PUT, format!("{message}/reactions/%FF"), Empty, 400, bad),
        case(Method::DELETE, format!("{message}/reactions/%FF"), Empty, 400, bad),
        case(
            Method::POST,
            format!("{room_path}/messages/abc/pin"),
            Empty,
            404,
            missing,
        ),
        case(
            Method::DELETE,
            format!("{room_path}/messages/abc/pin"),
            Empty,
            404,
            missing,
        ),
        case(
            Method::GET,
            "/api/rooms/not-a-room/roles".to_owned(),
            Empty,
            404,
            missing,
        ),
        case(Method::DELETE, "/api/rooms/not-a-room".to_owned(), Empty, 404, missing),
        case(Method::DELETE, format!("{room_path}/bans/%FF"), Empty, 400, bad),
        case(Method::PATCH, room_path.clone(), Raw("{"), 400, bad),
        case(Method::POST, format!("{room_path}/read"), Raw("["), 400, bad),
        case(
            Method::POST,
            format!("{room_path}/messages"),
            Json(json!({ "type": "Poll", "poll": { "question": "q", "options": "x" } })),
            422,
            invalid,
        ),
        case(Method::GET, "/api/rooms/%FF/members".to_owned(), Empty, 400, bad),
        case(
            Method::POST,
            format!("{room_path}/members/%C3%28/kick"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around={id}&order=asc"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around={id}&cursor=abc"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around={id}&limit=0"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around={id}&limit=101"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around={id}&limit=x"),
            Empty,
            400,
            bad,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around=abc"),
            Empty,
            404,
            missing,
        ),
        case(
            Method::GET,
            format!("{room_path}/messages?around=123"),
            Empty,
            404,
            missing,
        ),
        case(Method::GET, format!("{room_path}/pins?limit=0"), Empty, 400, bad),
        case(Method::GET, format!("{room_path}/pins?limit=-1"), Empty, 400, bad),
        case(Method::GET, format!("{room_path}/pins?cursor=garbage"), Empty, 400, bad),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Raw("{\"ids\":"),
            400,
            bad,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({ "ids": "x" })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({ "ids": [7] })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({})),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({ "ids": [] })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({ "ids": vec![id; 101] })),
            422,
            invalid,
        ),
        case(
            Method::POST,
            format!("{room_path}/messages/batch"),
            Json(json!({ "ids": [id], "all": true })),
            422,
            invalid,
        ),
    ]
}

/// Sends `case`, as `user` when given, and reads the JSON answer (anything else fails).
async fn send(app: &TestApp, case: &Case, user: Option<&str>) -> Reply {
    let mut request = app
        .http
        .request(case.method.clone(), format!("{}{}", app.base, case.path));
    match user {
        Some(user) => request = request.bearer_auth(token(user)),
        // Refused before its body is read, a request leaves that body unread, and the server
        // then closes the connection: do not offer it for reuse by the next request.
        None => request = request.header("connection", "close"),
    }
    request = match &case.body {
        Body::Empty => request,
        Body::Json(value) => request.json(value),
        Body::Raw(text) => request.header("content-type", "application/json").body(*text),
    };
    let response = request.send().await.expect("request");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{} {}: not JSON ({status}): {text}", case.method, case.path));
    Reply { status, headers, body }
}

/// A room owned by alice with bob in it, and one message of alice's; returns both ids.
async fn setup(app: &TestApp) -> (String, String) {
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "hello").await;
    (room, id)
}

async fn malformed_operations_get_documented_errors_and_change_nothing(backend: Backend) {
    let app = spawn_app(&backend);
    let (room, id) = setup(&app).await;
    let before = message(&app, &room, &id).await;
    for case in cases(&room, &id) {
        let reply = send(&app, &case, Some("alice")).await;
        assert!(
            reply.status.as_u16() == case.status && reply.body["code"] == case.code,
            "{backend:?}: {} {} answered {} {}, expected {} {}",
            case.method,
            case.path,
            reply.status,
            reply.body,
            case.status,
            case.code
        );
        reply.assert_error(case.status, case.code);
    }

    assert_eq!(message(&app, &room, &id).await, before, "the message is unchanged");
    let settings = app
        .call(Method::GET, &format!("/api/rooms/{room}"), Some("alice"), None)
        .await;
    assert_eq!(settings.body["slowmodeSeconds"], 0);
    assert_eq!(settings.body["wordFilter"]["words"], json!([]));
    let roles = app
        .call(Method::GET, &format!("/api/rooms/{room}/roles"), Some("alice"), None)
        .await;
    assert_eq!(roles.body, json!([]));
    let bob = app.member("bob", &room, "bob").await.expect("bob is a member");
    assert!(bob.get("timeoutUntil").is_none(), "{bob}");
}

async fn every_operation_needs_authentication(backend: Backend) {
    let app = spawn_app(&backend);
    let (room, id) = setup(&app).await;
    for case in cases(&room, &id) {
        let reply = send(&app, &case, None).await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{backend:?}: {} {}: {}",
            case.method,
            case.path,
            reply.body
        );
        reply.assert_error(401, "UNAUTHORIZED");
    }
}

/// The message as alice reads it, for comparing before and after.
async fn message(app: &TestApp, room: &str, id: &str) -> Value {
    let reply = get_message(app, "alice", room, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}
