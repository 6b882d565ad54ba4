//! Entra ID to the table service: with a connection string that names no key, the binary gets a
//! bearer token from its managed identity — here the App Service identity protocol
//! (`IDENTITY_ENDPOINT` + `IDENTITY_HEADER`), served by a stand-in that issues tokens shaped
//! like Entra ID's — and Azurite, run by `tests/run` with `--oauth basic` over HTTPS, checks
//! every request's token (issuer, audience, lifetime). A token for the wrong audience is
//! refused, so the success is the token's doing. Attachments go the same way to Azurite's blob
//! service, with links signed as user delegation SAS, which Azurite verifies.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::IntoResponse;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::messages::get_message;
use crate::helpers::{SECRET, TestApp};

/// The managed identity endpoint stand-in: the audience its tokens carry, and the requests.
#[derive(Clone)]
struct Identity {
    audience: &'static str,
    requests: Arc<Mutex<Vec<String>>>,
}

const IDENTITY_HEADER: &str = "test-identity-header";

async fn token(
    State(identity): State<Identity>,
    headers: HeaderMap,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    if headers.get("x-identity-header").and_then(|v| v.to_str().ok()) != Some(IDENTITY_HEADER) {
        return AxumStatus::UNAUTHORIZED.into_response();
    }
    identity
        .requests
        .lock()
        .unwrap()
        .push(query.get("resource").cloned().unwrap_or_default());
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "aud": identity.audience,
        "iss": "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",
        "iat": now - 60, "nbf": now - 60, "exp": now + 3600,
        "oid": "5a6f0e1d-2b3c-4d5e-8f90-123456789abc", "tid": "72f988bf-86f1-41af-91ab-2d7cd011db47",
        "appid": "00000000-0000-0000-0000-00000000feed", "idtyp": "app"
    });
    let b64 = |v: &Value| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string());
    // Azurite's basic OAuth checks the claims, not the signature.
    let access_token = format!(
        "{}.{}.c2lnbmF0dXJl",
        b64(&json!({ "alg": "RS256", "typ": "JWT" })),
        b64(&claims)
    );
    Json(json!({
        "access_token": access_token,
        "expires_on": (now + 3600).to_string(),
        "resource": "https://storage.azure.com",
        "token_type": "Bearer",
        "client_id": "00000000-0000-0000-0000-00000000feed"
    }))
    .into_response()
}

/// The OAuth Azurite and its certificate (`tests/run` starts it).
fn oauth_azurite() -> Option<(String, String)> {
    let endpoint = crate::helpers::provided("TABLETALK_TEST_AZURITE_OAUTH")?;
    Some((endpoint, crate::helpers::provided("TABLETALK_TEST_AZURITE_CERT")?))
}

