//! Live delivery as the service uses it: signals to a room's group after every durable change,
//! typing (rate-limited, never stored), the client URL a browser connects with (`negotiate`),
//! and taking a member who left out of their room's group. Where signals go is the live
//! channel's business (`crate::adapters::live`); losing it costs only liveness.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::Chat;
use crate::adapters::live::room_group;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::messages::checks::refuse_timed_out;
use crate::signals::{Envelope, Signal};

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
            let signal = Signal::Typing {
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
        let Some(live) = &self.live else {
            return Err(Error::Unavailable("live delivery is not configured here".into()));
        };
        let rooms: Vec<String> = self
            .my_rooms(who)
            .await?
            .into_iter()
            .map(|entry| entry.room.id)
            .collect();
        let (url, expires_at) = live.client_url(local_endpoint, who.user_id.as_str(), &rooms, Utc::now())?;
        Ok(Negotiated { url, expires_at })
    }

    /// Takes `user` out of the room's live group after they left or were removed, so the
    /// room's signals stop reaching them; best effort. (On Azure a client whose token is still
    /// valid — tokens live an hour — could rejoin the group and stay in it while that
    /// connection lasts; the local hub refuses the rejoin.)
    pub(crate) fn revoke_live(&self, room: &RoomId, user: &UserId) {
        if let Some(live) = &self.live {
            live.remove_from_group(user.as_str(), &room_group(room.as_str()));
        }
    }

    /// Sends `signal` about `room` to `user`'s connections alone, in the background.
    pub(crate) fn notice(&self, room: &RoomId, user: &UserId, signal: Signal) {
        let Some(live) = &self.live else {
            return;
        };
        match serde_json::to_vec(&Envelope {
            room_id: room.as_str(),
            signal: &signal,
        }) {
            Ok(body) => live.send_to_user(user.as_str(), body),
            Err(e) => tracing::warn!(error = %e, "a notice did not serialize"),
        }
    }

    /// Sends `signal` to the room's group in the background; never fails the caller.
    pub(crate) fn signal(&self, room: &RoomId, signal: Signal) {
        let Some(live) = &self.live else {
            return;
        };
        let signal = signal.for_everyone();
        let body = match serde_json::to_vec(&Envelope {
            room_id: room.as_str(),
            signal: &signal,
        }) {
            Ok(body) => body,
            Err(e) => return tracing::warn!(error = %e, "a live signal did not serialize"),
        };
        live.send_to_group(&room_group(room.as_str()), body);
    }
}
