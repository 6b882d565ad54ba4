//! Sending one Web Push message (RFC 8030) through the `web-push` crate: the payload encrypted
//! with aes128gcm (RFC 8291) for the subscription's keys, a VAPID ES256 token (RFC 8292) from
//! the configured key, and TTL, Urgency and Topic headers. `web-push` builds the request
//! (an `http` 0.2 request) and the [`OutboundClient`] sends it: endpoints are URLs users gave
//! us, so only to public addresses (checked at connect time), and never through a redirect.
//!
//! What the push service answers decides what happens next: 2xx delivered; 404/410 the
//! subscription is gone (the caller deletes it); 429 wait `Retry-After`; 5xx retry after a
//! bounded backoff; anything else is a failure of this one subscription.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tabletalk_clock::SystemClock;

use web_push::{
    ContentEncoding, PartialVapidSignatureBuilder, SubscriptionInfo, Urgency, VapidSignature, VapidSignatureBuilder,
    WebPushMessageBuilder,
};

use super::outbound::{self, OutboundClient, Reach};
use tabletalk_domain::error::{Error, Result};
use tabletalk_domain::subscriptions::PushSubscription;

/// How long a push service may take to answer one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one VAPID token is reused for a push service (`web-push` makes them valid for 12
/// hours).
const SIGNATURE_REUSE: Duration = Duration::from_secs(3600);

/// A signed, encrypted push ready for one subscription.
#[derive(Debug, Clone)]
pub struct Push {
    pub payload: Vec<u8>,
    pub ttl: u32,
    pub urgency: Urgency,
    /// ≤ 32 base64url characters; a newer push with the same topic replaces an undelivered one.
    pub topic: Option<String>,
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// 404 or 410: the subscription has expired; delete it.
    Gone,
    /// 429 or 5xx: try again after this long.
    RetryAfter(Duration),
    /// Anything else: give up on this subscription for this push.
    Failed(String),
}

/// The VAPID key and the outbound HTTP client. Cloning is cheap.
#[derive(Clone)]
pub struct PushSender {
    vapid: PartialVapidSignatureBuilder,
    subject: String,
    public_key: String,
    http: OutboundClient,
    /// VAPID tokens by push service (the token's audience is the endpoint's origin), so a
    /// fan-out signs once per push service rather than once per push. A std mutex, never held
    /// across an await.
    signatures: Arc<Mutex<HashMap<String, (VapidSignature, Instant)>>>,
}

impl std::fmt::Debug for PushSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSender").field("subject", &self.subject).finish()
    }
}

impl PushSender {
    /// `private_key`: the 32-byte P-256 VAPID key, base64url; `subject`: a `mailto:` or
    /// `https:` contact for push services. It reaches public endpoints only; see
    /// [`PushSender::with_client`].
    pub fn new(private_key: &str, subject: &str) -> Result<PushSender> {
        let vapid = VapidSignatureBuilder::from_base64_no_sub(private_key.trim())
            .map_err(|e| Error::Internal(format!("the VAPID private key is not usable: {e}")))?;
        use base64::Engine as _;
        let public_key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(vapid.get_public_key());
        let http = OutboundClient::new(Reach::Public, REQUEST_TIMEOUT)?;
        Ok(PushSender {
            vapid,
            subject: subject.to_owned(),
            public_key,
            http,
            signatures: Arc::default(),
        })
    }

    /// The same sender sending through `client` (development: one that reaches loopback;
    /// tests: one with their own resolver).
    pub fn with_client(mut self, client: OutboundClient) -> PushSender {
        self.http = client;
        self
    }

