//! `negotiate`: a Web PubSub client URL whose token lets the caller join the live groups of
//! their rooms and no other, for at most an hour (reference/azure-platform.md §4.2).

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
