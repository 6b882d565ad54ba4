//! Who is calling: bearer JWTs verified here. HS256 with a shared secret serves local
//! use and tests; RS256 with keys from a configured JWKS URL serves production identity
//! providers. The user id is the token's `sub`, the display name its `name` claim.

mod jwks;
#[cfg(test)]
mod jwks_stand_in;
mod verified;

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::AuthSettings;
use crate::error::{Error, Result};
use crate::ids::UserId;

use jwks::Jwks;
pub use jwks::JwksPolicy;
use verified::Verified;

/// Seconds a token is still accepted past its `exp` (clocks differ).
const LEEWAY_SECS: u64 = 30;

/// Longest display name kept from a token; longer names are cut.
pub const MAX_NAME_CHARS: usize = 100;

pub use crate::principal::Principal;

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<u64>,
}

/// Verifies bearer tokens. Cheap to share behind an `Arc`.
pub struct Authenticator {
    settings: AuthSettings,
    /// The HS256 key and the checks of each algorithm, made once: made per request they cost
    /// more than the signature check itself.
    hs256_key: Option<std::result::Result<DecodingKey, jsonwebtoken::errors::Error>>,
    hs256: Validation,
    rs256: Validation,
    /// The identity provider's keys, when a JWKS URL is configured.
    jwks: Option<Jwks>,
    /// Tokens verified lately ([`verified`]).
    verified: Verified,
}

/// Without the key: the settings say what is configured, redacted.
impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("settings", &self.settings)
            .field("jwks", &self.jwks)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    pub fn new(settings: AuthSettings) -> Authenticator {
        Authenticator::with_jwks_policy(settings, JwksPolicy::default())
    }

    /// An authenticator that fetches the JWKS as `policy` says (tests shorten its intervals).
    pub fn with_jwks_policy(settings: AuthSettings, policy: JwksPolicy) -> Authenticator {
        let jwks = settings.jwks_url.clone().map(|url| Jwks::new(url, policy));
        let hs256_key = settings
            .hs256_secret
            .as_ref()
            .map(|secret| DecodingKey::from_secret(secret.as_bytes()));
        let hs256 = validation(&settings, Algorithm::HS256);
        let rs256 = validation(&settings, Algorithm::RS256);
        Authenticator {
            settings,
            hs256_key,
            hs256,
            rs256,
            jwks,
            verified: Verified::new(),
        }
    }

    /// The caller named by an `Authorization` header value.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal> {
        let header = authorization.ok_or_else(|| unauthorized("missing bearer token"))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer <token>'"))?
            .trim();
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(principal) = self
            .verified
            .get(token, now, || self.jwks.as_ref().map(Jwks::generation))
        {
            return Ok(principal);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| unauthorized("malformed token"))?;
        let fetched;
        // The JWKS generation an RS256 token's key is of: the token is trusted while it lasts.
        let mut keys = None;
        let (key, validation) = match header.alg {
            Algorithm::HS256 => match &self.hs256_key {
                Some(Ok(key)) => (key, &self.hs256),
                Some(Err(_)) => return Err(unauthorized("invalid HS256 secret")),
                None => return Err(unauthorized("HS256 tokens are not accepted here")),
            },
            Algorithm::RS256 => {
                let jwks = self
                    .jwks
                    .as_ref()
                    .ok_or_else(|| unauthorized("RS256 tokens are not accepted here"))?;
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or_else(|| unauthorized("RS256 tokens must name their key (kid)"))?;
                let generation;
                (fetched, generation) = jwks.key(kid).await?;
                keys = Some(generation);
                (&fetched, &self.rs256)
            }
            _ => return Err(unauthorized("unsupported token algorithm")),
        };
        let claims = jsonwebtoken::decode::<Claims>(token, key, validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => unauthorized("token expired"),
                jsonwebtoken::errors::ErrorKind::InvalidSignature => unauthorized("invalid token signature"),
                _ => unauthorized("invalid token"),
            })?
            .claims;
        let user_id = UserId::parse(&claims.sub)?;
        let name = claims
            .name
            .map(|n| {
                n.trim()
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(MAX_NAME_CHARS)
                    .collect::<String>()
            })
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| user_id.to_string());
        let principal = Principal { user_id, name };
        let trusted = verified::Trust {
            expires: claims.exp.saturating_add(LEEWAY_SECS),
            keys,
        };
        self.verified.remember(token, &principal, trusted, now);
        Ok(principal)
    }
}

impl Authenticator {
    /// Whether tokens are checked with the published development secret of
    /// `local.settings.json`: then anyone can sign tokens anyway, so the self-hosted server's
    /// development sign-in (`/api/dev/signin`, loopback only) gives nothing away. With any other
    /// secret, or none, that door stays shut.
    pub fn uses_development_secret(&self) -> bool {
        self.settings.hs256_secret.as_deref() == Some(crate::config::DEVELOPMENT_JWT_SECRET)
    }

