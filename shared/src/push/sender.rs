//! Sending one Web Push message (RFC 8030) through the `web-push` crate: the payload encrypted
//! with aes128gcm (RFC 8291) for the subscription's keys, a VAPID ES256 token (RFC 8292) from
//! the configured key, and TTL, Urgency and Topic headers. `web-push` builds the request
//! (an `http` 0.2 request) and reqwest sends it.
//!
//! What the push service answers decides what happens next: 2xx delivered; 404/410 the
//! subscription is gone (the caller deletes it); 429 wait `Retry-After`; 5xx retry after a
//! bounded backoff; anything else is a failure of this one subscription.

use std::time::Duration;

use web_push::{
    ContentEncoding, PartialVapidSignatureBuilder, SubscriptionInfo, Urgency, VapidSignatureBuilder,
    WebPushMessageBuilder,
};

use super::subscriptions::PushSubscription;
use crate::error::{Error, Result};

/// How long a push service may take to answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The VAPID key and an HTTP client. Cloning is cheap.
#[derive(Clone)]
pub struct PushSender {
    vapid: PartialVapidSignatureBuilder,
    subject: String,
    public_key: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for PushSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSender").field("subject", &self.subject).finish()
    }
}

impl PushSender {
    /// `private_key`: the 32-byte P-256 VAPID key, base64url; `subject`: a `mailto:` or
    /// `https:` contact for push services.
    pub fn new(private_key: &str, subject: &str) -> Result<PushSender> {
        let vapid = VapidSignatureBuilder::from_base64_no_sub(private_key.trim())
            .map_err(|e| Error::Internal(format!("the VAPID private key is not usable: {e}")))?;
        use base64::Engine as _;
        let public_key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(vapid.get_public_key());
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Error::Internal(format!("push client: {e}")))?;
        Ok(PushSender {
            vapid,
            subject: subject.to_owned(),
            public_key,
            http,
        })
    }

    /// The VAPID public key browsers subscribe with (`applicationServerKey`), base64url.
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// One attempt to deliver `push` to `subscription`.
    pub async fn send(&self, subscription: &PushSubscription, push: &Push) -> Outcome {
        let info = SubscriptionInfo::new(
            subscription.endpoint.as_str(),
            subscription.keys.p256dh.as_str(),
            subscription.keys.auth.as_str(),
        );
        let mut signature = self.vapid.clone().add_sub_info(&info);
        signature.add_claim("sub", self.subject.as_str());
        let signature = match signature.build() {
            Ok(signature) => signature,
            Err(e) => return Outcome::Failed(format!("VAPID: {e}")),
        };
        let mut message = WebPushMessageBuilder::new(&info);
        message.set_payload(ContentEncoding::Aes128Gcm, &push.payload);
        message.set_vapid_signature(signature);
        message.set_ttl(push.ttl);
        message.set_urgency(push.urgency);
        if let Some(topic) = &push.topic {
            message.set_topic(topic.clone());
        }
        let message = match message.build() {
            Ok(message) => message,
            Err(e) => return Outcome::Failed(format!("building the push: {e}")),
        };
        let request = web_push::request_builder::build_request::<Vec<u8>>(message);
        let mut outgoing = self.http.post(request.uri().to_string());
        for (name, value) in request.headers() {
            outgoing = outgoing.header(name.as_str(), value.as_bytes());
        }
        let response = match outgoing.body(request.into_body()).send().await {
            Ok(response) => response,
            // A timeout or a refused connection is worth another try; anything else is not.
            Err(e) if e.is_timeout() || e.is_connect() => return Outcome::RetryAfter(Duration::from_secs(1)),
            Err(e) => return Outcome::Failed(e.to_string()),
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
            other => Outcome::Failed(format!("the push service answered {other}")),
        }
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

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
