//! Where pushes may go: the server POSTs to URLs its users gave it, so outside development a
//! push reaches only public addresses — judged by what the endpoint's name resolves to when
//! the push connects, not by how it was written when it was registered — and never follows a
//! redirect.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode as AxumStatus, header};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use p256::SecretKey;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use sha2::Digest;
use tabletalk::storage::{Entity, RangeQuery, UpdateMode, Value};

use crate::helpers::{Backend, spawn_app_with, spawn_push_app, vapid_key};
use crate::push::{Device, start_service, subscribe};

/// A TCP listener on loopback that counts the connections made to it and drops each at once.
async fn counting_listener() -> (Arc<AtomicUsize>, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((connection, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(connection);
        }
    });
    (count, port)
}

/// Waits until no event of `room` is pending in the outbox: the notification run for every
/// message sent has finished (in-process delivery clears the row once `notify` returns).
async fn wait_until_notified(backend: &Backend, room: &str) {
    let chat = backend.chat().await;
    for _ in 0..600 {
        let pending = RangeQuery::prefix(room, tabletalk::store::schema::OUTBOX_PREFIX, 100);
        let (rows, _) = chat
            .store()
            .tables()
            .query_up_to(&chat.store().schema().messages, &pending, 100)
            .await
            .unwrap();
        if rows.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the message's notification run did not finish");
}

/// A stored subscription to a loopback host — registered before the check existed (stored
/// here as the server stores one) — is refused when the push is sent: nothing reaches the
/// address. `localhost` is refused by its name, before anything is resolved; a public-looking
/// name refused only by what it resolves to at connect time is the resolver's case, in
/// `outbound`'s and `push::sender`'s tests, which give it a DNS answer of their own.
#[tokio::test]
async fn a_stored_subscription_to_localhost_is_refused_when_the_push_is_sent() {
    let backend = Backend::embedded();
    let (connections, port) = counting_listener().await;
    let vapid = vapid_key();
    let app = spawn_app_with(
        &backend,
        &[
            ("TABLETALK_VAPID_PRIVATE_KEY", vapid.as_str()),
            ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "false"),
        ],
    );
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    // `localhost` resolves to 127.0.0.1 through the system resolver, as a rebound name would.
    let endpoint = format!("https://localhost:{port}/push/bob");
    let browser = SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let row_key: String = sha2::Sha256::digest(endpoint.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let chat = backend.chat().await;
    let subscription = Entity::new("bob", row_key)
        .with("endpoint", Value::String(endpoint.clone()))
        .with(
            "p256dh",
            Value::String(B64.encode(browser.public_key().to_encoded_point(false).as_bytes())),
        )
        .with("auth", Value::String(B64.encode([7u8; 16])))
        .with("createdAt", Value::datetime(chrono::Utc::now()));
    chat.store()
        .tables()
        .upsert(
            &chat.store().schema().push_subscriptions,
            &subscription,
            UpdateMode::Replace,
        )
        .await
        .unwrap();

    app.post("alice", &room, "<p>hello</p>").await;
    wait_until_notified(&backend, &room).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "a push connected to 127.0.0.1 through a name"
    );
}

/// A push service's redirect is its answer, not a new target: the push is not re-sent there.
#[tokio::test]
async fn a_push_service_redirect_is_not_followed() {
    let backend = Backend::embedded();
    let (target, target_addr) = start_service().await;
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let location = format!("http://{target_addr}/push/bob");
    let redirector = axum::Router::new().route(
        "/push/{device}",
        axum::routing::post(move || {
            let (counter, location) = (Arc::clone(&counter), location.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut headers = HeaderMap::new();
                headers.insert(header::LOCATION, HeaderValue::from_str(&location).unwrap());
                (AxumStatus::TEMPORARY_REDIRECT, headers)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let redirector_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, redirector).await.unwrap() });

    let app = spawn_push_app(&backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    subscribe(&app, "bob", &Device::new("bob", redirector_addr)).await;
    app.post("alice", &room, "<p>hello</p>").await;
    wait_until_notified(&backend, &room).await;
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the push was sent to its endpoint once");
    let followed = target.received.lock().unwrap().len() + target.refused.lock().unwrap().len();
    assert_eq!(followed, 0, "the redirect was followed");
}
