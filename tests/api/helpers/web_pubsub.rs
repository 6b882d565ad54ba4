//! A Web PubSub stand-in: the service REST API on a loopback port, checking each call as Web
//! PubSub does, keeping which connection is in which
//! group, and recording what it was sent.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

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

/// What the Web PubSub stand-in received: the group and the JSON body of each `:send` to a
/// group, the user and body of each `:send` to a user (`notices`), and the other calls (method
/// and path); `online` users answer 200 to `HEAD …/users/{id}`. It keeps the open
/// `connections` (id → user and groups) as the service does: adding one that is not open is
/// 404, and removing a user from a group takes each of their connections out of it.
#[derive(Clone, Default)]
pub struct Hub {
    pub sent: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    pub notices: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    pub calls: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub connections: std::sync::Arc<std::sync::Mutex<HashMap<String, (String, HashSet<String>)>>>,
    pub online: Vec<String>,
    pub access_key: String,
    pub origin: String,
    /// How many of the next calls taking a user out of a group fail (503), for fault injection.
    pub failing_removals: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Hub {
    /// A client of `user` connected with the id `connection`.
    pub fn open(&self, connection: &str, user: &str) {
        self.connections
            .lock()
            .unwrap()
            .insert(connection.to_owned(), (user.to_owned(), HashSet::new()));
    }

    /// A client of `user` connected with the id `connection`, as the service tells the app:
    /// open here, then its `connected` system event posted to the app's upstream handler,
    /// signed with the access key (204 expected).
    pub async fn connect(&self, app: &crate::helpers::TestApp, connection: &str, user: &str) {
        self.open(connection, user);
        let status = self.post_event(app, "connected", user, connection).await;
        assert_eq!(
            status,
            reqwest::StatusCode::NO_CONTENT,
            "the connected event of {connection}"
        );
    }

    /// The client closed: gone here, then its `disconnected` event posted (204 expected).
    pub async fn disconnect(&self, app: &crate::helpers::TestApp, connection: &str, user: &str) {
        self.connections.lock().unwrap().remove(connection);
        let status = self.post_event(app, "disconnected", user, connection).await;
        assert_eq!(
            status,
            reqwest::StatusCode::NO_CONTENT,
            "the disconnected event of {connection}"
        );
    }

    /// Posts a signed system event (`connected` or `disconnected`) of `user`'s `connection` to
    /// the app's handler, in CloudEvents binary mode as the service does; answers the status.
    pub async fn post_event(
        &self,
        app: &crate::helpers::TestApp,
        event: &str,
        user: &str,
        connection: &str,
    ) -> reqwest::StatusCode {
        let signature = tabletalk::adapters::live::upstream::signature(&[self.access_key.as_str()], connection);
        app.http
            .post(format!("{}/api/live/events", app.base))
            .header("ce-specversion", "1.0")
            .header("ce-type", format!("azure.webpubsub.sys.{event}"))
            .header("ce-source", format!("/hubs/chat/client/{connection}"))
            .header("ce-id", uuid::Uuid::new_v4().to_string())
            .header("ce-userId", user)
            .header("ce-connectionId", connection)
            .header("ce-hub", "chat")
            .header("ce-eventName", event)
            .header("ce-signature", signature)
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap()
            .status()
    }

    /// Whether the connection is in `group`.
    pub fn in_group(&self, connection: &str, group: &str) -> bool {
        self.connections
            .lock()
            .unwrap()
            .get(connection)
            .is_some_and(|(_, groups)| groups.contains(group))
    }
}

/// The service REST API (send to a group or a user, user exists, add and remove a connection,
/// remove a user from a group), as Web PubSub checks it: a bearer token signed with the access
/// key whose `aud` is the exact request URL.
async fn hub_send(
    axum::extract::State(hub): axum::extract::State<Hub>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    use axum::http::{Method, StatusCode};
    let path = uri.path();
    let Some(rest) = path.strip_prefix("/api/hubs/chat/") else {
        return StatusCode::NOT_FOUND;
    };
    let Some(token) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return StatusCode::UNAUTHORIZED;
    };
    let claims = verify_hs256(token, &hub.access_key);
    let url = format!("{}{}", hub.origin, uri);
    assert_eq!(claims["aud"], url, "aud is the exact request URL");
    assert!(
        claims["exp"].as_i64().unwrap() > chrono::Utc::now().timestamp(),
        "not expired"
    );
    assert!(uri.query().unwrap().contains("api-version="));
    // The tests' users, groups and connection ids need no percent-decoding.
    let parts: Vec<&str> = rest.split('/').collect();
    let json = || serde_json::from_slice::<Value>(&body).expect("a JSON body");
    match (&method, parts.as_slice()) {
        (&Method::POST, ["groups", group, ":send"]) => {
            hub.sent.lock().unwrap().push(((*group).to_owned(), json()));
            return StatusCode::ACCEPTED;
        }
        (&Method::POST, ["users", user, ":send"]) => {
            hub.notices.lock().unwrap().push(((*user).to_owned(), json()));
            return StatusCode::ACCEPTED;
        }
        _ => {}
    }
    hub.calls.lock().unwrap().push(format!("{method} {path}"));
    let mut connections = hub.connections.lock().unwrap();
    match (&method, parts.as_slice()) {
        (&Method::HEAD, ["users", user]) if hub.online.iter().any(|u| u == user) => StatusCode::OK,
        (&Method::HEAD, ["users", _]) => StatusCode::NOT_FOUND,
        (&Method::DELETE, ["users", user, "groups", group]) => {
            use std::sync::atomic::Ordering::SeqCst;
            let failing = hub.failing_removals.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
            if failing.is_ok() {
                return StatusCode::SERVICE_UNAVAILABLE;
            }
            for (owner, groups) in connections.values_mut() {
                if owner == user {
                    groups.remove(*group);
                }
            }
            StatusCode::NO_CONTENT
        }
        (&Method::PUT, ["groups", group, "connections", connection]) => match connections.get_mut(*connection) {
            Some((_, groups)) => {
                groups.insert((*group).to_owned());
                StatusCode::OK
            }
            None => StatusCode::NOT_FOUND,
        },
        (&Method::DELETE, ["groups", group, "connections", connection]) => match connections.get_mut(*connection) {
            Some((_, groups)) => {
                groups.remove(*group);
                StatusCode::OK
            }
            None => StatusCode::NOT_FOUND,
        },
        _ => StatusCode::METHOD_NOT_ALLOWED,
    }
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