    /// The VAPID public key browsers subscribe with (`applicationServerKey`), base64url.
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// The encrypted, VAPID-signed request for `push` to `subscription` (all of a push's
    /// crypto, nothing sent).
    pub fn prepare(&self, subscription: &PushSubscription, push: &Push) -> std::result::Result<Prepared, String> {
        let info = SubscriptionInfo::new(
            subscription.endpoint.as_str(),
            subscription.keys.p256dh.as_str(),
            subscription.keys.auth.as_str(),
        );
        let signature = self.signature(&info)?;
        let mut message = WebPushMessageBuilder::new(&info);
        message.set_payload(ContentEncoding::Aes128Gcm, &push.payload);
        message.set_vapid_signature(signature);
        message.set_ttl(push.ttl);
        message.set_urgency(push.urgency);
        if let Some(topic) = &push.topic {
            message.set_topic(topic.clone());
        }
        let message = message.build().map_err(|e| format!("building the push: {e}"))?;
        let request = web_push::request_builder::build_request::<Vec<u8>>(message);
        Ok(Prepared {
            url: request.uri().to_string(),
            headers: request
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
                .collect(),
            body: request.into_body(),
        })
    }

    /// The VAPID token for the push service of `info`, signed anew when older than
    /// [`SIGNATURE_REUSE`].
    ///
    /// Its `aud` is set here, not left to `web-push`: RFC 8292 §2 makes it the origin of the
    /// push resource, port included, and `web-push` 0.11 writes only `scheme://host`, which a
    /// push service on a non-default port refuses. `Origin::ascii_serialization` is exactly
    /// the RFC 6454 origin: the port only when it is not the scheme's default.
    fn signature(&self, info: &SubscriptionInfo) -> std::result::Result<VapidSignature, String> {
        let service = url::Url::parse(&info.endpoint)
            .map_err(|e| format!("the endpoint: {e}"))?
            .origin()
            .ascii_serialization();
        if let Some((signature, at)) = self.signatures.lock().expect("signatures lock").get(&service)
            && at.elapsed() < SIGNATURE_REUSE
        {
            return Ok(signature.clone());
        }
        let mut builder = self.vapid.clone().add_sub_info(info);
        builder.add_claim("sub", self.subject.as_str());
        builder.add_claim("aud", service.as_str());
        let signature = builder.build().map_err(|e| format!("VAPID: {e}"))?;
        let mut signatures = self.signatures.lock().expect("signatures lock");
        if signatures.len() > 1000 {
            signatures.retain(|_, (_, at)| at.elapsed() < SIGNATURE_REUSE);
        }
        signatures.insert(service, (signature.clone(), Instant::now()));
        Ok(signature)
    }

    /// One attempt to deliver `push` to `subscription`.
    pub async fn send(&self, subscription: &PushSubscription, push: &Push) -> Outcome {
        let request = match self.prepare(subscription, push) {
            Ok(request) => request,
            Err(e) => return Outcome::Failed(e),
        };
        let mut outgoing = match self.http.post(&request.url) {
            Ok(outgoing) => outgoing,
            Err(refused) => return Outcome::Failed(format!("the endpoint {refused}")),
        };
        for (name, value) in request.headers {
            outgoing = outgoing.header(name, value);
        }
        let response = match outgoing.body(request.body).send().await {
            Ok(response) => response,
            Err(e) => {
                return match outbound::refusal(&e) {
                    // The endpoint's name resolved to no address it may reach: not worth a retry.
                    Some(refused) => Outcome::Failed(format!("the endpoint was refused: {refused}")),
                    // A timeout or a refused connection is worth another try; anything else is not.
                    None if e.is_timeout() || e.is_connect() => Outcome::RetryAfter(Duration::from_secs(1)),
                    None => Outcome::Failed(e.to_string()),
                };
            }
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        match status {
            200..=299 => Outcome::Delivered,
            404 | 410 => Outcome::Gone,
            429 => Outcome::RetryAfter(retry_after.unwrap_or(Duration::from_secs(1))),
            500..=599 => Outcome::RetryAfter(retry_after.unwrap_or(Duration::from_millis(200))),
            // A redirect is not followed (it could point anywhere): a failure like any other.
            other => Outcome::Failed(format!("the push service answered {other}")),
        }
    }
}

/// A push ready to send: where, its headers, its encrypted body.
#[derive(Debug)]
pub struct Prepared {
    pub url: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    Some(at.duration_since(SystemClock.system_time()).unwrap_or_default())
}

/// A new VAPID key pair, base64url: the 32-byte private key and the 65-byte public key.
pub fn generate_vapid_key() -> Result<(String, String)> {
    use base64::Engine as _;
    let failed = |e: openssl::error::ErrorStack| Error::Internal(format!("key generation: {e}"));
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).map_err(failed)?;
    let key = openssl::ec::EcKey::generate(&group).map_err(failed)?;
    let private = key.private_key().to_vec_padded(32).map_err(failed)?;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(private);
    let public = PushSender::new(&encoded, "mailto:unused@localhost")?
        .public_key()
        .to_owned();
    Ok((encoded, public))
}

