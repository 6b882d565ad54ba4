//! Calling outgoing webhooks: the secret's sealing, the signature, and the POST through the
//! one SSRF-safe [`OutboundClient`] (the push endpoints' rules: `https` to public addresses
//! only, checked when connecting, no redirects, no proxy — loopback only where the operator
//! allowed private endpoints, as for push).
//!
//! **The secret.** The server must sign with it, so a hash would not do. It is stored sealed:
//! AES-256-GCM under a key derived (HMAC-SHA256, label `tabletalk outgoing webhook secrets`)
//! from the operator's `TABLETALK_WEBHOOK_SEALING_KEY`, else from the HS256 token secret, with
//! a fresh 96-bit nonce per secret and the room and endpoint ids as associated data, so a
//! sealed secret copied onto another row does not open. A leaked table alone gives nobody a
//! secret. It is shown once, at creation, and never logged (no type holding it prints it).
//!
//! **The signature** (docs/OUTGOING_WEBHOOKS.md): `X-Tabletalk-Signature: t=<unix seconds>,
//! v1=<hex>` where `<hex>` is HMAC-SHA256 with the secret over `<t>.<raw body>`, as Stripe's.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::outbound::{self, OutboundClient};
use tabletalk_domain::error::{Error, Result};
use tabletalk_domain::outgoing::{DELIVERY_HEADER, EVENT_HEADER, HookEvent, SECRET_PREFIX, SIGNATURE_HEADER};

/// How long an endpoint may take to answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a failure's description a delivery keeps.
const MAX_ERROR_CHARS: usize = 300;

/// Seals and opens endpoint secrets with the server's key.
#[derive(Clone)]
pub struct Sealer {
    key: [u8; 32],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer whose key is derived from `material` (a configured key or the token secret).
    pub fn new(material: &[u8]) -> Sealer {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(material).expect("HMAC takes any key");
        mac.update(b"tabletalk outgoing webhook secrets");
        Sealer {
            key: mac.finalize().into_bytes().into(),
        }
    }

    /// `secret` sealed, bound to `context`: base64 of nonce, ciphertext and tag.
    pub fn seal(&self, secret: &str, context: &str) -> Result<String> {
        let nonce: [u8; 12] = rand::random();
        let mut tag = [0u8; 16];
        let sealed = openssl::symm::encrypt_aead(
            openssl::symm::Cipher::aes_256_gcm(),
            &self.key,
            Some(&nonce),
            context.as_bytes(),
            secret.as_bytes(),
            &mut tag,
        )
        .map_err(|e| Error::Internal(format!("sealing a secret: {e}")))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out.extend_from_slice(&tag);
        Ok(STANDARD.encode(out))
    }

    /// The secret `seal` sealed for the same `context`.
    pub fn open(&self, sealed: &str, context: &str) -> Result<String> {
        let broken = || Error::Internal("a sealed webhook secret does not open with this server's key".into());
        let bytes = STANDARD.decode(sealed).map_err(|_| broken())?;
        if bytes.len() < 12 + 16 {
            return Err(broken());
        }
        let (nonce, rest) = bytes.split_at(12);
        let (ciphertext, tag) = rest.split_at(rest.len() - 16);
        let plain = openssl::symm::decrypt_aead(
            openssl::symm::Cipher::aes_256_gcm(),
            &self.key,
            Some(nonce),
            context.as_bytes(),
            ciphertext,
            tag,
        )
        .map_err(|_| broken())?;
        String::from_utf8(plain).map_err(|_| broken())
    }
}

/// A new secret: `whsec_` and 32 random bytes, base64url.
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{SECRET_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The lowercase hex HMAC-SHA256, keyed with `secret`, of `prefix` then `body`: what both
/// signatures sign.
fn hmac_hex(secret: &str, prefix: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(prefix.as_bytes());
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The `X-Tabletalk-Signature` value of `body` sent at `timestamp` (Unix seconds).
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let hex = hmac_hex(secret, &format!("{timestamp}."), body);
    format!("t={timestamp},v1={hex}")
}

/// How long a slash command's handler may take to answer, as Slack allows it.
pub const SLASH_TIMEOUT: Duration = Duration::from_secs(3);

/// A new signing secret for a slash command: 32 hex digits, as Slack's look.
pub fn new_signing_secret() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Slack's `X-Slack-Signature` of `body` sent at `timestamp` (Unix seconds): `v0=` and the
/// lowercase hex HMAC-SHA256, keyed with the signing secret, of `v0:<timestamp>:<body>`.
pub fn slack_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    format!("v0={}", hmac_hex(secret, &format!("v0:{timestamp}:"), body))
}

/// Why a slash command's handler gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashFailure {
    /// The request never reached it (refused by the outbound rules, or no connection): safe to
    /// run again.
    NotSent(String),
    /// It may have acted: it answered too late, or the answer was lost or unreadable.
    Failed(String),
}

