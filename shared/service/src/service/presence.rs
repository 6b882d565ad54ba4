//! Presence as the service keeps it: a user is online while a live connection of theirs is
//! open and away (with when they were last seen) once the last one closed, plus the custom
//! status they set. The connections are reported by the live channel — the local hub's
//! [`HubEvent`]s in the self-hosted server, Web PubSub's `connected`/`disconnected` system
//! events posted to the upstream handler on Azure — and kept as rows (`store::presence`), so
//! several processes and repeated events agree.
//!
//! A change reaches the members of the user's rooms as a `presence` signal on each room's
//! group — since tiered delivery, the connections showing that room; a member elsewhere reads
//! it from `listMembers` when they open the room, so a flip costs one send per room, never one
//! per member — coalesced per user: the first change goes at once, and any within the next
//! [`PRESENCE_INTERVAL`] make one more signal at its end, carrying the state read then, so the
//! last state wins and a user flapping costs a room at most one signal per interval. (The gate
//! is per process: two processes may each send one.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::stream::{StreamExt, TryStreamExt};

use crate::adapters::live::local_hub::HubEvent;
use crate::adapters::live::upstream::{ConnectionEvent, EventHeaders};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::UserId;
use crate::members::{MAX_PRESENCE_LISTED, MemberSummary};
use crate::presence::{NewStatus, Presence};
use crate::rooms::MAX_ROOMS_PER_USER;
use crate::signals::Signal;

/// At most one presence signal per user this often (in each process).
pub const PRESENCE_INTERVAL: Duration = Duration::from_secs(5);
/// How often a local hub renews its heartbeat (and sweeps stopped hubs).
pub const HUB_HEARTBEAT: Duration = Duration::from_secs(30);
/// How long a heartbeat holds: a hub not heard of for this long belongs to a stopped process.
const HUB_LEASE: chrono::Duration = chrono::Duration::seconds(90);
/// Connections of one stopped hub closed per sweep (the next sweep goes on).
const SWEPT_AT_ONCE: usize = 1000;
/// Presence rows a member listing reads at the same time.
const PRESENCE_READS_AT_ONCE: usize = 16;

/// What the gate says about a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Send now.
    Now,
    /// Send once this much time has passed (the end of the interval); nothing is scheduled yet.
    After(Duration),
    /// A send is already scheduled; it will read the newest state.
    Scheduled,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    sent: Instant,
    scheduled: bool,
}

/// When each user's last presence signal went, in this process. A std mutex: held only to
/// look up and update, never across an await.
#[derive(Debug)]
pub(crate) struct PresenceGate {
    interval: Duration,
    slots: Mutex<HashMap<String, Slot>>,
}

impl Default for PresenceGate {
    fn default() -> PresenceGate {
        PresenceGate::new(PRESENCE_INTERVAL)
    }
}

impl PresenceGate {
    pub(crate) fn new(interval: Duration) -> PresenceGate {
        PresenceGate {
            interval,
            slots: Mutex::default(),
        }
    }

    /// What to do with a change of `user` at `now` (and records it).
    pub(crate) fn admit(&self, user: &str, now: Instant) -> Admit {
        let mut slots = self.slots.lock().expect("presence lock");
        if slots.len() > 10_000 {
            slots.retain(|_, slot| slot.scheduled || now.duration_since(slot.sent) < self.interval);
        }
        match slots.get_mut(user) {
            Some(slot) if slot.scheduled => Admit::Scheduled,
            Some(slot) if now.duration_since(slot.sent) < self.interval => {
                slot.scheduled = true;
                Admit::After(self.interval - now.duration_since(slot.sent))
            }
            _ => {
                slots.insert(
                    user.to_owned(),
                    Slot {
                        sent: now,
                        scheduled: false,
                    },
                );
                Admit::Now
            }
        }
    }

    /// The scheduled send of `user` goes at `now`.
    pub(crate) fn fired(&self, user: &str, now: Instant) {
        self.slots.lock().expect("presence lock").insert(
            user.to_owned(),
            Slot {
                sent: now,
                scheduled: false,
            },
        );
    }
}

