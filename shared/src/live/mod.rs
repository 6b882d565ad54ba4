//! Live delivery: the URL a browser connects to for its rooms' live signals (`negotiate`), the
//! signals themselves (`signals`), typing, and who is online (a connected user is not pushed).
//! Signals go to Azure Web PubSub when it is configured, else to the self-hosted server's own
//! compatible hub (`local_hub`).

pub mod local_hub;
pub mod signals;
pub mod web_pubsub;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::messages::checks::refuse_timed_out;
use crate::service::Chat;

use self::local_hub::LocalHub;
use self::web_pubsub::WebPubSub;

/// Where live signals go.
#[derive(Debug, Clone)]
pub enum Live {
    /// Nowhere: a Functions app without Web PubSub.
    Off,
    Azure(Arc<WebPubSub>),
    Local(Arc<LocalHub>),
}

/// One typing signal per user and room at most this often; more are dropped quietly.
pub const TYPING_INTERVAL: Duration = Duration::from_secs(3);

/// When each (room, user) last sent a typing signal, in this process. A std mutex: held only
/// to look up and update, never across an await.
#[derive(Debug, Default)]
pub(crate) struct TypingGate {
    last: Mutex<HashMap<(String, String), Instant>>,
}

impl TypingGate {
    /// True when a signal may go now (and records it).
    fn admit(&self, room: &RoomId, user: &str, now: Instant) -> bool {
        let mut last = self.last.lock().expect("typing lock");
        if last.len() > 10_000 {
            last.retain(|_, at| now.duration_since(*at) < TYPING_INTERVAL);
        }
        let key = (room.to_string(), user.to_owned());
        match last.get(&key) {
            Some(at) if now.duration_since(*at) < TYPING_INTERVAL => false,
            _ => {
                last.insert(key, now);
                true
            }
        }
    }
}

/// What `negotiate` answers.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Negotiated {
    /// A Web PubSub client URL (`wss://…/client/hubs/<hub>?access_token=…`).
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

impl Chat {
    /// Tells the room the caller is typing: members only, at most once every 3 seconds per
    /// user and room (more are accepted and dropped), never stored.
    pub async fn typing(&self, who: &Principal, room: &RoomId) -> Result<()> {
        let access = self.access(room, &who.user_id).await?;
        refuse_timed_out(&access.member, Utc::now())?;
        if self.typing.admit(room, who.user_id.as_str(), Instant::now()) {
            let signal = signals::Signal::Typing {
                user_id: who.user_id.to_string(),
                user_name: access.member.nickname.clone().unwrap_or_else(|| who.name.clone()),
            };
            self.signal(room, signal);
        }
        Ok(())
    }

    /// A client URL whose token lets the caller join the live groups of their rooms, and only
    /// those. `local_endpoint` is this server as the caller reached it (`http(s)://host`),
    /// for the local hub's URL.
    pub async fn negotiate(&self, who: &Principal, local_endpoint: &str) -> Result<Negotiated> {
        let unavailable = || Error::Unavailable("live delivery is not configured here".into());
        if matches!(self.live, Live::Off) {
            return Err(unavailable());
        }
        let rooms: Vec<String> = self
            .my_rooms(who)
            .await?
            .into_iter()
            .map(|entry| entry.room.id)
            .collect();
        let user = who.user_id.as_str();
        let (url, expires_at) = match &self.live {
            Live::Off => return Err(unavailable()),
            Live::Azure(web_pubsub) => web_pubsub.client_url(user, &rooms, Utc::now())?,
            Live::Local(hub) => hub.client_url(local_endpoint, user, &rooms, Utc::now())?,
        };
        Ok(Negotiated { url, expires_at })
    }

    /// Takes `user` out of the room's live group after they left or were removed, so the
    /// room's signals stop reaching them; best effort. (On Azure a client whose token is still
    /// valid — tokens live an hour — could rejoin the group and stay in it while that
    /// connection lasts; the local hub refuses the rejoin.)
    pub(crate) fn revoke_live(&self, room: &RoomId, user: &UserId) {
        let group = web_pubsub::room_group(room.as_str());
        match &self.live {
            Live::Off => {}
            Live::Local(hub) => hub.revoke(user.as_str(), &group),
            Live::Azure(web_pubsub) => {
                let (web_pubsub, user) = (Arc::clone(web_pubsub), user.to_string());
                tokio::spawn(async move {
                    if let Err(e) = web_pubsub.remove_user_from_group(&user, &group).await {
                        tracing::warn!(%user, %group, error = %e, "could not take a user out of a live group");
                    }
                });
            }
        }
    }

    /// Whether `user` has a live connection open; when that cannot be told, false (better a
    /// push too many than a message missed).
    pub(crate) async fn online(&self, user: &str) -> bool {
        match &self.live {
            Live::Off => false,
            Live::Local(hub) => hub.user_connected(user),
            Live::Azure(web_pubsub) => web_pubsub.user_connected(user).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not tell whether a user is online");
                false
            }),
        }
    }
}
