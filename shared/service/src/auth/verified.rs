//! Tokens verified lately. A client sends the same bearer token with every request, and
//! checking one — base64, two JSON parses, an HMAC or RSA signature — cost a send more than
//! any of its reads. A token verified once is taken on trust, by its exact text, until it
//! expires (with the check's leeway), for [`TRUSTED_FOR_SECS`] at most, and — for a token
//! whose key came from the identity provider's JWKS — while the keys are those it was
//! verified with: once a refresh lands (one that withdrew its key, say), it is checked again.
//! Refused tokens are never remembered: each is checked, and refused, every time.

use std::sync::Mutex;

use hashlink::LruCache;

use crate::principal::Principal;

/// The longest a verified token is taken on trust before its signature is checked again.
const TRUSTED_FOR_SECS: u64 = 60;
/// Tokens remembered (the least recently used are forgotten first).
const KEPT: usize = 2048;
/// Longer tokens are checked every time, so the remembered ones take 16 MB at the very most
/// (an identity provider's tokens are 1 to 8 kB; the development sign-in's, 200 bytes).
const LONGEST: usize = 8 * 1024;

/// Verified tokens and whom they name.
pub(super) struct Verified {
    tokens: Mutex<LruCache<String, Trusted>>,
}

/// How long a verified token may be trusted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Trust {
    /// Unix seconds past which the token is expired, leeway included.
    pub expires: u64,
    /// The JWKS generation its key is of (`None`: a key of this server's own, which stays).
    pub keys: Option<u64>,
}

struct Trusted {
    principal: Principal,
    /// Unix seconds after which the token is checked again.
    until: u64,
    keys: Option<u64>,
}

impl Verified {
    pub(super) fn new() -> Verified {
        Verified {
            tokens: Mutex::new(LruCache::new(KEPT)),
        }
    }

    /// Whom `token` names, if it was verified and is still trusted at `now` (unix seconds)
    /// with the JWKS at the generation `keys` tells (asked only of a token with a JWKS key).
    pub(super) fn get(&self, token: &str, now: u64, keys: impl FnOnce() -> Option<u64>) -> Option<Principal> {
        let (principal, until, verified_with) = {
            let mut tokens = self.lock();
            let trusted = tokens.get(token)?;
            (trusted.principal.clone(), trusted.until, trusted.keys)
        };
        // The JWKS is asked outside the lock: it has a lock of its own, and may start a refresh.
        if now <= until && (verified_with.is_none() || verified_with == keys()) {
            return Some(principal);
        }
        self.lock().remove(token);
        None
    }

    /// Remembers that `token`, verified at `now`, names `principal` and may be trusted as
    /// `trust` says.
    pub(super) fn remember(&self, token: &str, principal: &Principal, trust: Trust, now: u64) {
        if token.len() > LONGEST {
            return;
        }
        let trusted = Trusted {
            principal: principal.clone(),
            until: trust.expires.min(now.saturating_add(TRUSTED_FOR_SECS)),
            keys: trust.keys,
        };
        self.lock().insert(token.to_owned(), trusted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<String, Trusted>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::UserId;

    fn alice() -> Principal {
        Principal {
            user_id: UserId::parse("alice").unwrap(),
            name: "Alice".into(),
        }
    }

    fn own_key(expires: u64) -> Trust {
        Trust { expires, keys: None }
    }

    fn no_jwks() -> Option<u64> {
        None
    }

    #[test]
    fn a_remembered_token_is_trusted_until_it_expires() {
        let verified = Verified::new();
        verified.remember("t", &alice(), own_key(1_030), 990);
        assert_eq!(verified.get("t", 1_030, no_jwks), Some(alice()));
        assert_eq!(verified.get("t", 1_031, no_jwks), None);
        assert_eq!(verified.get("t", 1_000, no_jwks), None, "forgotten once stale");
    }

    #[test]
    fn a_remembered_token_is_checked_again_after_a_minute_however_long_it_lives() {
        let verified = Verified::new();
        verified.remember("t", &alice(), own_key(1_000_000), 1_000);
        assert_eq!(verified.get("t", 1_000 + TRUSTED_FOR_SECS, no_jwks), Some(alice()));
        assert_eq!(verified.get("t", 1_001 + TRUSTED_FOR_SECS, no_jwks), None);
    }

    #[test]
    fn a_token_with_a_jwks_key_is_trusted_only_while_the_keys_are_unchanged() {
        let verified = Verified::new();
        let trust = Trust {
            expires: 2_000,
            keys: Some(3),
        };
        verified.remember("t", &alice(), trust, 1_000);
        assert_eq!(verified.get("t", 1_000, || Some(3)), Some(alice()));
        assert_eq!(verified.get("t", 1_000, || Some(4)), None);
        assert_eq!(
            verified.get("t", 1_000, || Some(3)),
            None,
            "forgotten once the keys changed"
        );
    }

    #[test]
    fn only_the_exact_token_is_trusted() {
        let verified = Verified::new();
        verified.remember("header.claims.signature", &alice(), own_key(2_000), 1_000);
        for other in [
            "header.claims.signaturf",
            "header.claims.signatur",
            "header.claims.signature ",
        ] {
            assert_eq!(verified.get(other, 1_000, no_jwks), None, "{other}");
        }
    }

    #[test]
    fn a_token_longer_than_the_bound_is_not_remembered() {
        let verified = Verified::new();
        let long = "t".repeat(LONGEST + 1);
        verified.remember(&long, &alice(), own_key(2_000), 1_000);
        assert_eq!(verified.get(&long, 1_000, no_jwks), None);
    }

    #[test]
    fn the_least_recently_used_tokens_are_forgotten_past_the_bound() {
        let verified = Verified::new();
        for i in 0..=KEPT {
            verified.remember(&format!("t{i}"), &alice(), own_key(2_000), 1_000);
        }
        assert_eq!(verified.get("t0", 1_000, no_jwks), None);
        assert_eq!(verified.get(&format!("t{KEPT}"), 1_000, no_jwks), Some(alice()));
    }
}
