//! Live delivery with Azure Web PubSub: `negotiate` (a client URL whose token lets the caller
//! join the live groups of their rooms and no other, for at most an hour), and live signals
//! through the service REST API, checked by a stand-in that verifies each call as Web PubSub
//! does (reference/azure-platform.md §4.2–4.3).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::{Backend, spawn_app, spawn_app_with};

/// Checks an HS256 token against `key` (its UTF-8 bytes, as Web PubSub signs) and returns its
/// claims.
fn verify_hs256(token: &str, key: &str) -> Value {
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(signed.as_bytes());
    mac.verify_slice(&B64.decode(signature).unwrap())
        .expect("signed with the access key");
    let (header, claims) = signed.split_once('.').unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(header).unwrap()).unwrap();
    assert_eq!(header["alg"], "HS256");
    serde_json::from_slice(&B64.decode(claims).unwrap()).unwrap()
}

#[tokio::test]
async fn negotiate_hands_out_a_token_for_the_callers_rooms_only() {
    let backend = Backend::embedded();
    let access_key = B64.encode(rand::random::<[u8; 32]>());
    let connection = format!("Endpoint=https://chat.webpubsub.azure.com;AccessKey={access_key};Version=1.0;");
    let app = spawn_app_with(&backend, &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())]);
    let mine = [app.create_room("bob").await, app.create_room("alice").await];
    app.join("bob", &mine[1]).await;
    let others = app.create_room("carol").await;

    let reply = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let url = reply.body["url"].as_str().unwrap();
    let token = url
        .strip_prefix("wss://chat.webpubsub.azure.com/client/hubs/chat?access_token=")
        .unwrap_or_else(|| panic!("a client URL: {url}"));
    let claims = verify_hs256(token, &access_key);
    assert_eq!(claims["aud"], "https://chat.webpubsub.azure.com/client/hubs/chat");
    assert_eq!(claims["sub"], "bob");
    let now = chrono::Utc::now().timestamp();
    let exp = claims["exp"].as_i64().unwrap();
    assert!(exp > now && exp <= now + 3600, "expires within the hour");
    let mut roles: Vec<&str> = claims["role"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    roles.sort();
    let mut expected: Vec<String> = mine
        .iter()
        .map(|r| format!("webpubsub.joinLeaveGroup.room.{r}"))
        .collect();
    expected.sort();
    assert_eq!(roles, expected, "the groups of bob's rooms, and only those");
    assert!(!roles.iter().any(|r| r.contains(&others)));

    app.call(Method::POST, "/api/negotiate", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn without_web_pubsub_negotiate_is_unavailable() {
    let app = spawn_app(&Backend::embedded());
    app.call(Method::POST, "/api/negotiate", Some("bob"), None)
        .await
        .assert_error(503, "UNAVAILABLE");
}

/// What the Web PubSub stand-in received: the group and the JSON body of each `:send`.
#[derive(Clone, Default)]
struct Hub {
    sent: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    access_key: String,
    origin: String,
}

/// The service REST API's send-to-group, as Web PubSub checks it: a bearer token signed with
/// the access key whose `aud` is the exact request URL.
async fn hub_send(
    axum::extract::State(hub): axum::extract::State<Hub>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    let path = uri.path();
    let Some(group) = path
        .strip_prefix("/api/hubs/chat/groups/")
        .and_then(|rest| rest.strip_suffix("/:send"))
    else {
        return axum::http::StatusCode::NOT_FOUND;
    };
    let token = headers["authorization"]
        .to_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    let claims = verify_hs256(token, &hub.access_key);
    let url = format!("{}{}", hub.origin, uri);
    assert_eq!(claims["aud"], url, "aud is the exact request URL");
    assert!(uri.query().unwrap().contains("api-version="));
    let body: Value = serde_json::from_slice(&body).unwrap();
    hub.sent.lock().unwrap().push((group.to_owned(), body));
    axum::http::StatusCode::ACCEPTED
}

#[tokio::test]
async fn changes_reach_the_rooms_group_as_live_signals() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hub = Hub {
        access_key: B64.encode(rand::random::<[u8; 32]>()),
        origin: format!("http://127.0.0.1:{port}"),
        ..Hub::default()
    };
    let router = axum::Router::new().fallback(hub_send).with_state(hub.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let connection = format!(
        "Endpoint=http://127.0.0.1;Port={port};AccessKey={};Version=1.0;",
        hub.access_key
    );
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );

    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "hi").await;
    let at = |rest: &str| format!("/api/rooms/{room}/messages/{id}{rest}");
    app.call(
        Method::PATCH,
        &at(""),
        Some("alice"),
        Some(serde_json::json!({ "text": "hi!" })),
    )
    .await;
    app.call(Method::PUT, &at("/reactions/ok"), Some("bob"), None).await;
    app.call(Method::POST, &at("/pin"), Some("alice"), None).await;
    for _ in 0..3 {
        let typing = app
            .call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("bob"), None)
            .await;
        assert_eq!(typing.status, StatusCode::NO_CONTENT);
    }
    app.call(
        Method::POST,
        &format!("/api/rooms/{room}/read"),
        Some("bob"),
        Some(serde_json::json!({})),
    )
    .await;
    app.call(Method::DELETE, &at(""), Some("alice"), None).await;
    // A stranger can neither type into the room nor learn it exists.
    app.call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("eve"), None)
        .await
        .assert_error(404, "NOT_FOUND");

    // created: the join line, "hi", the pin line; then the rest once each; typing only once.
    let expected = 3 + 5 + 1;
    for _ in 0..100 {
        if hub.sent.lock().unwrap().len() >= expected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let sent = hub.sent.lock().unwrap().clone();
    let mut kinds: Vec<&str> = sent.iter().map(|(_, body)| body["type"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "message.created",
            "message.created",
            "message.created",
            "message.deleted",
            "message.pinned",
            "message.reacted",
            "message.updated",
            "read",
            "typing"
        ]
    );
    for (group, body) in &sent {
        assert_eq!(group, &format!("room.{room}"), "the room's group");
        assert_eq!(body["roomId"], room.as_str());
    }
    let updated = sent.iter().find(|(_, b)| b["type"] == "message.updated").unwrap();
    assert_eq!(updated.1["message"]["text"], "hi!", "a signal carries the change");
}

#[tokio::test]
async fn an_unreachable_web_pubsub_never_fails_a_request() {
    let connection = format!(
        "Endpoint=http://127.0.0.1:9;AccessKey={};Version=1.0;",
        B64.encode(rand::random::<[u8; 32]>())
    );
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );
    let room = app.create_room("alice").await;
    let sent = app.send("alice", &room, "still stored", None).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let typing = app
        .call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("alice"), None)
        .await;
    assert_eq!(typing.status, StatusCode::NO_CONTENT);
    assert_eq!(app.read_all("alice", &room, "desc", 10).await.len(), 1);
}
