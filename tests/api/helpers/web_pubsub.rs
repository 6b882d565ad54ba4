//! A Web PubSub stand-in: the service REST API on a loopback port, checking each call as Web
//! PubSub does (reference/azure-platform.md §4.2–4.3) and recording what it was sent.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde_json::Value;

/// Checks an HS256 token against `key` (its UTF-8 bytes, as Web PubSub signs) and returns its
/// claims.
pub fn verify_hs256(token: &str, key: &str) -> Value {
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

/// What the Web PubSub stand-in received: the group and the JSON body of each `:send`, and
/// the other calls (method and path); `online` users answer 200 to `HEAD …/users/{id}`.
#[derive(Clone, Default)]
pub struct Hub {
    pub sent: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    pub calls: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub online: Vec<String>,
    pub access_key: String,
    pub origin: String,
}

/// The service REST API (send to group, user exists, remove user from group), as Web PubSub
/// checks it: a bearer token signed with the access key whose `aud` is the exact request URL.
async fn hub_send(
    axum::extract::State(hub): axum::extract::State<Hub>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    let path = uri.path();
    let group = path
        .strip_prefix("/api/hubs/chat/groups/")
        .and_then(|rest| rest.strip_suffix("/:send"));
    let user = path.strip_prefix("/api/hubs/chat/users/");
    if group.is_none() && user.is_none() {
        return axum::http::StatusCode::NOT_FOUND;
    }
    let token = headers["authorization"]
        .to_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    let claims = verify_hs256(token, &hub.access_key);
    let url = format!("{}{}", hub.origin, uri);
    assert_eq!(claims["aud"], url, "aud is the exact request URL");
    assert!(uri.query().unwrap().contains("api-version="));
    if let Some(user) = user {
        hub.calls.lock().unwrap().push(format!("{method} {path}"));
        return match method {
            axum::http::Method::HEAD if hub.online.iter().any(|u| u == user) => axum::http::StatusCode::OK,
            axum::http::Method::HEAD => axum::http::StatusCode::NOT_FOUND,
            axum::http::Method::DELETE => axum::http::StatusCode::NO_CONTENT,
            _ => axum::http::StatusCode::METHOD_NOT_ALLOWED,
        };
    }
    let group = group.unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    hub.sent.lock().unwrap().push((group.to_owned(), body));
    axum::http::StatusCode::ACCEPTED
}

/// Starts a stand-in hub with a fresh access key, in which the `online` users are connected;
/// returns it and the connection string that points the app at it.
pub async fn start_hub(online: &[&str]) -> (Hub, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hub = Hub {
        access_key: B64.encode(rand::random::<[u8; 32]>()),
        origin: format!("http://127.0.0.1:{port}"),
        online: online.iter().map(|user| (*user).to_owned()).collect(),
        ..Hub::default()
    };
    let router = axum::Router::new().fallback(hub_send).with_state(hub.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let connection = format!(
        "Endpoint=http://127.0.0.1;Port={port};AccessKey={};Version=1.0;",
        hub.access_key
    );
    (hub, connection)
}