/// What the push tests share: a push, a browser's subscription, and the VAPID header a
/// prepared push carries.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::*;

    pub fn a_push() -> Push {
        Push {
            payload: b"{}".to_vec(),
            ttl: 60,
            urgency: Urgency::Normal,
            topic: None,
        }
    }

    /// A subscription at `endpoint` with a fresh browser key.
    pub fn subscription_at(endpoint: impl Into<String>) -> PushSubscription {
        let (_, browser_key) = generate_vapid_key().unwrap();
        PushSubscription {
            endpoint: endpoint.into(),
            keys: tabletalk_domain::subscriptions::PushKeys {
                p256dh: browser_key,
                auth: "BwcHBwcHBwcHBwcHBwcHBw".into(),
            },
            created_at: tabletalk_clock::Clock::now(&SystemClock),
        }
    }

    /// The `authorization` header (`vapid t=…, k=…`) of a prepared push.
    pub fn authorization(prepared: Prepared) -> String {
        let (_, value) = prepared
            .headers
            .into_iter()
            .find(|(name, _)| name == "authorization")
            .unwrap();
        String::from_utf8(value).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{a_push, authorization, subscription_at};
    use super::*;

    /// One VAPID token serves every push to a push service; another service gets its own.
    #[test]
    fn vapid_tokens_are_signed_once_per_push_service() {
        let (key, _) = generate_vapid_key().unwrap();
        let sender = PushSender::new(&key, "mailto:test@example.com").unwrap();
        let authorization =
            |endpoint: &str| authorization(sender.prepare(&subscription_at(endpoint), &a_push()).unwrap());
        let first = authorization("https://push.example.com/a");
        assert_eq!(first, authorization("https://push.example.com/b"));
        assert_ne!(first, authorization("https://other.example.net/a"));
    }

    /// RFC 8292 §2: `aud` is the endpoint's origin, with the port when it is not the default.
    #[test]
    fn the_vapid_audience_is_the_endpoints_origin_with_its_port() {
        let (key, _) = generate_vapid_key().unwrap();
        let sender = PushSender::new(&key, "mailto:test@example.com").unwrap();
        let audience = |endpoint: &str| {
            let value = authorization(sender.prepare(&subscription_at(endpoint), &a_push()).unwrap());
            let token = value.split("t=").nth(1).unwrap().split(',').next().unwrap();
            use base64::Engine as _;
            let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token.split('.').nth(1).unwrap())
                .unwrap();
            let claims: serde_json::Value = serde_json::from_slice(&claims).unwrap();
            claims["aud"].as_str().unwrap().to_owned()
        };
        assert_eq!(
            audience("https://push.example.com:8443/a"),
            "https://push.example.com:8443"
        );
        assert_eq!(audience("https://push.example.com:443/a"), "https://push.example.com");
        assert_eq!(audience("https://push.example.com/a"), "https://push.example.com");
        assert_eq!(audience("http://127.0.0.1:9000/push/x"), "http://127.0.0.1:9000");
    }

    /// A DNS server's answers: every name resolves to `0`.
    struct Answers(std::net::IpAddr);

    impl reqwest::dns::Resolve for Answers {
        fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
            let addr = std::net::SocketAddr::new(self.0, 0);
            Box::pin(async move { Ok(Box::new(std::iter::once(addr)) as reqwest::dns::Addrs) })
        }
    }

    /// A loopback listener answering every request `201 Created`; counts connections.
    async fn push_service() -> (Arc<std::sync::atomic::AtomicUsize>, u16) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    // One request: the head, then as many body bytes as it announces.
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    loop {
                        let Ok(read) = connection.read(&mut buffer).await else {
                            return;
                        };
                        if read == 0 {
                            return;
                        }
                        request.extend_from_slice(&buffer[..read]);
                        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|line| line.strip_prefix("content-length:"))
                                .and_then(|n| n.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if request.len() >= end + 4 + length {
                                break;
                            }
                        }
                    }
                    let answer = b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    let _ = connection.write_all(answer).await;
                });
            }
        });
        (connections, port)
    }

    /// A public-looking name whose DNS answer is 127.0.0.1 is refused when the push connects:
    /// the push service on that address sees no connection. The same name in development mode
    /// reaches it, so it is the answer that was refused.
    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_when_the_push_connects() {
        let (connections, port) = push_service().await;
        let (key, _) = generate_vapid_key().unwrap();
        let loopback = Arc::new(Answers([127, 0, 0, 1].into()));
        let client = OutboundClient::with_resolver(Reach::Public, REQUEST_TIMEOUT, loopback.clone()).unwrap();
        let sender = PushSender::new(&key, "mailto:test@example.com")
            .unwrap()
            .with_client(client);
        let subscription = subscription_at(format!("https://push.example.com:{port}/push/x"));
        let outcome = sender.send(&subscription, &a_push()).await;
        let Outcome::Failed(why) = &outcome else {
            panic!("{outcome:?}")
        };
        assert!(why.contains("push.example.com resolves to no public address"), "{why}");
        assert!(!why.contains("127.0.0.1"), "the private address is not told: {why}");
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0);

        let client = OutboundClient::with_resolver(Reach::Anywhere, REQUEST_TIMEOUT, loopback).unwrap();
        let sender = sender.with_client(client);
        let subscription = subscription_at(format!("http://push.example.com:{port}/push/x"));
        assert_eq!(sender.send(&subscription, &a_push()).await, Outcome::Delivered);
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Outside development, `http` is refused before anything is resolved or connected to.
    #[tokio::test]
    async fn production_pushes_use_https_only() {
        let (connections, port) = push_service().await;
        let (key, _) = generate_vapid_key().unwrap();
        // Loopback answers, so that nothing this test does could reach another host.
        let loopback = Arc::new(Answers([127, 0, 0, 1].into()));
        let client = OutboundClient::with_resolver(Reach::Public, REQUEST_TIMEOUT, loopback).unwrap();
        let sender = PushSender::new(&key, "mailto:test@example.com")
            .unwrap()
            .with_client(client);
        for endpoint in [
            format!("http://push.example.com:{port}/push/x"),
            format!("http://127.0.0.1:{port}/push/x"),
            format!("https://127.0.0.1:{port}/push/x"),
        ] {
            let outcome = sender.send(&subscription_at(endpoint.clone()), &a_push()).await;
            let Outcome::Failed(why) = &outcome else {
                panic!("{endpoint}: {outcome:?}")
            };
            assert!(
                why.contains("https") || why.contains("not a public address"),
                "{endpoint}: {why}"
            );
        }
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
        let parsed = parse_retry_after(&later).unwrap();
        assert!(
            parsed <= Duration::from_secs(60) && parsed >= Duration::from_secs(58),
            "{parsed:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
