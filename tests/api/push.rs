//! Web Push end to end, against a push service inside the test that does what a browser's push
//! service and service worker do together: it checks each request's VAPID token (RFC 8292)
//! against the server's public key and decrypts the payload (RFC 8291) with the subscription's
//! private key — an implementation independent of the server's (RustCrypto here, the
//! `web-push` crate there), itself checked against RFC 8291's Appendix A vector.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes128Gcm, Nonce};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hkdf::Hkdf;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::{PublicKey, SecretKey};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::helpers::{Backend, TestApp, backend_tests, spawn_app_with, spawn_push_app};

backend_tests!(each_member_gets_the_pushes_their_settings_ask_for);

// ---- RFC 8291 from the user agent's side ------------------------------------------------------

/// The keys derived for one message: content-encryption key and nonce.
fn derive(ecdh: &[u8], auth: &[u8], ua_public: &[u8], as_public: &[u8], salt: &[u8]) -> ([u8; 16], [u8; 12]) {
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(ua_public);
    key_info.extend_from_slice(as_public);
    let mut ikm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(auth), ecdh)
        .expand(&key_info, &mut ikm)
        .unwrap();
    let prk = Hkdf::<Sha256>::new(Some(salt), &ikm);
    let (mut cek, mut nonce) = ([0u8; 16], [0u8; 12]);
    prk.expand(b"Content-Encoding: aes128gcm\0", &mut cek).unwrap();
    prk.expand(b"Content-Encoding: nonce\0", &mut nonce).unwrap();
    (cek, nonce)
}

fn uncompressed(key: &PublicKey) -> Vec<u8> {
    key.to_encoded_point(false).as_bytes().to_vec()
}

/// Decrypts an aes128gcm body (one record) for the subscription `ua_secret` / `auth`.
pub(crate) fn decrypt(ua_secret: &SecretKey, auth: &[u8], body: &[u8]) -> Vec<u8> {
    let (salt, rest) = body.split_at(16);
    let id_len = rest[4] as usize;
    let (as_public, ciphertext) = rest[5..].split_at(id_len);
    let as_key = PublicKey::from_sec1_bytes(as_public).expect("the sender's key is a P-256 point");
    let ecdh = p256::ecdh::diffie_hellman(ua_secret.to_nonzero_scalar(), as_key.as_affine());
    let ua_public = uncompressed(&ua_secret.public_key());
    let (cek, nonce) = derive(ecdh.raw_secret_bytes(), auth, &ua_public, as_public, salt);
    let mut padded = Aes128Gcm::new_from_slice(&cek)
        .unwrap()
        .decrypt(Nonce::from_slice(&nonce), ciphertext)
        .expect("the record decrypts and authenticates");
    // The plaintext ends with the 0x02 delimiter of the last record, then zero padding.
    while padded.last() == Some(&0) {
        padded.pop();
    }
    assert_eq!(padded.pop(), Some(2), "the last record's delimiter");
    padded
}

