//! Push subscriptions: what a browser's `PushManager.subscribe()` returns, registered per user.
//!
//! Stored in `PushSubscriptions` with partition = user and row = SHA-256 of the endpoint, so
//! re-registering an endpoint replaces it and "mine" is one partition read. The server POSTs
//! to these URLs, so an endpoint must be `https` to a public host; `http`, loopback, private
//! and link-local addresses are accepted only when development mode allows them
//! (`TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS`). The same rule is applied again to the addresses
//! a push connects to (`outbound`). The keys are checked for the shapes RFC 8291
//! needs: a 65-byte uncompressed P-256 point and a 16-byte auth secret.

use super::Chat;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::UserId;
use crate::push::subscriptions::{
    MAX_SUBSCRIPTIONS_PER_USER, NewSubscription, PushSubscription, Unsubscribe, check_endpoint, check_keys,
};
use chrono::Utc;

impl Chat {
    /// Registers (or, for a known endpoint, replaces) one of the caller's subscriptions.
    pub async fn subscribe(&self, who: &Principal, input: NewSubscription) -> Result<PushSubscription> {
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
            created_at: crate::storage::entity::truncate_to_micros(Utc::now()),
        };
        self.store.put_subscription(&who.user_id, &subscription).await?;
        Ok(subscription)
    }

    pub async fn unsubscribe(&self, who: &Principal, input: Unsubscribe) -> Result<()> {
        self.forget_subscription(&who.user_id, &input.endpoint).await
    }

    pub async fn my_subscriptions(&self, who: &Principal) -> Result<Vec<PushSubscription>> {
        self.subscriptions(&who.user_id).await
    }

    pub(crate) async fn subscriptions(&self, user: &UserId) -> Result<Vec<PushSubscription>> {
        self.store.subscriptions(user, MAX_SUBSCRIPTIONS_PER_USER).await
    }

    pub(crate) async fn forget_subscription(&self, user: &UserId, endpoint: &str) -> Result<()> {
        self.store.delete_subscription(user, endpoint).await
    }
}