/// Presence: who is online, from the live connections, announced to their rooms. Holds what it
/// uses: the store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct PresenceKeeper {
    pub(crate) store: crate::store::Store,
    pub(crate) live: Option<std::sync::Arc<dyn crate::adapters::live::LiveChannel>>,
    pub(crate) local_hub: Option<std::sync::Arc<crate::adapters::live::local_hub::LocalHub>>,
    pub(crate) presence: std::sync::Arc<crate::service::presence::PresenceGate>,
    pub(crate) upstream: Option<std::sync::Arc<crate::adapters::live::upstream::Upstream>>,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl PresenceKeeper {
    /// Keeps presence from this process's local hub, if it runs one: a task that records
    /// each user connection opened and closed under a random tag of this process (so two
    /// processes on one store never share a connection row), renews the hub's heartbeat every
    /// [`HUB_HEARTBEAT`], and closes the connections of hubs whose heartbeat lapsed (a process
    /// that died with connections open). Ends when the hub does, or the server stops.
    pub fn watch_local_hub(&self) {
        let Some(hub) = self.local_hub.as_ref() else {
            return;
        };
        let mut events = hub.watch();
        let chat = self.clone();
        let tag = uuid::Uuid::new_v4().simple().to_string();
        self.tasks.spawn_until_stopped(async move {
            let mut beats = tokio::time::interval(HUB_HEARTBEAT);
            loop {
                tokio::select! {
                    _ = beats.tick() => chat.hub_heartbeat(&tag).await,
                    event = events.recv() => match event {
                        Some(event) => {
                            if let Err(e) = chat.hub_event(&tag, event).await {
                                tracing::warn!(error = %e, "a connection's presence was not recorded");
                            }
                        }
                        None => break,
                    },
                }
            }
        });
    }

    /// Renews this hub's heartbeat and sweeps the hubs of stopped processes; best effort.
    async fn hub_heartbeat(&self, tag: &str) {
        let now = self.store.now();
        if let Err(e) = self.store.presence.beat_hub(tag, now + HUB_LEASE).await {
            tracing::warn!(error = %e, "the live hub's heartbeat was not renewed");
        }
        if let Err(e) = self.sweep_stopped_hubs(now).await {
            tracing::warn!(error = %e, "sweeping the connections of stopped hubs failed; trying again");
        }
    }

    /// One connection of the local hub of process `tag` opened or closed. An opening is
    /// listed under the hub before it counts, and a closing taken off the list after, so a
    /// sweep after this process dies finds every connection it left open.
    pub(crate) async fn hub_event(&self, tag: &str, event: HubEvent) -> Result<()> {
        let (user, connection, open) = match event {
            HubEvent::Opened { user, connection } => (user, connection, true),
            HubEvent::Closed { user, connection } => (user, connection, false),
        };
        let Ok(user) = UserId::parse(&user) else {
            return Ok(());
        };
        let row = format!("{tag}.{connection}");
        if open {
            self.store
                .presence
                .index_hub_connection(tag, &connection, &user)
                .await?;
            self.connection_changed(&user, &row, true).await
        } else {
            self.connection_changed(&user, &row, false).await?;
            Ok(self.store.presence.unindex_hub_connection(tag, &connection).await?)
        }
    }

    /// Closes every connection still listed on a local hub whose heartbeat lapsed before
    /// `now` (its presence, and the room it showed), and forgets that hub once none is left. Answers how many were closed.
    pub async fn sweep_stopped_hubs(&self, now: chrono::DateTime<Utc>) -> Result<usize> {
        let mut closed = 0;
        for tag in self.store.presence.lapsed_hubs(now).await? {
            let connections = self.store.presence.hub_connections(&tag, SWEPT_AT_ONCE).await?;
            if connections.is_empty() {
                self.store.presence.forget_hub(&tag).await?;
                continue;
            }
            for (connection, user) in connections {
                // What it showed is no longer looked at (tiered delivery), as on a close.
                self.signals.connection_closed(user.as_str(), &connection).await;
                self.hub_event(
                    &tag,
                    HubEvent::Closed {
                        user: user.to_string(),
                        connection,
                    },
                )
                .await?;
                closed += 1;
            }
        }
        Ok(closed)
    }

    /// A Web PubSub system event posted to the upstream handler: believed only with a valid
    /// signature (else 401), then recorded. Events other than connected and disconnected, and
    /// those of connections without a user, are accepted and ignored.
    pub async fn upstream_event(&self, headers: &EventHeaders) -> Result<()> {
        let Some(upstream) = &self.upstream else {
            return Err(Error::Unauthorized("no Web PubSub hub sends events here".into()));
        };
        let (user, connection, open) = match upstream.verify(headers)? {
            ConnectionEvent::Connected { user, connection } => (user, connection, true),
            ConnectionEvent::Disconnected { user, connection } => (user, connection, false),
            ConnectionEvent::Other => return Ok(()),
        };
        let Ok(user) = UserId::parse(&user) else {
            return Ok(());
        };
        if open {
            return self.connection_changed(&user, &connection, true).await;
        }
        // Closed first, then the room it showed is no longer looked at through it (tiered
        // delivery): a view racing this close either finds the connection closed when it
        // checks again, or wrote the rows this reads (`Signals::view_room`).
        let now = self.store.now();
        self.store.presence.close_connection(&user, &connection, now).await?;
        self.signals.connection_closed(user.as_str(), &connection).await;
        self.settle(&user, now).await
    }

    /// Records one connection of `user` opened or closed, and announces the state when this
    /// flipped it.
    pub(crate) async fn connection_changed(&self, user: &UserId, connection: &str, open: bool) -> Result<()> {
        let now = self.store.now();
        match open {
            true => self.store.presence.open_connection(user, connection, now).await?,
            false => self.store.presence.close_connection(user, connection, now).await?,
        }
        self.settle(user, now).await
    }

    /// Makes `user`'s presence agree with their connection rows, and announces a flip.
    async fn settle(&self, user: &UserId, now: chrono::DateTime<Utc>) -> Result<()> {
        if self.store.presence.settle_presence(user, now).await?.is_some() {
            self.announce_presence(user);
        }
        Ok(())
    }

    /// Sets the caller's custom status and tells their rooms.
    pub async fn set_status(&self, who: &Principal, input: NewStatus) -> Result<Presence> {
        let mut status = input.checked(self.store.now())?;
        status.expires_at = status.expires_at.map(crate::store::stored_time);
        let presence = self.store.presence.set_status(&who.user_id, Some(&status)).await?;
        self.announce_presence(&who.user_id);
        Ok(presence.as_of(self.store.now()))
    }

    /// Clears the caller's custom status and tells their rooms.
    pub async fn clear_status(&self, who: &Principal) -> Result<Presence> {
        let presence = self.store.presence.set_status(&who.user_id, None).await?;
        self.announce_presence(&who.user_id);
        Ok(presence)
    }

    /// The caller's own presence and status.
    pub async fn my_presence(&self, who: &Principal) -> Result<Presence> {
        Ok(self
            .store
            .presence
            .presence(&who.user_id)
            .await?
            .as_of(self.store.now()))
    }

    /// `members` with the presence of the first [`MAX_PRESENCE_LISTED`] filled in: one point
    /// read each, [`PRESENCE_READS_AT_ONCE`] at a time.
    pub(crate) async fn with_presence(&self, members: Vec<MemberSummary>) -> Result<Vec<MemberSummary>> {
        let now = self.store.now();
        futures::stream::iter(members.into_iter().enumerate())
            .map(|(i, mut member)| async move {
                if i < MAX_PRESENCE_LISTED
                    && let Ok(user) = UserId::parse(&member.user_id)
                {
                    member.presence = Some(self.store.presence.presence(&user).await?.as_of(now));
                }
                Ok::<_, Error>(member)
            })
            .buffered(PRESENCE_READS_AT_ONCE)
            .try_collect()
            .await
    }

    /// Tells the rooms of `user` their presence, through the gate, in the background.
    fn announce_presence(&self, user: &UserId) {
        if self.live.is_none() {
            return;
        }
        let delay = match self.presence.admit(user.as_str(), Instant::now()) {
            Admit::Now => Duration::ZERO,
            Admit::After(delay) => delay,
            Admit::Scheduled => return,
        };
        let (chat, user) = (self.clone(), user.clone());
        self.tasks.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
                chat.presence.fired(user.as_str(), Instant::now());
            }
            if let Err(e) = chat.send_presence(&user).await {
                tracing::warn!(%user, error = %e, "a presence signal was not sent");
            }
        });
    }

    /// Sends `user`'s presence as stored now to each of their rooms' groups.
    async fn send_presence(&self, user: &UserId) -> Result<()> {
        let presence = self.store.presence.presence(user).await?.as_of(self.store.now());
        for room in self.store.members.user_rooms(user, MAX_ROOMS_PER_USER).await? {
            let signal = Signal::Presence {
                user_id: user.to_string(),
                presence: presence.clone(),
            };
            self.signals.signal(&room, signal);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_lets_one_signal_per_interval_and_schedules_one_for_the_rest() {
        let gate = PresenceGate::new(Duration::from_secs(5));
        let start = Instant::now();
        assert_eq!(gate.admit("bob", start), Admit::Now);
        assert_eq!(gate.admit("carol", start), Admit::Now, "per user");
        let one = start + Duration::from_secs(1);
        assert_eq!(gate.admit("bob", one), Admit::After(Duration::from_secs(4)));
        for i in 2..5 {
            assert_eq!(gate.admit("bob", start + Duration::from_secs(i)), Admit::Scheduled);
        }
        let end = start + Duration::from_secs(5);
        gate.fired("bob", end);
        assert_eq!(
            gate.admit("bob", end + Duration::from_secs(1)),
            Admit::After(Duration::from_secs(4))
        );
        assert_eq!(gate.admit("bob", end + Duration::from_secs(6)), Admit::Scheduled);
        assert_eq!(gate.admit("carol", start + Duration::from_secs(5)), Admit::Now);
    }
}
