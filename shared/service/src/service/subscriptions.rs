//! Push subscriptions: what a browser's `PushManager.subscribe()` returns, registered per user.
//!
//! Stored in `PushSubscriptions` with partition = user and row = SHA-256 of the endpoint, so
//! re-registering an endpoint replaces it and "mine" is one partition read. The server POSTs
//! to these URLs, so an endpoint must be `https` to a public host; `http`, loopback, private
//! and link-local addresses are accepted only when development mode allows them
//! (`TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS`). The same rule is applied again to the addresses
//! a push connects to (`outbound`). The keys are checked for the shapes RFC 8291
//! needs: a 65-byte uncompressed P-256 point and a 16-byte auth secret.

use crate::adapters::outbound::{self, Reach};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::UserId;
use crate::store::stored_time;
use crate::subscriptions::{
    DoNotDisturb, MAX_ENDPOINT_CHARS, MAX_SUBSCRIPTIONS_PER_USER, NewSubscription, PushSubscription, Unsubscribe,
    check_keys,
};

/// Checks an endpoint URL when it is registered: https to a public host, unless private
/// endpoints are allowed ([`outbound::check_url`], the rule every push is sent under). What a
/// name resolves to is judged when a push connects, not here: it can change in between.
fn check_endpoint(endpoint: &str, allow_private: bool) -> Result<()> {
    let invalid = |why: &str| Error::validation(format!("endpoint {why}"));
    if endpoint.chars().count() > MAX_ENDPOINT_CHARS {
        return Err(invalid("is too long"));
    }
    let url = reqwest::Url::parse(endpoint).map_err(|_| invalid("is not a URL"))?;
    outbound::check_url(&url, Reach::allowing_private(allow_private)).map_err(|refused| invalid(&refused.0))
}

/// What belongs to a user rather than a room: push subscriptions, direct conversations, the
/// directory of public rooms. Holds what it uses: the store, the adapters and settings, and the
/// components it calls.
#[derive(Clone)]
pub struct Accounts {
    pub(crate) store: crate::store::Store,
    pub(crate) push: std::sync::Arc<crate::notify::PushSettings>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
}

impl Accounts {
    /// Registers (or, for a known endpoint, replaces) one of the caller's subscriptions.
    pub async fn subscribe(&self, who: &Principal, input: NewSubscription) -> Result<PushSubscription> {
        self.access.refuse_while_erasing(&who.user_id).await?;
        check_endpoint(&input.endpoint, self.push.allow_private_endpoints)?;
        check_keys(&input.keys)?;
        let mine = self.subscriptions(&who.user_id).await?;
        let known = mine.iter().any(|s| s.endpoint == input.endpoint);
        if !known && mine.len() >= MAX_SUBSCRIPTIONS_PER_USER {
            return Err(Error::Conflict(format!(
                "at most {MAX_SUBSCRIPTIONS_PER_USER} push subscriptions per user"
            )));
        }
        let subscription = PushSubscription {
            endpoint: input.endpoint,
            keys: input.keys,
            created_at: stored_time(self.store.now()),
        };
        self.store
            .subscriptions
            .put_subscription(&who.user_id, &subscription)
            .await?;
        Ok(subscription)
    }

    pub async fn unsubscribe(&self, who: &Principal, input: Unsubscribe) -> Result<()> {
        self.forget_subscription(&who.user_id, &input.endpoint).await
    }

    pub async fn my_subscriptions(&self, who: &Principal) -> Result<Vec<PushSubscription>> {
        self.subscriptions(&who.user_id).await
    }

    /// Sets the caller's do-not-disturb (until a time; no time ends it): while it holds, no
    /// push reaches them at all.
    pub async fn set_do_not_disturb(&self, who: &Principal, input: DoNotDisturb) -> Result<DoNotDisturb> {
        let dnd = input.checked(self.store.now())?;
        let dnd = DoNotDisturb {
            until: dnd.until.map(stored_time),
        };
        self.store.subscriptions.set_do_not_disturb(&who.user_id, &dnd).await?;
        Ok(dnd)
    }

    /// The caller's do-not-disturb; one that has ended reads as none.
    pub async fn do_not_disturb(&self, who: &Principal) -> Result<DoNotDisturb> {
        let (_, dnd) = self
            .store
            .subscriptions
            .push_targets(&who.user_id, MAX_SUBSCRIPTIONS_PER_USER)
            .await?;
        Ok(match dnd.holds_at(self.store.now()) {
            true => dnd,
            false => DoNotDisturb::default(),
        })
    }

    pub(crate) async fn subscriptions(&self, user: &UserId) -> Result<Vec<PushSubscription>> {
        Ok(self
            .store
            .subscriptions
            .subscriptions(user, MAX_SUBSCRIPTIONS_PER_USER)
            .await?)
    }

    pub(crate) async fn forget_subscription(&self, user: &UserId, endpoint: &str) -> Result<()> {
        Ok(self.store.subscriptions.delete_subscription(user, endpoint).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_public_https_unless_allowed() {
        assert!(check_endpoint("https://fcm.googleapis.com/fcm/send/abc", false).is_ok());
        for bad in [
            "http://push.example.com/x",
            "https://127.0.0.1/x",
            "https://10.1.2.3/x",
            "https://169.254.169.254/latest",
            "https://[::1]/x",
            "https://[fe80::1]/x",
            "https://localhost/x",
            "https://user:pw@push.example.com/x",
            "ftp://push.example.com/x",
            "not a url",
        ] {
            assert!(check_endpoint(bad, false).is_err(), "{bad}");
        }
        assert!(check_endpoint("http://127.0.0.1:9000/push", true).is_ok());
        assert!(check_endpoint("ftp://127.0.0.1/x", true).is_err());
    }
}
