//! Live delivery as the service uses it: signals to a room's group after every durable change,
//! typing (rate-limited, never stored), the client URL a browser connects with (`negotiate`),
//! which room a connection shows (`view_room`: the server alone puts connections in groups),
//! and taking a member who left out of their room's group. Where signals go is the live
//! channel's business (`crate::adapters::live`); losing it costs only liveness.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::adapters::live::{LiveChannel, room_group};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::messages::checks::refuse_timed_out;
use crate::rooms::MAX_ROOMS_PER_USER;
use crate::signals::{Envelope, Signal, ViewRoom};
use crate::store::stored_time;
use futures::StreamExt;

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

/// The live channel: signals to a room, notices to the members not looking at it, typing, who may
/// join a live group. Holds what it uses: the store, the adapters and settings, and the components
/// it calls.
#[derive(Clone)]
pub struct Signals {
    pub(crate) store: crate::store::Store,
    pub(crate) live: Option<std::sync::Arc<dyn crate::adapters::live::LiveChannel>>,
    pub(crate) typing: std::sync::Arc<crate::service::live::TypingGate>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
}

impl Signals {
    /// Tells the room the caller is typing: members only, at most once every 3 seconds per
    /// user and room (more are accepted and dropped), never stored.
    pub async fn typing(&self, who: &Principal, room: &RoomId) -> Result<()> {
        let access = self.access.access(room, &who.user_id).await?;
        refuse_timed_out(&access.member, self.store.now())?;
        if !self.typing.admit(room, who.user_id.as_str(), Instant::now()) {
            return Ok(());
        }
        let signal = Signal::Typing {
            user_id: who.user_id.to_string(),
            user_name: access.member.nickname.clone().unwrap_or_else(|| who.name.clone()),
        };
        if !access.room.direct {
            self.signal(room, signal);
            return Ok(());
        }
        // In a direct conversation the other person is told wherever they are, as a message
        // there reaches them wherever they are: to their connections, not the room's group.
        for member in self.store.members.members(room, 2, false).await? {
            if member.user_id != who.user_id {
                self.notice(room, &member.user_id, signal.clone());
            }
        }
        Ok(())
    }

    /// A client URL for the caller whose token joins no group: the server puts the connection
    /// in the group of the room it shows (`view_room`), checking membership each time, so a
    /// removed member's token cannot rejoin. A fresh connection is due one notice per room (its
    /// client reads the room list to start from). `local_endpoint` is this server as the
    /// caller reached it (`http(s)://host`), for the local hub's URL.
    pub async fn negotiate(&self, who: &Principal, local_endpoint: &str) -> Result<Negotiated> {
        let Some(live) = &self.live else {
            return Err(Error::Unavailable("live delivery is not configured here".into()));
        };
        // Arms a notice in every room of the caller's: each call draws from their bucket.
        self.limiter.check_user_limit(&who.user_id).await?;
        let (url, expires_at) = live.client_url(local_endpoint, who.user_id.as_str(), &[], self.store.now())?;
        let rooms = self.store.members.user_rooms(&who.user_id, MAX_ROOMS_PER_USER).await?;
        futures::stream::iter(rooms)
            .for_each_concurrent(8, |room| async move { self.arm_notice(&room, &who.user_id).await })
            .await;
        Ok(Negotiated { url, expires_at })
    }

