//! Test-only: an identity provider's JWKS endpoint on 127.0.0.1, speaking plain HTTP/1.1 over a
//! `TcpListener` (a handful of lines; no server framework is a dependency of this crate). It
//! serves the JWKS of a test-generated RSA key, counts the requests it gets, and can hold its
//! answers back, fail, or serve an oversized body — what the cache's tests need to observe.

use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::{Authenticator, JwksPolicy};
use crate::config::AuthSettings;

pub const ISSUER: &str = "https://issuer.test/";
pub const AUDIENCE: &str = "tabletalk-test";
/// The key id the stand-in publishes.
pub const KID: &str = "test-key-1";

/// One RSA key for the whole test binary: private PEM, and the public modulus and exponent.
fn test_key() -> &'static (Vec<u8>, Vec<u8>, Vec<u8>) {
    static KEY: OnceLock<(Vec<u8>, Vec<u8>, Vec<u8>)> = OnceLock::new();
    KEY.get_or_init(|| {
        let rsa = openssl::rsa::Rsa::generate(2048).expect("generate an RSA key");
        let pem = rsa.private_key_to_pem().expect("PEM");
        (pem, rsa.n().to_vec(), rsa.e().to_vec())
    })
}

/// A token for `alice` signed with the test key, naming `kid`.
pub fn token(kid: &str) -> String {
    let now = tabletalk_clock::Clock::now(&tabletalk_clock::SystemClock).timestamp();
    let claims = json!({ "sub": "alice", "name": "Alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600 });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_rsa_pem(&test_key().0).expect("the test key loads");
    format!("Bearer {}", jsonwebtoken::encode(&header, &claims, &key).expect("sign"))
}

/// The JWKS document publishing the test key as `KID`.
pub fn jwks_body() -> String {
    let (_, n, e) = test_key();
    json!({ "keys": [{ "kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID, "n": B64.encode(n), "e": B64.encode(e) }] })
        .to_string()
}

/// What the stand-in answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// 200 with the JWKS, `padding` spaces after it, and no `Content-Length` (the body ends
    /// when the connection closes, so only the reader's own count can cap it).
    Jwks { padding: usize },
    /// 200 with a JWKS that publishes no key (the test key withdrawn).
    NoKeys,
    /// An error status with an empty body.
    Status(u16),
}

#[derive(Debug)]
pub struct JwksServer {
    pub url: String,
    answer: Arc<Mutex<Answer>>,
    requests: watch::Receiver<usize>,
    hold: watch::Sender<bool>,
}

impl JwksServer {
    pub async fn start(answer: Answer) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the stand-in");
        let url = format!("http://{}/keys", listener.local_addr().unwrap());
        let answer = Arc::new(Mutex::new(answer));
        let (count, requests) = watch::channel(0usize);
        let (hold, held) = watch::channel(false);
        let serving = answer.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (answer, count, mut held) = (serving.clone(), count.clone(), held.clone());
                tokio::spawn(async move {
                    // A GET has no body: the request ends with its head.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    count.send_modify(|c| *c += 1);
                    let _ = held.wait_for(|held| !held).await;
                    let answer = answer.lock().unwrap().clone();
                    let response = match answer {
                        Answer::Jwks { padding } => format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{}{}",
                            jwks_body(),
                            " ".repeat(padding)
                        ),
                        Answer::NoKeys => {
                            let body = r#"{"keys":[]}"#;
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}"
                            )
                        }
                        Answer::Status(status) => {
                            format!("HTTP/1.1 {status} Oops\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        }
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        JwksServer {
            url,
            answer,
            requests,
            hold,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        *self.requests.borrow()
    }

    /// Waits until `n` requests have arrived.
    pub async fn received(&self, n: usize) {
        let mut requests = self.requests.clone();
        requests.wait_for(|count| *count >= n).await.expect("the stand-in runs");
    }

    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// While held, requests are received (and counted) but not answered.
    pub fn hold(&self, held: bool) {
        self.hold.send_replace(held);
    }

    /// An authenticator for RS256 tokens from this stand-in.
    pub fn authenticator(&self, policy: JwksPolicy) -> Authenticator {
        Authenticator::with_jwks_policy(
            AuthSettings {
                hs256_secret: None,
                jwks_url: Some(self.url.clone()),
                issuer: Some(ISSUER.into()),
                audience: Some(AUDIENCE.into()),
            },
            policy,
        )
    }
}