/// A slash command handler's answer.
#[derive(Debug, Clone)]
pub struct SlashReply {
    pub status: u16,
    /// It said its body is JSON.
    pub json: bool,
    pub body: Vec<u8>,
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered(u16),
    /// Any other answer (its status), or none (why).
    Failed { status: Option<u16>, error: String },
}

/// Posts signed deliveries. Cloning is cheap.
#[derive(Clone, Debug)]
pub struct HookSender {
    http: OutboundClient,
    sealer: Sealer,
}

impl HookSender {
    pub fn new(http: OutboundClient, sealer: Sealer) -> HookSender {
        HookSender { http, sealer }
    }

    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// Whether `url` may be registered: the outbound client's rules, refused as the reason.
    pub fn check_url(&self, url: &str) -> std::result::Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|_| "url is not a URL".to_owned())?;
        outbound::check_url(&parsed, self.http.reach()).map_err(|refused| format!("url {}", refused.0))
    }

    /// POSTs a slash command's form to its handler, signed as Slack signs it, and reads the
    /// answer: within [`SLASH_TIMEOUT`], at most `max_bytes` of it. Why not, when it failed.
    pub async fn run_slash(
        &self,
        url: &str,
        secret: &str,
        form: &[(&str, &str)],
        now: DateTime<Utc>,
        max_bytes: usize,
    ) -> std::result::Result<SlashReply, SlashFailure> {
        let request = self
            .http
            .post(url)
            .map_err(|refused| SlashFailure::NotSent(format!("refused: {}", refused.0)))?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let timestamp = now.timestamp();
        let sent = request
            .timeout(SLASH_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("X-Slack-Request-Timestamp", timestamp.to_string())
            .header("X-Slack-Signature", slack_signature(secret, timestamp, body.as_bytes()))
            .header(reqwest::header::USER_AGENT, "tabletalk-commands/1")
            .body(body)
            .send()
            .await;
        let failed = |e: reqwest::Error| match outbound::refusal(&e) {
            Some(refused) => SlashFailure::NotSent(format!("refused: {}", refused.0)),
            None if e.is_connect() => SlashFailure::NotSent("it could not be reached".to_owned()),
            None if e.is_timeout() => {
                SlashFailure::Failed(format!("it did not answer within {} seconds", SLASH_TIMEOUT.as_secs()))
            }
            None => SlashFailure::Failed("the request failed".to_owned()),
        };
        let mut response = sent.map_err(failed)?;
        let status = response.status().as_u16();
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > max_bytes {
                return Err(SlashFailure::Failed(format!(
                    "its answer is longer than {max_bytes} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(SlashReply { status, json, body })
    }

    /// One attempt of one delivery.
    pub async fn deliver(
        &self,
        url: &str,
        secret: &str,
        delivery_id: &str,
        event: HookEvent,
        body: &str,
        now: DateTime<Utc>,
    ) -> Attempt {
        let request = match self.http.post(url) {
            Ok(request) => request,
            Err(refused) => {
                return Attempt::Failed {
                    status: None,
                    error: format!("refused: {}", refused.0),
                };
            }
        };
        let sent = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(secret, now.timestamp(), body.as_bytes()))
            .header(DELIVERY_HEADER, delivery_id)
            .header(EVENT_HEADER, event.as_str())
            .header(reqwest::header::USER_AGENT, "tabletalk-webhooks/1")
            .body(body.to_owned())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Attempt::Delivered(response.status().as_u16()),
            Ok(response) => Attempt::Failed {
                status: Some(response.status().as_u16()),
                error: format!("the endpoint answered {}", response.status()),
            },
            Err(e) => {
                let error = match outbound::refusal(&e) {
                    Some(refused) => format!("refused: {}", refused.0),
                    None if e.is_timeout() => "the endpoint did not answer in time".to_owned(),
                    None if e.is_connect() => "the endpoint could not be reached".to_owned(),
                    None => format!("the request failed: {e}"),
                };
                Attempt::Failed {
                    status: None,
                    error: error.chars().take(MAX_ERROR_CHARS).collect(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_on_its_own_row() {
        let sealer = Sealer::new(b"server key");
        let secret = new_secret();
        let sealed = sealer.seal(&secret, "room/hook").unwrap();
        assert!(!sealed.contains(&secret));
        assert_eq!(sealer.open(&sealed, "room/hook").unwrap(), secret);
        assert!(sealer.open(&sealed, "room/other").is_err());
        assert!(Sealer::new(b"another key").open(&sealed, "room/hook").is_err());
        assert_ne!(
            sealer.seal(&secret, "room/hook").unwrap(),
            sealed,
            "a fresh nonce each time"
        );
    }

    /// The documented example: HMAC-SHA256 over `<t>.<body>`.
    #[test]
    fn the_signature_is_hmac_sha256_over_timestamp_dot_body() {
        let header = signature("whsec_test", 1_700_000_000, br#"{"id":"x"}"#);
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"whsec_test").unwrap();
        mac.update(br#"1700000000.{"id":"x"}"#);
        let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(header, format!("t=1700000000,v1={hex}"));
    }
}
