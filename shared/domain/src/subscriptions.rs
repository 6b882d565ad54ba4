//! The push subscription model, as a browser's `PushSubscription.toJSON()` gives it, and the
//! checks an endpoint and its keys must pass. The use cases are `crate::service::subscriptions`.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};

/// Subscriptions one user may hold (browsers and devices).
pub const MAX_SUBSCRIPTIONS_PER_USER: usize = 50;
pub const MAX_ENDPOINT_CHARS: usize = 2048;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushKeys {
    /// The browser's P-256 public key, base64url (65 bytes, uncompressed).
    pub p256dh: String,
    /// The 16-byte auth secret, base64url.
    pub auth: String,
}

/// A subscription as the browser's `PushSubscription.toJSON()` gives it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewSubscription {
    /// The push service's URL for this browser.
    #[schema(pattern = r"^https?://\S+$")]
    pub endpoint: String,
    pub keys: PushKeys,
    /// Milliseconds since the epoch, or null.
    #[serde(default)]
    pub expiration_time: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSubscription {
    pub endpoint: String,
    pub keys: PushKeys,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Unsubscribe {
    pub endpoint: String,
}

fn decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(text))
        .ok()
}

/// The longest do-not-disturb a user can set.
pub const MAX_DO_NOT_DISTURB: chrono::Duration = chrono::Duration::days(366);

/// A user's do-not-disturb: until it ends, no push reaches them, from any room, mentions
/// included (live signals still do: they only reach an open client).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DoNotDisturb {
    /// When it ends: in the future, at most 366 days ahead; null (or absent) ends it now.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
}

impl DoNotDisturb {
    /// The setting as given, checked against `now`.
    pub fn checked(self, now: DateTime<Utc>) -> Result<DoNotDisturb> {
        match self.until {
            Some(until) if until <= now => Err(Error::validation("until must be in the future")),
            Some(until) if until > now + MAX_DO_NOT_DISTURB => {
                Err(Error::validation("until must be at most 366 days ahead"))
            }
            _ => Ok(self),
        }
    }

    /// True while it holds.
    pub fn holds_at(&self, now: DateTime<Utc>) -> bool {
        self.until.is_some_and(|until| until > now)
    }
}

pub fn check_keys(keys: &PushKeys) -> Result<()> {
    let p256dh = decode(&keys.p256dh).ok_or_else(|| Error::validation("keys.p256dh is not base64url"))?;
    if p256dh.len() != 65 || p256dh[0] != 0x04 {
        return Err(Error::validation(
            "keys.p256dh must be a 65-byte uncompressed P-256 point",
        ));
    }
    let auth = decode(&keys.auth).ok_or_else(|| Error::validation("keys.auth is not base64url"))?;
    if auth.len() != 16 {
        return Err(Error::validation("keys.auth must be 16 bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_rfc_8291_shapes() {
        let point = URL_SAFE_NO_PAD.encode([4u8; 65]);
        let auth = URL_SAFE_NO_PAD.encode([1u8; 16]);
        assert!(
            check_keys(&PushKeys {
                p256dh: point.clone(),
                auth: auth.clone()
            })
            .is_ok()
        );
        let short = URL_SAFE_NO_PAD.encode([4u8; 33]);
        assert!(
            check_keys(&PushKeys {
                p256dh: short,
                auth: auth.clone()
            })
            .is_err()
        );
        assert!(
            check_keys(&PushKeys {
                p256dh: point,
                auth: "!!".into()
            })
            .is_err()
        );
    }
}