    /// A development token for `user_id`, or `None` unless [`Self::uses_development_secret`].
    pub fn mint_development_token(&self, user_id: &str, name: Option<&str>, ttl: Duration) -> Option<Result<String>> {
        self.uses_development_secret()
            .then(|| mint_dev_token(crate::config::DEVELOPMENT_JWT_SECRET, user_id, name, ttl))
    }
}

/// What a token signed with `alg` must show: a `sub`, an `exp` not past (30 s leeway), and the
/// configured audience and issuer. Configured, they are required claims: jsonwebtoken checks
/// `aud` and `iss` only when a token has them, so a token naming neither would pass.
fn validation(settings: &AuthSettings, alg: Algorithm) -> Validation {
    let mut validation = Validation::new(alg);
    validation.leeway = LEEWAY_SECS;
    let mut required = vec!["exp", "sub"];
    required.extend(settings.audience.as_ref().map(|_| "aud"));
    required.extend(settings.issuer.as_ref().map(|_| "iss"));
    validation.set_required_spec_claims(&required);
    match &settings.audience {
        Some(aud) => validation.set_audience(&[aud]),
        None => validation.validate_aud = false,
    }
    if let Some(iss) = &settings.issuer {
        validation.set_issuer(&[iss]);
    }
    validation
}

fn unauthorized(message: &str) -> Error {
    Error::Unauthorized(message.to_owned())
}

/// An HS256 token for local development and tests.
pub fn mint_dev_token(secret: &str, user_id: &str, name: Option<&str>, ttl: Duration) -> Result<String> {
    let now = tabletalk_clock::Clock::now(&tabletalk_clock::SystemClock).timestamp() as u64;
    let claims = Claims {
        sub: user_id.to_owned(),
        name: name.map(str::to_owned),
        exp: now + ttl.as_secs(),
        iat: Some(now),
    };
    let key = EncodingKey::from_secret(secret.as_bytes()).map_err(|e| Error::Internal(format!("bad secret: {e}")))?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
        .map_err(|e| Error::Internal(format!("cannot sign a token: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs256(secret: &str) -> Authenticator {
        Authenticator::new(AuthSettings {
            hs256_secret: Some(secret.into()),
            ..AuthSettings::default()
        })
    }

    #[tokio::test]
    async fn accepts_a_dev_token() {
        let token = mint_dev_token("s3cret", "alice", Some("Alice A."), Duration::from_secs(60)).unwrap();
        let who = hs256("s3cret")
            .authenticate(Some(&format!("Bearer {token}")))
            .await
            .unwrap();
        assert_eq!((who.user_id.as_str(), who.name.as_str()), ("alice", "Alice A."));
    }

    #[tokio::test]
    async fn refuses_bad_tokens() {
        let auth = hs256("s3cret");
        let other = mint_dev_token("other", "alice", None, Duration::from_secs(60)).unwrap();
        for header in [
            None,
            Some("Basic x".to_string()),
            Some("Bearer garbage".into()),
            Some(format!("Bearer {other}")),
        ] {
            let err = auth.authenticate(header.as_deref()).await.unwrap_err();
            assert_eq!(err.code(), "UNAUTHORIZED", "{header:?}");
        }
    }

    /// A configured audience or issuer is required of every token: one that names neither is
    /// refused where they are set (it was let in), and accepted where they are not.
    #[tokio::test]
    async fn a_configured_audience_or_issuer_is_required_of_every_token() {
        let token = mint_dev_token("s3cret", "alice", None, Duration::from_secs(60)).unwrap();
        let header = format!("Bearer {token}");
        for settings in [
            AuthSettings {
                audience: Some("api://tabletalk".into()),
                ..AuthSettings::default()
            },
            AuthSettings {
                issuer: Some("https://login.example/".into()),
                ..AuthSettings::default()
            },
        ] {
            let auth = Authenticator::new(AuthSettings {
                hs256_secret: Some("s3cret".into()),
                ..settings
            });
            let err = auth.authenticate(Some(&header)).await.unwrap_err();
            assert_eq!(err.code(), "UNAUTHORIZED");
        }
        assert!(hs256("s3cret").authenticate(Some(&header)).await.is_ok());
    }

    /// A token taken on trust after its check trusts that exact token only: one changed in its
    /// signature, or the same claims signed with another key, is checked and refused.
    #[tokio::test]
    async fn a_verified_token_lets_in_no_other_token() {
        let auth = hs256("s3cret");
        let token = mint_dev_token("s3cret", "alice", None, Duration::from_secs(60)).unwrap();
        for _ in 0..2 {
            assert!(auth.authenticate(Some(&format!("Bearer {token}"))).await.is_ok());
        }
        let mut tampered = token.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        let forged = mint_dev_token("other", "alice", None, Duration::from_secs(60)).unwrap();
        for other in [tampered, forged, format!("{token}x")] {
            let err = auth.authenticate(Some(&format!("Bearer {other}"))).await.unwrap_err();
            assert_eq!(err.code(), "UNAUTHORIZED", "{other}");
        }
    }
}
