//! The live channel: where a room's live signals go after a durable write, who is connected
//! (a connected user is not pushed), and the URL a browser connects with. Azure Web PubSub
//! ([`web_pubsub`]) in the cloud; the self-hosted server's own compatible hub ([`local_hub`])
//! without it. The store stays the truth: losing the channel costs only liveness.

pub mod local_hub;
pub mod upstream;
pub mod web_pubsub;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use tabletalk_domain::error::Result;

use self::local_hub::LocalHub;
use self::web_pubsub::WebPubSub;

/// The group of a room's live signals.
pub fn room_group(room: &str) -> String {
    format!("room.{room}")
}

/// A live channel. Sending and removal are best effort: they return at once and never fail
/// the caller (a failure is logged), since the store already holds what they announce.
#[async_trait]
pub trait LiveChannel: Send + Sync + std::fmt::Debug {
    /// Sends `body` (JSON) to every connection in `group`.
    fn send_to_group(&self, group: &str, body: Vec<u8>);

    /// Takes `user`'s connections out of `group` (a member who left or was removed).
    fn remove_from_group(&self, user: &str, group: &str);

    /// Sends `body` (JSON) to every connection of `user`, whatever groups they are in: a
    /// notice for them alone.
    fn send_to_user(&self, user: &str, body: Vec<u8>);

    /// Whether `user` has a live connection open.
    async fn user_connected(&self, user: &str) -> Result<bool>;

    /// Puts the connection `connection` of `user` in `group`, the server's own doing (tokens
    /// carry no join roles); false when no such connection is open, or (where the channel can
    /// tell) it is not `user`'s. Awaited: the caller answers with the outcome.
    async fn add_connection_to_group(&self, connection: &str, user: &str, group: &str) -> Result<bool>;

    /// Takes the connection `connection` out of `group` (it shows another room now).
    async fn remove_connection_from_group(&self, connection: &str, group: &str) -> Result<()>;

    /// Whether [`LiveChannel::add_connection_to_group`] itself refuses a connection that is not
    /// `user`'s. Where it does not (Web PubSub), the caller must know the connection is theirs
    /// otherwise: from its signed `connected` event (`Chat::view_room`).
    fn checks_owner(&self) -> bool;

    /// Whether `user`'s connection `connection` is open, where the channel can tell without a
    /// call (the local hub); none where it cannot (Web PubSub: the service reads the
    /// connection's row from its `connected` and `disconnected` events instead).
    fn connection_open(&self, connection: &str, user: &str) -> Option<bool>;

    /// A client URL for `user` whose token may join the groups of `rooms` and no other, and
    /// when it expires. `endpoint` is this server as the caller reached it
    /// (`http(s)://host[:port]`), which the local hub's URL is built on.
    fn client_url(
        &self,
        endpoint: &str,
        user: &str,
        rooms: &[String],
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>)>;
}

/// Azure Web PubSub through its REST API; sends and removals run in the background.
/// Calls to take a removed member out of a room's group on Web PubSub before giving up (the
/// last waits about 2 s after the first).
pub const REMOVAL_ATTEMPTS: u32 = 5;

#[async_trait]
impl LiveChannel for Arc<WebPubSub> {
    fn send_to_group(&self, group: &str, body: Vec<u8>) {
        let (web_pubsub, group) = (Arc::clone(self), group.to_owned());
        self.tasks.spawn(async move {
            if let Err(e) = WebPubSub::send_to_group(&web_pubsub, &group, body).await {
                tracing::warn!(%group, error = %e, "a live signal was not sent");
            }
        });
    }

    /// Retried with growing waits ([`REMOVAL_ATTEMPTS`]): a removed member left in the room's
    /// group would go on receiving its messages, so one failed call is not the end of it.
    fn remove_from_group(&self, user: &str, group: &str) {
        let (web_pubsub, user, group) = (Arc::clone(self), user.to_owned(), group.to_owned());
        self.tasks.spawn(async move {
            for attempt in 1..=REMOVAL_ATTEMPTS {
                match WebPubSub::remove_user_from_group(&web_pubsub, &user, &group).await {
                    Ok(()) => return,
                    Err(e) if attempt == REMOVAL_ATTEMPTS => {
                        tracing::error!(%user, %group, error = %e, "could not take a user out of a live group");
                    }
                    Err(e) => {
                        tracing::warn!(%user, %group, attempt, error = %e, "taking a user out of a live group failed; retrying");
                        // 250 ms, 500 ms, 1 s, … with up to half again at random, so the retries
                        // of many removals after an outage spread out.
                        let wait = 250u64 << (attempt - 1);
                        let jitter = rand::random::<u64>() % (wait / 2 + 1);
                        tokio::time::sleep(std::time::Duration::from_millis(wait + jitter)).await;
                    }
                }
            }
        });
    }

    async fn user_connected(&self, user: &str) -> Result<bool> {
        WebPubSub::user_connected(self, user).await
    }

    async fn add_connection_to_group(&self, connection: &str, _user: &str, group: &str) -> Result<bool> {
        WebPubSub::add_connection_to_group(self, connection, group).await
    }

    async fn remove_connection_from_group(&self, connection: &str, group: &str) -> Result<()> {
        WebPubSub::remove_connection_from_group(self, connection, group).await
    }

    fn checks_owner(&self) -> bool {
        false
    }

    fn connection_open(&self, _connection: &str, _user: &str) -> Option<bool> {
        None
    }

    fn send_to_user(&self, user: &str, body: Vec<u8>) {
        let (web_pubsub, user) = (Arc::clone(self), user.to_owned());
        self.tasks.spawn(async move {
            if let Err(e) = WebPubSub::send_to_user(&web_pubsub, &user, body).await {
                tracing::warn!(%user, error = %e, "a notice to a user was not sent");
            }
        });
    }

    fn client_url(
        &self,
        _endpoint: &str,
        user: &str,
        rooms: &[String],
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>)> {
        WebPubSub::client_url(self, user, rooms, now)
    }
}

/// The self-hosted server's hub, in this process. (On Azure a removed member's client whose
/// token is still valid could rejoin a group; the local hub refuses the rejoin.)
#[async_trait]
impl LiveChannel for Arc<LocalHub> {
    fn send_to_group(&self, group: &str, body: Vec<u8>) {
        LocalHub::send_to_group(self, group, &body);
    }

    fn remove_from_group(&self, user: &str, group: &str) {
        self.revoke(user, group);
    }

    async fn user_connected(&self, user: &str) -> Result<bool> {
        Ok(LocalHub::user_connected(self, user))
    }

    async fn add_connection_to_group(&self, connection: &str, user: &str, group: &str) -> Result<bool> {
        Ok(self.add_connection(connection, user, group))
    }

    async fn remove_connection_from_group(&self, connection: &str, group: &str) -> Result<()> {
        self.remove_connection(connection, group);
        Ok(())
    }

    fn checks_owner(&self) -> bool {
        true
    }

    fn connection_open(&self, connection: &str, user: &str) -> Option<bool> {
        Some(self.is_open(connection, user))
    }

    fn send_to_user(&self, user: &str, body: Vec<u8>) {
        LocalHub::send_to_user(self, user, &body);
    }

    fn client_url(
        &self,
        endpoint: &str,
        user: &str,
        rooms: &[String],
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>)> {
        LocalHub::client_url(self, endpoint, user, rooms, now)
    }
}