    /// Makes the caller's live connection show one room (or none): it joins that room's group,
    /// where full messages go, and leaves the group of the room it showed before, which is due
    /// a notice again. Members only (any other room answers as missing); a connection that is
    /// not open (or, on the local hub, not the caller's) answers 404 too. Of this and a removal
    /// racing, the removal wins: membership is checked again once the connection is in.
    ///
    /// Web PubSub cannot say whose a connection is, so there the connection must be one its
    /// signed `connected` event named as the caller's, and not closed since (409 while that
    /// event has not arrived: the client tries again; 404 once it closed). Otherwise anyone
    /// who learned a connection id could put it in a room of theirs, showing its messages to
    /// a non-member.
    pub async fn view_room(&self, who: &Principal, input: ViewRoom) -> Result<()> {
        let connection = input.connection()?;
        let target = input.room_id.as_deref().map(RoomId::parse).transpose()?;
        let Some(live) = &self.live else {
            return Err(Error::Unavailable("live delivery is not configured here".into()));
        };
        if let Some(room) = &target {
            self.access.access(room, &who.user_id).await?;
        }
        let me = &who.user_id;
        if !live.checks_owner() {
            self.own_connection(me, connection).await?;
        }
        let known = self.store.live.shown_room(me, connection).await?;
        let seen = known.is_some();
        let previous = known.flatten().filter(|room| Some(room) != target.as_ref());
        let now = stored_time(self.store.now());
        if let Some(room) = &target {
            let group = room_group(room.as_str());
            if !live.add_connection_to_group(connection, me.as_str(), &group).await? {
                return Err(Error::not_found("no such live connection"));
            }
            self.store.live.add_viewer(room, connection, me, now).await?;
        }
        self.store
            .live
            .show_room(me, connection, target.as_ref(), seen, now)
            .await?;
        if let Some(old) = previous {
            if let Err(e) = live
                .remove_connection_from_group(connection, &room_group(old.as_str()))
                .await
            {
                tracing::warn!(room = %old, error = %e, "could not take a connection out of a live group");
            }
            self.store.live.remove_viewer(&old, connection).await?;
            self.arm_notice(&old, me).await;
        }
        if let Some(room) = &target
            && self.store.members.member(room, me).await?.is_none()
        {
            let _ = live
                .remove_connection_from_group(connection, &room_group(room.as_str()))
                .await;
            self.store.live.remove_viewer(room, connection).await?;
            self.store.live.show_room(me, connection, None, true, now).await?;
            return Err(Error::not_found("room not found"));
        }
        // Of this and the connection closing, the close wins the same way: it is recorded
        // before its handling reads these rows (`Signals::connection_closed`), so either that
        // reading finds them, or this finds the connection closed and takes them back.
        if !self.still_open(live.as_ref(), me, connection).await? {
            if let Some(room) = &target {
                let _ = live
                    .remove_connection_from_group(connection, &room_group(room.as_str()))
                    .await;
                self.store.live.remove_viewer(room, connection).await?;
            }
            self.store.live.forget_view(me, connection).await?;
            return Err(Error::not_found("no such live connection"));
        }
        Ok(())
    }

    /// Whether `user`'s connection is still open: as the channel tells, else (Web PubSub) as
    /// its `connected`/`disconnected` events recorded it.
    async fn still_open(&self, live: &dyn LiveChannel, user: &UserId, connection: &str) -> Result<bool> {
        match live.connection_open(connection, user.as_str()) {
            Some(open) => Ok(open),
            None => Ok(self.store.presence.connection_open(user, connection).await? == Some(true)),
        }
    }

    /// Refuses a connection no `connected` event named as `user`'s (yet: `Conflict`), or one
    /// closed since (`NotFound`): one point read of their presence partition.
    async fn own_connection(&self, user: &UserId, connection: &str) -> Result<()> {
        match self.store.presence.connection_open(user, connection).await? {
            Some(true) => Ok(()),
            Some(false) => Err(Error::not_found("no such live connection")),
            None => Err(Error::Conflict(
                "this connection's connected event has not reached the server yet; try again shortly".into(),
            )),
        }
    }

    /// A live connection of `user` closed: the room it showed is no longer looked at through
    /// it, and is due a notice again; best effort. The local hub calls it, and on Azure Web
    /// PubSub's `disconnected` event (`PresenceKeeper::upstream_event`); a connection whose event was
    /// lost lapses after `store::live::VIEW_TTL`.
    pub async fn connection_closed(&self, user: &str, connection: &str) {
        let Ok(user) = UserId::parse(user) else {
            return;
        };
        let closed = async {
            if let Some(Some(room)) = self.store.live.shown_room(&user, connection).await? {
                self.store.live.remove_viewer(&room, connection).await?;
                self.arm_notice(&room, &user).await;
            }
            self.store.live.forget_view(&user, connection).await
        };
        if let Err(e) = closed.await {
            tracing::warn!(%user, error = %e, "could not forget a closed connection's view");
        }
    }

    /// Takes `user` out of the room's live group after they left or were removed, so the
    /// room's signals stop reaching them; best effort. Their token holds no join role, so
    /// their client cannot rejoin it, and `view_room` refuses a non-member. Their rows of who
    /// looks at the room go too, so nothing of theirs is left in it.
    pub(crate) async fn revoke_live(&self, room: &RoomId, user: &UserId) {
        if let Some(live) = &self.live {
            live.remove_from_group(user.as_str(), &room_group(room.as_str()));
            if let Err(e) = self.store.live.forget_looker(room, user).await {
                tracing::warn!(%room, %user, error = %e, "could not forget a removed member's live rows");
            }
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
