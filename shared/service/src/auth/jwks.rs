//! The RS256 keys of the identity provider, fetched from its JWKS URL and cached.
//!
//! Anyone can send a token naming any `kid`, so an unknown kid must not be able to stall
//! verification or hammer the identity provider:
//! - one fetch at a time (single flight): tokens arriving while a fetch is out wait for that
//!   fetch's outcome instead of starting their own, and the fetch runs in a task of its own,
//!   outside any lock, so tokens with a cached key never wait for it — and a caller that gives
//!   up (a dropped request) does not abort it;
//! - fetches start at most once per `min_interval`, failed ones included, and until the next
//!   may start a failure is answered from memory (503) rather than retried;
//! - a kid the JWKS lacked is remembered as unknown for `unknown_ttl` (401 without a fetch);
//! - the body is read up to `max_body` bytes and refused beyond.
//!
//! A failed fetch keeps the keys already cached, so tokens signed with them keep verifying.
//! Keys older than `max_age` are refreshed in the background by the next token that uses one
//! (it is still answered from the cache), so a key the provider withdraws stops verifying
//! within about `max_age`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::JwkSet;

use crate::error::{Error, Result};

/// How often and how much the JWKS is fetched.
#[derive(Debug, Clone)]
pub struct JwksPolicy {
    /// Fetches start at most this often (and a failed fetch is answered from memory this long).
    pub min_interval: Duration,
    /// A key id the JWKS did not have is answered "unknown" without a fetch for this long.
    pub unknown_ttl: Duration,
    /// The largest JWKS body read, in bytes.
    pub max_body: usize,
    /// How long one fetch may take.
    pub timeout: Duration,
    /// Cached keys older than this are fetched again, in the background.
    pub max_age: Duration,
}

impl Default for JwksPolicy {
    /// At most two fetches a minute per instance, a 30 s wait after a failed fetch at worst, and
    /// room for an identity provider's key set with certificate chains (Entra ID's is ~10 KiB).
    fn default() -> JwksPolicy {
        JwksPolicy {
            min_interval: Duration::from_secs(30),
            // No longer than the fetch interval: a key the provider has just rotated in is
            // fetched at the next allowed fetch, not refused for minutes.
            unknown_ttl: Duration::from_secs(30),
            max_body: 128 * 1024,
            timeout: Duration::from_secs(10),
            // A withdrawn (say, leaked) key stops verifying within the hour.
            max_age: Duration::from_secs(3600),
        }
    }
}

/// Kids remembered as unknown at most; beyond, the memory starts over (forged kids then cost
/// at most one fetch per `min_interval`, as any new kid does).
const MAX_UNKNOWN_KIDS: usize = 1024;

/// The cached keys of one JWKS URL. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub(crate) struct Jwks {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    policy: JwksPolicy,
    http: reqwest::Client,
    /// A std mutex: it is held only to read or update the state, never across an `.await`.
    state: Mutex<State>,
}

/// A fetch in flight, awaited by every token that needs its outcome.
type Fetch = Shared<BoxFuture<'static, ()>>;