/// The identity stand-in, and the settings that point the binary at it and at the OAuth Azurite.
async fn identity_settings(endpoint: &str, cert: &str, audience: &'static str) -> (Identity, Vec<(String, String)>) {
    let identity = Identity {
        audience,
        requests: Arc::default(),
    };
    let router = axum::Router::new()
        .route("/msi/token", axum::routing::get(token))
        .with_state(identity.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let identity_endpoint = format!("http://{}/msi/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let prefix = format!("e{}", uuid::Uuid::new_v4().simple());
    let settings = [
        ("TABLETALK_STORAGE_CONNECTION", format!("TableEndpoint={endpoint};")),
        ("TABLETALK_TABLE_PREFIX", prefix[..12].to_owned()),
        ("TABLETALK_JWT_SECRET", SECRET.to_owned()),
        ("IDENTITY_ENDPOINT", identity_endpoint),
        ("IDENTITY_HEADER", IDENTITY_HEADER.to_owned()),
        ("SSL_CERT_FILE", cert.to_owned()),
    ];
    (identity, settings.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

async fn app_with_identity(endpoint: &str, cert: &str) -> (TestApp, Identity) {
    let (identity, settings) = identity_settings(endpoint, cert, "https://storage.azure.com").await;
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = crate::helpers::spawn_app_with(&crate::helpers::Backend::embedded(), &settings);
    (app, identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_are_reached_with_a_managed_identity_token() {
    let Some((endpoint, cert)) = oauth_azurite() else {
        return;
    };
    let (app, identity) = app_with_identity(&endpoint, &cert).await;
    let room = app.create_room("alice").await;
    let id = app.post("alice", &room, "<p>no account key anywhere</p>").await;
    let read = get_message(&app, "alice", &room, &id).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    assert_eq!(read.body["text"], "<p>no account key anywhere</p>");
    let requests = identity.requests.lock().unwrap().clone();
    assert!(!requests.is_empty(), "a token was requested");
    assert!(
        requests.iter().all(|r| r == "https://storage.azure.com"),
        "{requests:?}"
    );
    assert!(
        requests.len() <= 2,
        "tokens are cached, not fetched per request: {requests:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_another_audience_is_refused_by_the_service() {
    let Some((endpoint, cert)) = oauth_azurite() else {
        return;
    };
    let (identity, settings) = identity_settings(&endpoint, &cert, "https://vault.azure.net").await;
    // The binary creates its tables at start: with a token the service refuses, it cannot.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tabletalk"))
        .args(["serve", "--port", "0", "--settings", "none"])
        .env_remove("FUNCTIONS_CUSTOMHANDLER_PORT")
        .envs(settings)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(30), output)
        .await
        .expect("the binary gave up within 30 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cannot open storage"), "{stderr}");
    assert!(!identity.requests.lock().unwrap().is_empty(), "a token was requested");
}

/// Attachments without an account key: the binary reaches Azurite's blob service (`--oauth
/// basic`, HTTPS) with its managed identity's token, and signs upload and download links as
/// user delegation SAS with a key it got from the service — which Azurite checks, so a link
/// that works proves the signature, and a tampered one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachment_links_are_user_delegation_signatures_from_the_managed_identity() {
    let Some(blob) = crate::helpers::provided("TABLETALK_TEST_AZURITE_BLOB_OAUTH") else {
        return;
    };
    let Some(cert) = crate::helpers::provided("TABLETALK_TEST_AZURITE_CERT") else {
        return;
    };
    let (identity, mut settings) = identity_settings(&blob, &cert, "https://storage.azure.com").await;
    // The tables are the embedded store here: only the blob service needs the identity.
    settings.retain(|(name, _)| name != "TABLETALK_STORAGE_CONNECTION" && name != "TABLETALK_TABLE_PREFIX");
    let container = format!("e{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    settings.push((
        "TABLETALK_BLOB_CONNECTION".into(),
        format!("BlobEndpoint={blob};AccountName=devstoreaccount1"),
    ));
    settings.push(("TABLETALK_ATTACHMENTS_CONTAINER".into(), container));
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = crate::helpers::spawn_app_with(&crate::helpers::Backend::embedded(), &settings);
    let trusted = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&cert).unwrap()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    let room = app.create_room("alice").await;
    let declared = app
        .call(
            reqwest::Method::POST,
            &format!("/api/rooms/{room}/uploads"),
            Some("alice"),
            Some(json!({ "name": "a.txt", "mime": "text/plain", "size": 5 })),
        )
        .await;
    assert_eq!(declared.status, StatusCode::CREATED, "{}", declared.body);
    let url = declared.body["upload"]["url"].as_str().unwrap();
    assert!(url.contains("skoid=") && !url.contains("AccountKey"), "{url}");
    let put = trusted
        .put(url)
        .header("content-type", "text/plain")
        .header("x-ms-blob-type", "BlockBlob")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED, "{:?}", put.text().await);
    let id = declared.body["attachment"]["id"].as_str().unwrap();
    let sent = app
        .call(
            reqwest::Method::POST,
            &format!("/api/rooms/{room}/messages"),
            Some("alice"),
            Some(json!({ "text": "file", "attachments": [id] })),
        )
        .await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let redirect = trusted
        .get(format!(
            "{}{}",
            app.base,
            sent.body["attachments"][0]["url"].as_str().unwrap()
        ))
        .bearer_auth(crate::helpers::token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), StatusCode::FOUND);
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    let got = trusted.get(&location).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.headers()["content-disposition"], "attachment; filename=\"a.txt\"");
    assert_eq!(got.text().await.unwrap(), "hello");
    let (head, sig) = location.split_once("sig=").unwrap();
    let tampered = format!(
        "{head}sig={}{}",
        if sig.starts_with('A') { "B" } else { "A" },
        &sig[1..]
    );
    assert_eq!(
        trusted.get(&tampered).send().await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert!(!identity.requests.lock().unwrap().is_empty(), "a token was requested");
}