/// Encrypts as the application server would, with a given ephemeral key and salt.
fn encrypt_with(as_secret: &SecretKey, salt: &[u8], ua_public: &[u8], auth: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let ua_key = PublicKey::from_sec1_bytes(ua_public).unwrap();
    let ecdh = p256::ecdh::diffie_hellman(as_secret.to_nonzero_scalar(), ua_key.as_affine());
    let as_public = uncompressed(&as_secret.public_key());
    let (cek, nonce) = derive(ecdh.raw_secret_bytes(), auth, ua_public, &as_public, salt);
    let mut record = plaintext.to_vec();
    record.push(2);
    let ciphertext = Aes128Gcm::new_from_slice(&cek)
        .unwrap()
        .encrypt(Nonce::from_slice(&nonce), record.as_slice())
        .unwrap();
    let mut body = salt.to_vec();
    body.extend_from_slice(&4096u32.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(&as_public);
    body.extend_from_slice(&ciphertext);
    body
}

pub(crate) fn b64(text: &str) -> Vec<u8> {
    B64.decode(text).unwrap()
}

/// RFC 8291 Appendix A, both ways: the server side's body byte for byte, and the user agent's
/// decryption of it.
#[test]
fn rfc_8291_appendix_a() {
    let plaintext = b"When I grow up, I want to be a watermelon";
    let as_secret = SecretKey::from_slice(&b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")).unwrap();
    let ua_secret = SecretKey::from_slice(&b64("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")).unwrap();
    let ua_public = b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4");
    assert_eq!(uncompressed(&ua_secret.public_key()), ua_public);
    assert_eq!(
        uncompressed(&as_secret.public_key()),
        b64("BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8")
    );
    let salt = b64("DGv6ra1nlYgDCS1FRnbzlw");
    let auth = b64("BTBZMqHH6r4Tts7J_aSIgg");
    let body = encrypt_with(&as_secret, &salt, &ua_public, &auth, plaintext);
    let expected = b64(concat!(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8w",
        "EqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    ));
    assert_eq!(body, expected, "the full body");
    assert_eq!(decrypt(&ua_secret, &auth, &expected), plaintext);
}

// ---- The push service -------------------------------------------------------------------------

/// One push as the service received it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub device: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// A push service listening on a port of its own (never 443), as the e2e tests' are: it checks
/// every push's VAPID token as a real push service does (RFC 8292 §4: the signature against the
/// key in `k`, `exp` within 24 hours, and `aud` exactly the origin of the endpoint it was sent
/// to — port included) and refuses a push that fails with 403, recorded in `refused`.
#[derive(Clone, Default)]
pub(crate) struct Service {
    /// `http://127.0.0.1:<port>`: what every token's `aud` must be.
    pub origin: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// Pushes refused for their VAPID token, with why.
    pub refused: Arc<Mutex<Vec<String>>>,
    /// Devices whose subscription is gone: answered 410.
    pub gone: Arc<Mutex<Vec<String>>>,
    /// How long the service takes to answer each push.
    pub delay: Arc<Mutex<Duration>>,
    /// Pushes whose answer has been sent (after `delay`); `received` counts arrivals.
    pub answered: Arc<Mutex<usize>>,
}

async fn receive(
    State(service): State<Service>,
    Path(device): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> AxumStatus {
    if let Err(why) = check_vapid(&headers, &service.origin) {
        service.refused.lock().unwrap().push(why);
        return AxumStatus::FORBIDDEN;
    }
    let gone = service.gone.lock().unwrap().contains(&device);
    service.received.lock().unwrap().push(Received {
        device,
        headers,
        body: body.to_vec(),
    });
    let delay = *service.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    *service.answered.lock().unwrap() += 1;
    if gone { AxumStatus::GONE } else { AxumStatus::CREATED }
}

pub(crate) async fn start_service() -> (Service, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = Service {
        origin: format!("http://{addr}"),
        ..Service::default()
    };
    let app = axum::Router::new()
        .route("/push/{device}", axum::routing::post(receive))
        .with_state(service.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (service, addr)
}

/// A browser's subscription: its keys and endpoint.
pub(crate) struct Device {
    pub name: String,
    pub secret: SecretKey,
    pub auth: [u8; 16],
    pub endpoint: String,
}

impl Device {
    pub fn new(name: &str, addr: SocketAddr) -> Device {
        Device {
            name: name.to_owned(),
            secret: SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng),
            auth: rand::random(),
            endpoint: format!("http://{addr}/push/{name}"),
        }
    }

    fn subscription(&self) -> Value {
        json!({
            "endpoint": self.endpoint,
            "keys": { "p256dh": B64.encode(uncompressed(&self.secret.public_key())), "auth": B64.encode(self.auth) },
            "expirationTime": null
        })
    }
}

/// The push service's check of a VAPID authorization (RFC 8292): the token signed by the key in
/// `k`, `exp` in the next 24 hours, `aud` exactly `origin`. Returns the claims.
fn check_vapid(headers: &HeaderMap, origin: &str) -> Result<Value, String> {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or("no authorization")?;
    let rest = authorization.strip_prefix("vapid ").ok_or("not the vapid scheme")?;
    let parts: HashMap<&str, &str> = rest.split(',').filter_map(|part| part.trim().split_once('=')).collect();
    let (token, k) = (parts.get("t").ok_or("no t")?, parts.get("k").ok_or("no k")?);
    let (signed, signature) = token.rsplit_once('.').ok_or("not a JWT")?;
    let key = B64
        .decode(k)
        .ok()
        .and_then(|k| VerifyingKey::from_sec1_bytes(&k).ok())
        .ok_or("k is not a P-256 key")?;
    let signature = B64
        .decode(signature)
        .ok()
        .and_then(|s| Signature::from_slice(&s).ok())
        .ok_or("not a raw r||s signature")?;
    key.verify(signed.as_bytes(), &signature)
        .map_err(|_| "the signature does not verify")?;
    let (_, claims) = signed.split_once('.').ok_or("not a JWT")?;
    let claims: Value = B64
        .decode(claims)
        .ok()
        .and_then(|c| serde_json::from_slice(&c).ok())
        .ok_or("the claims are not JSON")?;
    let now = chrono::Utc::now().timestamp();
    let exp = claims["exp"].as_i64().ok_or("no exp")?;
    if exp <= now || exp > now + 24 * 3600 {
        return Err(format!("exp {exp} is not within 24 hours"));
    }
    if claims["aud"] != origin {
        return Err(format!("aud {} is not the endpoint's origin {origin}", claims["aud"]));
    }
    Ok(claims)
}

/// Checks a push's VAPID authorization against the server's public key; returns its claims.
pub(crate) fn verify_vapid(headers: &HeaderMap, public_key: &str) -> Value {
    let authorization = headers["authorization"].to_str().unwrap();
    let rest = authorization.strip_prefix("vapid ").expect("vapid scheme");
    let parts: HashMap<&str, &str> = rest.split(',').filter_map(|part| part.trim().split_once('=')).collect();
    assert_eq!(parts["k"], public_key, "k is the server's VAPID key");
    let token = parts["t"];
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let key = VerifyingKey::from_sec1_bytes(&b64(public_key)).unwrap();
    let signature = Signature::from_slice(&b64(signature)).expect("a raw r||s signature");
    key.verify(signed.as_bytes(), &signature)
        .expect("the VAPID token verifies");
    let (header, claims) = signed.split_once('.').unwrap();
    let header: Value = serde_json::from_slice(&b64(header)).unwrap();
    assert_eq!(header["alg"], "ES256");
    serde_json::from_slice(&b64(claims)).unwrap()
}

pub(crate) async fn subscribe(app: &TestApp, user: &str, device: &Device) {
    let reply = app
        .act(Method::PUT, user, "/push/subscriptions", device.subscription())
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

pub(crate) async fn set_level(app: &TestApp, user: &str, room: &str, change: Value) {
    let reply = app
        .act(Method::PATCH, user, &format!("/rooms/{room}/members/me"), change)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

/// Waits until the service has received `count` pushes, then a little longer to catch extras.
pub(crate) async fn wait_for(service: &Service, count: usize) -> Vec<Received> {
    for _ in 0..200 {
        if service.received.lock().unwrap().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    service.received.lock().unwrap().clone()
}

async fn each_member_gets_the_pushes_their_settings_ask_for(backend: Backend) {
    let (service, addr) = start_service().await;
    let vapid = SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let vapid_key = B64.encode(vapid.to_bytes());
    let app = spawn_app_with(
        &backend,
        &[
            ("TABLETALK_VAPID_PRIVATE_KEY", vapid_key.as_str()),
            ("TABLETALK_VAPID_SUBJECT", "mailto:ops@example.com"),
            ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "true"),
        ],
    );
    let public_key = app
        .call(Method::GET, "/api/push/vapidPublicKey", Some("alice"), None)
        .await;
    let public_key = public_key.body["publicKey"].as_str().unwrap().to_owned();
    assert_eq!(b64(&public_key), uncompressed(&vapid.public_key()));

    let room = app.create_room("alice").await;
    let devices: Vec<Device> = ["alice", "bob", "carol", "dave", "erin", "frank-gone", "frank"]
        .iter()
        .map(|name| Device::new(name, addr))
        .collect();
    service.gone.lock().unwrap().push("frank-gone".into());
    for device in &devices {
        let user = device.name.trim_end_matches("-gone");
        if user != "alice" {
            app.join(user, &room).await;
        }
        subscribe(&app, user, device).await;
    }
    set_level(&app, "carol", &room, json!({ "notifications": "Mentions" })).await;
    set_level(&app, "dave", &room, json!({ "notifications": "Never" })).await;
    set_level(&app, "erin", &room, json!({ "muted": true })).await;

    let plain = app.post("alice", &room, "<p>lunch at <b>noon</b>?</p>").await;
    // bob, frank and frank's gone endpoint.
    let first = wait_for(&service, 3).await;
    let mention = r#"<p>and <span data-type="mention" data-id="carol">@carol</span> too</p>"#;
    let mentioned = app.post("alice", &room, mention).await;
    let all = wait_for(&service, first.len() + 3).await;

    let mut per_device: HashMap<String, Vec<Value>> = HashMap::new();
    for push in &all {
        let claims = verify_vapid(&push.headers, &public_key);
        assert_eq!(claims["sub"], "mailto:ops@example.com");
        assert_eq!(claims["aud"], service.origin, "the endpoint's origin, port included");
        let exp = claims["exp"].as_i64().unwrap();
        assert!(exp > chrono::Utc::now().timestamp() && exp <= chrono::Utc::now().timestamp() + 24 * 3600);
        assert_eq!(push.headers["content-encoding"], "aes128gcm");
        assert_eq!(push.headers["ttl"], "14400");
        assert!(push.headers["topic"].len() <= 32);
        if push.device == "frank-gone" {
            continue; // answered 410, never read
        }
        let device = devices.iter().find(|d| d.name == push.device).unwrap();
        let plaintext = decrypt(&device.secret, &device.auth, &push.body);
        let payload: Value = serde_json::from_slice(&plaintext).unwrap();
        assert_eq!(payload["roomId"], room.as_str());
        assert_eq!(payload["senderName"], "alice (test)");
        per_device.entry(push.device.clone()).or_default().push(payload);
    }
    let ids = |device: &str| -> Vec<String> {
        let mut ids: Vec<String> = per_device
            .get(device)
            .map(|p| p.iter().map(|p| p["messageId"].as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        ids.sort();
        ids
    };
    let mut both = vec![plain.clone(), mentioned.clone()];
    both.sort();
    assert_eq!(
        ids("bob"),
        both,
        "{backend:?}: an All member gets exactly one push per message"
    );
    assert_eq!(
        ids("frank"),
        both,
        "{backend:?}: a gone endpoint never blocks the others"
    );
    assert_eq!(
        ids("carol"),
        [mentioned.clone()],
        "{backend:?}: Mentions only when mentioned"
    );
    assert!(
        ids("dave").is_empty() && ids("erin").is_empty(),
        "{backend:?}: Never and muted get none"
    );
    assert!(ids("alice").is_empty(), "{backend:?}: the sender never");
    let preview = per_device["bob"]
        .iter()
        .find(|p| p["messageId"] == plain.as_str())
        .unwrap();
    assert_eq!(preview["preview"], "lunch at noon?");
    assert_eq!(preview["mentioned"], false);
    let carols = &per_device["carol"][0];
    assert_eq!(carols["mentioned"], true);

    // The 410 endpoint's subscription is gone; frank's other one stays.
    let franks = app
        .call(Method::GET, "/api/push/subscriptions", Some("frank"), None)
        .await;
    let endpoints: Vec<&str> = franks
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["endpoint"].as_str().unwrap())
        .collect();
    assert_eq!(endpoints, [devices[6].endpoint.as_str()]);
    let gone_tries = all.iter().filter(|p| p.device == "frank-gone").count();
    assert_eq!(gone_tries, 1, "a gone endpoint is tried once, then forgotten");
}

#[tokio::test]
async fn subscriptions_are_validated_replaced_and_removed() {
    let backend = Backend::embedded();
    let app = spawn_app_with(&backend, &[("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "false")]);
    let device = Device::new("d", "127.0.0.1:9".parse().unwrap());
    // Loopback endpoints are refused outside development mode.
    app.act(Method::PUT, "alice", "/push/subscriptions", device.subscription())
        .await
        .assert_error(422, "VALIDATION");
    let mut public = device.subscription();
    public["endpoint"] = json!("https://push.example.com/send/abc");
    let first = app
        .act(Method::PUT, "alice", "/push/subscriptions", public.clone())
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    public["keys"]["auth"] = json!(B64.encode([7u8; 16]));
    app.act(Method::PUT, "alice", "/push/subscriptions", public.clone())
        .await;
    let mine = app
        .call(Method::GET, "/api/push/subscriptions", Some("alice"), None)
        .await;
    assert_eq!(
        mine.body.as_array().unwrap().len(),
        1,
        "re-registering an endpoint replaces it"
    );
    assert_eq!(mine.body[0]["keys"]["auth"], B64.encode([7u8; 16]));
    for bad in [
        json!({ "p256dh": "AAAA", "auth": B64.encode([1u8; 16]) }),
        json!({ "p256dh": public["keys"]["p256dh"], "auth": "xx" }),
    ] {
        let mut broken = public.clone();
        broken["keys"] = bad;
        app.act(Method::PUT, "alice", "/push/subscriptions", broken)
            .await
            .assert_error(422, "VALIDATION");
    }
    let bobs = app
        .call(Method::GET, "/api/push/subscriptions", Some("bob"), None)
        .await;
    assert_eq!(bobs.body, json!([]), "subscriptions are per user");
    let removed = app
        .act(
            Method::DELETE,
            "alice",
            "/push/subscriptions",
            json!({ "endpoint": public["endpoint"] }),
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let mine = app
        .call(Method::GET, "/api/push/subscriptions", Some("alice"), None)
        .await;
    assert_eq!(mine.body, json!([]));
    // Without a VAPID key there is no push, and no key to hand out.
    app.call(Method::GET, "/api/push/vapidPublicKey", Some("alice"), None)
        .await
        .assert_error(404, "NOT_FOUND");
}

/// RFC 8292 §2: a token's `aud` is the origin of the push resource, so a push service on a port
/// other than the scheme's default (as every push service in these tests is) is named with its
/// port; one that checks `aud` refuses a token naming only the host.
#[tokio::test]
async fn a_push_service_on_a_non_default_port_accepts_the_vapid_audience() {
    let (service, addr) = start_service().await;
    assert_ne!(addr.port(), 80);
    let app = spawn_push_app(&Backend::embedded(), &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    subscribe(&app, "bob", &Device::new("bob", addr)).await;
    app.post("alice", &room, "<p>hello</p>").await;
    for _ in 0..200 {
        if !service.received.lock().unwrap().is_empty() || !service.refused.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let refused = service.refused.lock().unwrap().clone();
    assert!(refused.is_empty(), "the push service refused: {refused:?}");
    let received = service.received.lock().unwrap().clone();
    assert_eq!(received.len(), 1, "the push arrived");
    let claims = check_vapid(&received[0].headers, &service.origin).unwrap();
    assert_eq!(claims["aud"], format!("http://127.0.0.1:{}", addr.port()));
}