#[derive(Default)]
struct State {
    keys: HashMap<String, DecodingKey>,
    /// Kids the latest fetches lacked, and when each was found missing.
    unknown: HashMap<String, Instant>,
    /// When the last fetch started.
    last_fetch: Option<Instant>,
    /// When the keys were last fetched successfully.
    fetched_at: Option<Instant>,
    /// Successful fetches so far: a token verified with keys of an earlier one is checked again.
    generation: u64,
    /// Why the last fetch failed; `None` once one succeeded.
    failure: Option<String>,
    in_flight: Option<Fetch>,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks")
            .field("url", &self.inner.url)
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl Jwks {
    pub(crate) fn new(url: String, policy: JwksPolicy) -> Jwks {
        let http = reqwest::Client::builder()
            .timeout(policy.timeout)
            .build()
            .expect("a default HTTP client builds");
        Jwks {
            inner: Arc::new(Inner {
                url,
                policy,
                http,
                state: Mutex::default(),
            }),
        }
    }

    /// Which fetch the cached keys come from; starts a refresh in the background when they
    /// are older than their maximum age, as a token verified with them would
    /// ([`Jwks::key`]). A token taken on trust asks this instead of verifying again.
    pub(crate) fn generation(&self) -> u64 {
        let mut state = self.inner.lock();
        self.refresh_if_aged(&mut state);
        state.generation
    }

    /// The key for `kid` and the [`Jwks::generation`] it is of: from the cache, else from the
    /// fetch in flight or a new one if one may start, else the remembered answer.
    pub(crate) async fn key(&self, kid: &str) -> Result<(DecodingKey, u64)> {
        let policy = &self.inner.policy;
        let fetch = {
            let mut state = self.inner.lock();
            if let Some(key) = state.keys.get(kid).cloned() {
                self.refresh_if_aged(&mut state);
                return Ok((key, state.generation));
            }
            if state
                .unknown
                .get(kid)
                .is_some_and(|at| at.elapsed() < policy.unknown_ttl)
            {
                return Err(unknown_key());
            }
            match &state.in_flight {
                Some(fetch) => fetch.clone(),
                None if state.last_fetch.is_some_and(|at| at.elapsed() < policy.min_interval) => {
                    return Err(state.missing());
                }
                None => {
                    state.last_fetch = Some(Instant::now());
                    let fetch = self.start_fetch();
                    state.in_flight = Some(fetch.clone());
                    fetch
                }
            }
        };
        fetch.await;
        let mut state = self.inner.lock();
        if let Some(key) = state.keys.get(kid) {
            return Ok((key.clone(), state.generation));
        }
        if state.failure.is_none() {
            if state.unknown.len() >= MAX_UNKNOWN_KIDS {
                state.unknown.retain(|_, at| at.elapsed() < policy.unknown_ttl);
                if state.unknown.len() >= MAX_UNKNOWN_KIDS {
                    state.unknown.clear();
                }
            }
            state.unknown.insert(kid.to_owned(), Instant::now());
        }
        Err(state.missing())
    }

    /// Starts a refresh of keys older than their maximum age, unless one runs or a fetch
    /// started too recently.
    fn refresh_if_aged(&self, state: &mut State) {
        let policy = &self.inner.policy;
        let aged = state.fetched_at.is_some_and(|at| at.elapsed() >= policy.max_age);
        let may_fetch = !state.last_fetch.is_some_and(|at| at.elapsed() < policy.min_interval);
        if aged && may_fetch && state.in_flight.is_none() {
            state.last_fetch = Some(Instant::now());
            state.in_flight = Some(self.start_fetch());
        }
    }

    /// Spawns the fetch, which stores its outcome itself; the returned future ends with it.
    fn start_fetch(&self) -> Fetch {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            let _landing = Landing(inner.clone());
            let outcome = inner.fetch().await;
            let mut state = inner.lock();
            match outcome {
                Ok(keys) => {
                    state.keys = keys;
                    state.failure = None;
                    state.fetched_at = Some(Instant::now());
                    state.generation += 1;
                }
                Err(failure) => {
                    tracing::warn!(url = %inner.url, %failure, "cannot refresh the JWKS; keeping the cached keys");
                    state.failure = Some(failure);
                }
            }
        });
        async move {
            // A panicked fetch stored no outcome; its waiters see the previous one.
            let _ = task.await;
        }
        .boxed()
        .shared()
    }
}

/// Ends the fetch in flight when its task ends, however it ends (a panic included), so that
/// one broken fetch cannot block every later one.
struct Landing(Arc<Inner>);

