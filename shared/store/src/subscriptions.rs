//! Push subscription rows: `PushSubscriptions`, partition = user, row = SHA-256 of the
//! endpoint, so re-registering an endpoint replaces it and "mine" is one partition read.

use super::error::Result;
use super::schema::{DO_NOT_DISTURB_ROW, subscription_key, user_key};
use tabletalk_domain::ids::UserId;
use tabletalk_domain::subscriptions::{DoNotDisturb, PushKeys, PushSubscription};
use tabletalk_tables::{Entity, RangeQuery, UpdateMode, Value};

fn subscription_row(user: &UserId, subscription: &PushSubscription) -> Entity {
    Entity::new(user_key(user), subscription_key(&subscription.endpoint))
        .with("endpoint", Value::String(subscription.endpoint.clone()))
        .with("p256dh", Value::String(subscription.keys.p256dh.clone()))
        .with("auth", Value::String(subscription.keys.auth.clone()))
        .with("createdAt", Value::datetime(subscription.created_at))
}

fn parse_subscription(entity: &Entity) -> Option<PushSubscription> {
    Some(PushSubscription {
        endpoint: entity.str("endpoint")?.to_owned(),
        keys: PushKeys {
            p256dh: entity.str("p256dh")?.to_owned(),
            auth: entity.str("auth")?.to_owned(),
        },
        created_at: entity.datetime("createdAt")?,
    })
}

/// Web Push subscriptions. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct SubscriptionStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl SubscriptionStore {
    /// Registers (or, for a known endpoint, replaces) a subscription of `user`.
    pub async fn put_subscription(&self, user: &UserId, subscription: &PushSubscription) -> Result<()> {
        self.tables
            .upsert(
                &self.schema.push_subscriptions,
                &subscription_row(user, subscription),
                UpdateMode::Replace,
            )
            .await?;
        Ok(())
    }

    /// `user`'s subscriptions, up to `max` (a row that cannot be read is left out).
    pub async fn subscriptions(&self, user: &UserId, max: usize) -> Result<Vec<PushSubscription>> {
        Ok(self.push_targets(user, max).await?.0)
    }

    /// `user`'s subscriptions (up to `max`) and do-not-disturb, in one partition read.
    pub async fn push_targets(&self, user: &UserId, max: usize) -> Result<(Vec<PushSubscription>, DoNotDisturb)> {
        let query = RangeQuery::partition(user_key(user), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.push_subscriptions, &query, max + 1)
            .await?;
        let dnd = rows
            .iter()
            .find(|row| row.row_key == DO_NOT_DISTURB_ROW)
            .map(|row| DoNotDisturb {
                until: row.datetime("until"),
            })
            .unwrap_or_default();
        let mut subscriptions: Vec<PushSubscription> = rows.iter().filter_map(parse_subscription).collect();
        subscriptions.truncate(max);
        Ok((subscriptions, dnd))
    }

    /// Sets (or, with no end, clears) `user`'s do-not-disturb.
    pub async fn set_do_not_disturb(&self, user: &UserId, dnd: &DoNotDisturb) -> Result<()> {
        match dnd.until {
            Some(until) => {
                let row = Entity::new(user_key(user), DO_NOT_DISTURB_ROW).with("until", Value::datetime(until));
                self.tables
                    .upsert(&self.schema.push_subscriptions, &row, UpdateMode::Replace)
                    .await?;
                Ok(())
            }
            None => {
                crate::delete_if_present(
                    &self.tables,
                    &self.schema.push_subscriptions,
                    &user_key(user),
                    DO_NOT_DISTURB_ROW,
                )
                .await
            }
        }
    }

    pub async fn delete_subscription(&self, user: &UserId, endpoint: &str) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.push_subscriptions,
            &user_key(user),
            &subscription_key(endpoint),
        )
        .await
    }
}