impl Drop for Landing {
    fn drop(&mut self) {
        self.0.lock().in_flight = None;
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fetches and parses the JWKS, reading at most `max_body` bytes of it.
    async fn fetch(&self) -> std::result::Result<HashMap<String, DecodingKey>, String> {
        let max = self.policy.max_body;
        let mut response = self
            .http
            .get(&self.url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| format!("cannot fetch the JWKS: {e}"))?;
        let too_large = || format!("the JWKS is larger than {max} bytes");
        if response.content_length().is_some_and(|length| length > max as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("cannot read the JWKS: {e}"))?
        {
            if body.len() + chunk.len() > max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        let set: JwkSet = serde_json::from_slice(&body).map_err(|e| format!("the JWKS is not a JWK set: {e}"))?;
        Ok(set
            .keys
            .iter()
            .filter_map(|jwk| Some((jwk.common.key_id.clone()?, DecodingKey::from_jwk(jwk).ok()?)))
            .collect())
    }
}

impl State {
    /// The answer for a kid the cache lacks: the last fetch's failure, or "unknown".
    fn missing(&self) -> Error {
        match &self.failure {
            Some(failure) => Error::Unavailable(format!("the identity provider's keys are unavailable: {failure}")),
            None => unknown_key(),
        }
    }
}

fn unknown_key() -> Error {
    Error::Unauthorized("unknown signing key".to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::JwksPolicy;
    use crate::auth::jwks_stand_in::{Answer, JwksServer, KID, token};

    /// Intervals no test outlasts.
    fn long() -> JwksPolicy {
        JwksPolicy {
            min_interval: Duration::from_secs(3600),
            unknown_ttl: Duration::from_secs(3600),
            ..JwksPolicy::default()
        }
    }

    /// Twenty tokens arrive while the first fetch is out, and that fetch fails: all twenty get
    /// its answer, and none of them starts a fetch of its own.
    #[tokio::test]
    async fn concurrent_tokens_share_one_jwks_fetch_even_when_it_fails() {
        let server = JwksServer::start(Answer::Status(500)).await;
        server.hold(true);
        let auth = server.authenticator(JwksPolicy {
            min_interval: Duration::ZERO,
            ..long()
        });
        let header = token(KID);
        // `join!` polls the twenty first, so each is waiting before the stand-in answers.
        let (all, ()) = tokio::join!(
            futures::future::join_all((0..20).map(|_| auth.authenticate(Some(&header)))),
            async {
                server.received(1).await;
                server.hold(false);
            }
        );
        for refused in all {
            let refused = refused.unwrap_err();
            assert_eq!(refused.code(), "UNAVAILABLE", "{refused}");
        }
        assert_eq!(server.requests(), 1, "one fetch answers every token waiting for it");
    }

    #[tokio::test]
    async fn a_cached_key_is_not_held_up_by_a_jwks_fetch_in_flight() {
        let server = JwksServer::start(Answer::Jwks { padding: 0 }).await;
        // Every unknown kid may refetch at once: the fetch below is allowed.
        let auth = Arc::new(server.authenticator(JwksPolicy {
            min_interval: Duration::ZERO,
            unknown_ttl: Duration::ZERO,
            ..JwksPolicy::default()
        }));
        auth.authenticate(Some(&token(KID))).await.unwrap();
        server.hold(true);
        let refresh = tokio::spawn({
            let auth = auth.clone();
            async move { auth.authenticate(Some(&token("rotated-key"))).await }
        });
        server.received(2).await;
        let who = auth.authenticate(Some(&token(KID))).await.unwrap();
        assert_eq!(who.user_id.as_str(), "alice");
        assert!(
            !refresh.is_finished(),
            "the cached key answered only after the fetch in flight had ended"
        );
        server.hold(false);
        let refused = refresh.await.unwrap().unwrap_err();
        assert_eq!(refused.code(), "UNAUTHORIZED", "{refused}");
    }

    #[tokio::test]
    async fn a_failed_jwks_fetch_is_not_retried_before_the_minimum_interval() {
        let server = JwksServer::start(Answer::Status(500)).await;
        let auth = server.authenticator(long());
        for kid in [KID, "another-key", KID] {
            let refused = auth.authenticate(Some(&token(kid))).await.unwrap_err();
            assert_eq!(refused.code(), "UNAVAILABLE", "{kid}: {refused}");
        }
        assert_eq!(server.requests(), 1, "the failure is remembered, not retried");

        // Once the interval has passed, the next token fetches again and the keys recover.
        let server = JwksServer::start(Answer::Status(503)).await;
        let auth = server.authenticator(JwksPolicy {
            min_interval: Duration::ZERO,
            ..long()
        });
        assert!(auth.authenticate(Some(&token(KID))).await.is_err());
        server.answer(Answer::Jwks { padding: 0 });
        assert!(auth.authenticate(Some(&token(KID))).await.is_ok());
        assert_eq!(server.requests(), 2);
    }

    #[tokio::test]
    async fn a_key_id_missing_from_the_jwks_is_remembered_as_unknown() {
        let server = JwksServer::start(Answer::Jwks { padding: 0 }).await;
        // Fetches may start at any time; only the negative cache keeps the forged kid away.
        let auth = server.authenticator(JwksPolicy {
            min_interval: Duration::ZERO,
            ..long()
        });
        for _ in 0..3 {
            let refused = auth.authenticate(Some(&token("forged"))).await.unwrap_err();
            assert_eq!(refused.code(), "UNAUTHORIZED", "{refused}");
        }
        assert_eq!(server.requests(), 1, "a kid the JWKS lacked is not fetched again");
        // The fetch that found it missing did load the real key.
        auth.authenticate(Some(&token(KID))).await.unwrap();
        assert_eq!(server.requests(), 1);
    }

    /// The provider withdraws the key: once the cached keys are older than their maximum age,
    /// the next token still verifies from the cache but starts a refresh, after which the
    /// withdrawn key is refused. Younger keys are not fetched again.
    #[tokio::test]
    async fn a_withdrawn_key_stops_verifying_once_the_cached_keys_are_too_old() {
        let server = JwksServer::start(Answer::Jwks { padding: 0 }).await;
        let young = server.authenticator(long());
        young.authenticate(Some(&token(KID))).await.unwrap();
        let aged = server.authenticator(JwksPolicy {
            min_interval: Duration::ZERO,
            max_age: Duration::ZERO,
            ..long()
        });
        aged.authenticate(Some(&token(KID))).await.unwrap();
        assert_eq!(server.requests(), 2);

        server.answer(Answer::NoKeys);
        young.authenticate(Some(&token(KID))).await.unwrap();
        assert_eq!(
            server.requests(),
            2,
            "keys younger than their maximum age are not fetched"
        );
        aged.authenticate(Some(&token(KID)))
            .await
            .expect("answered from the cache while the refresh runs");
        tokio::time::timeout(Duration::from_secs(10), server.received(3))
            .await
            .expect("a token using an aged key starts a refresh");
        let mut refused = None;
        for _ in 0..100 {
            if let Err(e) = aged.authenticate(Some(&token(KID))).await {
                refused = Some(e);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let refused = refused.expect("the withdrawn key stops verifying");
        assert_eq!(refused.code(), "UNAUTHORIZED", "{refused}");
    }

    #[tokio::test]
    async fn a_jwks_larger_than_the_cap_is_refused() {
        let policy = JwksPolicy::default();
        let server = JwksServer::start(Answer::Jwks {
            padding: policy.max_body,
        })
        .await;
        let auth = server.authenticator(policy);
        let refused = auth.authenticate(Some(&token(KID))).await.unwrap_err();
        assert_eq!(refused.code(), "UNAVAILABLE", "{refused}");
        assert!(refused.to_string().contains("larger than"), "{refused}");

        // The same document within the cap is accepted.
        let server = JwksServer::start(Answer::Jwks { padding: 1000 }).await;
        server
            .authenticator(JwksPolicy::default())
            .authenticate(Some(&token(KID)))
            .await
            .unwrap();
    }
}
