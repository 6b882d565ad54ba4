//! Outgoing webhooks: members with ManageWebhooks register, list and delete a room's HTTPS
//! endpoints for its message events, and list each one's deliveries. A change of a message
//! commits its event with it (`store::outgoing`); a delivery run — nudged in the background
//! after the change, never in the send's way, and the `deliverWebhooks` timer (self-hosted:
//! the housekeeping loop) for everything else — fans each event out into one delivery per
//! endpoint and posts what is due, signed, through the SSRF-safe client
//! (`adapters::outgoing`).
//!
//! A failed attempt is retried after [`retry_after`]'s backoff; an endpoint is tried in the
//! order of its changes and a run stops at its first failure, so an outage costs one request
//! per endpoint per run. A run calls the endpoints of a room, and several rooms, at once, so
//! one slow to answer holds up only its own deliveries. An endpoint that has failed for [`FAILURE_WINDOW`] without a success
//! is disabled, its pending deliveries abandoned, and its managers told: a live notice to the
//! manager who registered it, and a `System` line in the room (which every manager sees,
//! connected or not; it names no URL).
//!
//! Each attempt is claimed first (a conditional write on the delivery's row), so two runs at
//! once (two processes, a nudge and the timer) make one attempt, and a delivery answered 2xx
//! is never posted again. A receiver still dedupes by the delivery id: an answer lost after it
//! acted makes a retry.

use super::send::{Sending, Submission};
use chrono::{DateTime, Utc};
use futures::StreamExt as _;

use crate::adapters::outgoing::{Attempt, HookSender, new_secret};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::MessageKey;
use crate::messages::MessageType;
use crate::outgoing::{
    CLAIM, Delivery, DeliveryBody, DeliveryStatus, EndpointStatus, FAILURE_WINDOW, HookEvent, LastDelivery,
    MAX_OUTGOING_PER_ROOM, NewOutgoingWebhook, OutgoingWebhook, OutgoingWebhookWithSecret, check_id, missing, new_id,
    retry_after,
};
use crate::permissions::Permission;
use crate::signals::Signal;
use crate::store::outgoing::{HookEventRow, new_delivery};
use crate::store::stored_time;

/// Deliveries listed per endpoint.
pub const DELIVERIES_LISTED: usize = 100;
/// Finished deliveries are kept for the room's last this many changes…
pub const HISTORY_VERSIONS: u64 = 10_000;
/// …pruned when a delivery of a version that is a multiple of this lands, so pruning costs a
/// read per this many deliveries.
const PRUNE_EVERY: u64 = 64;
/// Pending deliveries of an endpoint read at once.
const PENDING_PAGE: usize = 100;
/// Pages of a disabled endpoint's pending deliveries a run abandons.
const ABANDONED_PAGES_PER_RUN: usize = 10;
/// Rooms a delivery run works on at once.
const ROOMS_AT_ONCE: usize = 16;

/// What a delivery run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Events fanned out into deliveries.
    pub events: usize,
    pub delivered: usize,
    pub failed: usize,
    /// Endpoints disabled by this run.
    pub disabled: usize,
}

impl DeliveryReport {
    fn add(&mut self, done: DeliveryReport) {
        self.events += done.events;
        self.delivered += done.delivered;
        self.failed += done.failed;
        self.disabled += done.disabled;
    }
}

impl Sending {
    /// Registers an endpoint; its signing secret is in this answer only.
    pub async fn create_outgoing_webhook(
        &self,
        who: &Principal,
        room: &RoomId,
        input: NewOutgoingWebhook,
    ) -> Result<OutgoingWebhookWithSecret> {
        let (url, events) = input.checked()?;
        self.outgoing_manager(room, who).await?;
        let sender = self.hook_sender()?;
        sender.check_url(&url).map_err(Error::validation)?;
        if self.store.outgoing.outgoing_webhooks(room).await?.len() >= MAX_OUTGOING_PER_ROOM {
            return Err(Error::Conflict(format!(
                "a room has at most {MAX_OUTGOING_PER_ROOM} outgoing webhooks; delete one first"
            )));
        }
        let id = new_id();
        let secret = new_secret();
        let hook = OutgoingWebhook {
            sealed_secret: sender.sealer().seal(&secret, &seal_context(room.as_str(), &id))?,
            id,
            room_id: room.to_string(),
            url,
            events,
            created_by: who.user_id.to_string(),
            created_at: stored_time(self.store.now()),
            status: EndpointStatus::Active,
            failing_since: None,
            disabled_at: None,
            last_delivery: None,
        };
        self.store.outgoing.insert_outgoing(&hook).await?;
        Ok(OutgoingWebhookWithSecret { webhook: hook, secret })
    }

    /// A room's endpoints, each with its newest attempt's outcome.
    pub async fn list_outgoing_webhooks(&self, who: &Principal, room: &RoomId) -> Result<Vec<OutgoingWebhook>> {
        self.outgoing_manager(room, who).await?;
        Ok(self.store.outgoing.outgoing_webhooks(room).await?)
    }

    pub async fn delete_outgoing_webhook(&self, who: &Principal, room: &RoomId, id: &str) -> Result<()> {
        self.outgoing_manager(room, who).await?;
        check_id(id)?;
        Ok(self.store.outgoing.delete_outgoing(room, id).await?)
    }

    /// An endpoint's deliveries, newest change first, with each one's last status.
    pub async fn list_deliveries(&self, who: &Principal, room: &RoomId, id: &str) -> Result<Vec<Delivery>> {
        self.outgoing_manager(room, who).await?;
        check_id(id)?;
        if self.store.outgoing.outgoing_webhook(room, id).await?.is_none() {
            return Err(missing());
        }
        Ok(self.store.outgoing.deliveries(room, id, DELIVERIES_LISTED).await?)
    }

    /// One delivery run over every room with endpoints, at the service's clock.
    pub async fn deliver_webhooks(&self) -> Result<DeliveryReport> {
        let mut report = DeliveryReport::default();
        if self.outgoing.is_none() {
            return Ok(report);
        }
        // Rooms at once (and each room's endpoints at once, `deliver_room`): an endpoint slow
        // to answer — up to a request's timeout, every run — holds up only its own deliveries.
        let rooms = self.store.outgoing.outgoing_rooms().await?;
        let mut runs = futures::stream::iter(rooms)
            .map(|(room, listing)| async move {
                let done = self.deliver_room(&room).await;
                (room, listing, done)
            })
            .buffer_unordered(ROOMS_AT_ONCE);
        while let Some((room, listing, done)) = runs.next().await {
            // One room's trouble never holds up the others; the next run tries it again.
            match done {
                Ok(Some(done)) => {
                    report.add(done);
                    if let Err(e) = self.store.outgoing.ensure_hooked(&room).await {
                        tracing::warn!(%room, error = %e, "could not check a room's hooked flag");
                    }
                }
                Ok(None) => self.store.outgoing.unlist_outgoing_room(&room, listing).await?,
                Err(e) => tracing::warn!(%room, error = %e, "delivering a room's webhooks failed"),
            }
        }
        Ok(report)
    }

    /// Runs a delivery for each room `rooms` names, each in the background, for as long as
    /// `sending` is in use: the receiving end of [`OutgoingNudge`].
    pub(crate) fn deliver_when_nudged(
        sending: std::sync::Weak<Sending>,
        mut rooms: tokio::sync::mpsc::UnboundedReceiver<RoomId>,
        tasks: &crate::adapters::tasks::Supervisor,
    ) {
        tasks.spawn_until_stopped(async move {
            while let Some(room) = rooms.recv().await {
                let Some(sending) = sending.upgrade() else {
                    return;
                };
                let tasks = sending.tasks.clone();
                tasks.spawn(async move {
                    if let Err(e) = sending.deliver_room(&room).await {
                        tracing::warn!(%room, error = %e, "delivering webhooks failed; the timer will retry");
                    }
                });
            }
        });
    }

    /// Fans the room's events out and posts its due deliveries. `None`: the room has no
    /// endpoint left (and nothing pending is kept for one).
    async fn deliver_room(&self, room: &RoomId) -> Result<Option<DeliveryReport>> {
        let sender = self.hook_sender()?;
        let now = self.time.now();
        let mut report = DeliveryReport::default();
        let mut hooks = self.store.outgoing.outgoing_webhooks(room).await?;
        // An endpoint whose maker lost the right to manage webhooks is run as a disabled one:
        // nothing is posted to it, and what waits for it is abandoned.
        for hook in hooks.iter_mut().filter(|hook| hook.status != EndpointStatus::Disabled) {
            if !self.maker_may_manage_webhooks(room, &hook.created_by).await? {
                hook.status = EndpointStatus::Disabled;
            }
        }
        for event in self.store.outgoing.hook_events(room).await? {
            self.fan_out(room, &hooks, &event, now).await?;
            report.events += 1;
        }
        if hooks.is_empty() {
            return Ok(None);
        }
        let runs = hooks.iter().map(|hook| async move {
            let mut done = DeliveryReport::default();
            self.deliver_to(sender, room, hook, &mut done).await.map(|()| done)
        });
        for done in futures::future::join_all(runs).await {
            report.add(done?);
        }
        Ok(Some(report))
    }

    /// One delivery per endpoint that wants the event, then the event row goes. A crash in
    /// between fans it out again, which finds the deliveries already recorded.
    async fn fan_out(
        &self,
        room: &RoomId,
        hooks: &[OutgoingWebhook],
        event: &HookEventRow,
        now: DateTime<Utc>,
    ) -> Result<()> {
        for hook in hooks.iter().filter(|hook| hook.wants(event.event)) {
            let id = crate::outgoing::delivery_id(&hook.id, event.version, &event.message_id);
            let body = DeliveryBody {
                id: &id,
                kind: event.event,
                created_at: now,
                room_id: room.as_str(),
                message: &event.message,
            };
            let body = serde_json::to_string(&body).map_err(|e| Error::Internal(format!("a delivery: {e}")))?;
            self.store
                .outgoing
                .insert_delivery(room, &new_delivery(&hook.id, event, body, now))
                .await?;
        }
        Ok(self.store.outgoing.clear_hook_event(room, &event.row_key).await?)
    }

    /// Whether `delivery` still says what its message says: a delete (or an erasure) takes
    /// back the text, so the creation or edit of a message deleted since is never posted. Asked
    /// right before each post, so however long the endpoint's backlog, nothing of it is sent.
    async fn still_said(&self, room: &RoomId, delivery: &Delivery) -> Result<bool> {
        if delivery.event == HookEvent::Deleted {
            return Ok(true);
        }
        let Some(key) = MessageKey::parse(&delivery.message_id) else {
            return Ok(false);
        };
        Ok(self
            .store
            .messages
            .message(room, &key)
            .await?
            .is_some_and(|m| m.is_live()))
    }

    /// Posts an endpoint's due deliveries in the order of their changes, up to its first
    /// failure. A disabled endpoint's pending deliveries are abandoned; a deleted one's
    /// dropped.
    ///
    /// Each attempt reads the clock again: a run working through a backlog can take minutes
    /// (each request may take [`crate::adapters::outgoing::REQUEST_TIMEOUT`]), and an attempt
    /// dated at the run's start would carry a signature timestamp receivers refuse (they are
    /// told to allow five minutes) and a claim that lapses while it is still under way, so
    /// that another run posts the same delivery at once.
    async fn deliver_to(
        &self,
        sender: &HookSender,
        room: &RoomId,
        hook: &OutgoingWebhook,
        report: &mut DeliveryReport,
    ) -> Result<()> {
        if hook.status == EndpointStatus::Disabled {
            // A few pages a run (a row another run holds is left for the next one).
            for _ in 0..ABANDONED_PAGES_PER_RUN {
                let pending = self
                    .store
                    .outgoing
                    .pending_deliveries(room, &hook.id, PENDING_PAGE)
                    .await?;
                if pending.is_empty() {
                    break;
                }
                for (mut delivery, etag) in pending {
                    delivery.status = DeliveryStatus::Abandoned;
                    delivery.next_attempt_at = None;
                    self.store.outgoing.finish_delivery(room, &delivery, etag).await?;
                }
            }
            return Ok(());
        }
        let mut pending = self
            .store
            .outgoing
            .pending_deliveries(room, &hook.id, PENDING_PAGE)
            .await?;
        if pending.is_empty() {
            return Ok(());
        }
        // Deleted since the run listed it: a fan-out that raced the delete left these.
        if self.store.outgoing.outgoing_webhook(room, &hook.id).await?.is_none() {
            return Ok(self.store.outgoing.drop_deliveries(room, &hook.id).await?);
        }
        let secret = sender
            .sealer()
            .open(&hook.sealed_secret, &seal_context(room.as_str(), &hook.id))?;
        // A page at a time: a run stops at the first delivery it may not post, so reading a
        // whole backlog (an outage's, up to a day of changes) on every run and every nudge
        // would make an outage cost in its backlog at every change.
        loop {
            for (mut delivery, etag) in pending {
                let now = self.time.now();
                // Later changes wait behind an earlier one that waits for its retry, or that
                // another run is attempting: an endpoint gets its events in order.
                if !delivery.due(now) {
                    return Ok(());
                }
                if !self.still_said(room, &delivery).await? {
                    delivery.status = DeliveryStatus::Abandoned;
                    delivery.next_attempt_at = None;
                    delivery.error = Some("the message was deleted before this was posted".into());
                    delivery.body.clear();
                    self.store.outgoing.finish_delivery(room, &delivery, etag).await?;
                    continue;
                }
                // The claim: of two runs at once, one attempts it, and the other stops here
                // (posting the later ones would overtake the one being attempted).
                delivery.attempts += 1;
                delivery.last_attempt_at = Some(now);
                delivery.claimed_until = Some(now + CLAIM);
                let Some(etag) = self.store.outgoing.replace_pending(room, &delivery, etag).await? else {
                    return Ok(());
                };
                let attempt = sender
                    .deliver(&hook.url, &secret, &delivery.id, delivery.event, &delivery.body, now)
                    .await;
                delivery.claimed_until = None;
                match attempt {
                    Attempt::Delivered(status) => {
                        delivery.status = DeliveryStatus::Delivered;
                        delivery.status_code = Some(status);
                        delivery.error = None;
                        delivery.next_attempt_at = None;
                        self.store.outgoing.finish_delivery(room, &delivery, etag).await?;
                        self.record_attempt(room, hook, &delivery, now, true).await?;
                        report.delivered += 1;
                        if delivery.version % PRUNE_EVERY == 0 {
                            self.store
                                .outgoing
                                .prune_deliveries(room, &hook.id, delivery.version, HISTORY_VERSIONS)
                                .await?;
                        }
                    }
                    Attempt::Failed { status, error } => {
                        delivery.status_code = status;
                        delivery.error = Some(error);
                        delivery.next_attempt_at = Some(now + retry_after(delivery.attempts));
                        self.store.outgoing.replace_pending(room, &delivery, etag).await?;
                        report.failed += 1;
                        if self.record_attempt(room, hook, &delivery, now, false).await? {
                            report.disabled += 1;
                        }
                        return Ok(());
                    }
                }
            }
            // Every delivery read was posted: read again, until none is left. A run that
            // recorded one meanwhile may have stopped behind one of these (it was not due to
            // it while this run held it), so this run is the one to post it — stopping at the
            // end of its page left it for the next run.
            pending = self
                .store
                .outgoing
                .pending_deliveries(room, &hook.id, PENDING_PAGE)
                .await?;
            if pending.is_empty() {
                return Ok(());
            }
        }
    }

    /// Records an attempt's outcome on its endpoint; a failure that completes a day of them
    /// disables it (returns true) and tells its managers.
    async fn record_attempt(
        &self,
        room: &RoomId,
        hook: &OutgoingWebhook,
        delivery: &Delivery,
        now: DateTime<Utc>,
        delivered: bool,
    ) -> Result<bool> {
        let last = LastDelivery {
            delivery_id: delivery.id.clone(),
            at: now,
            status: delivery.status,
            status_code: delivery.status_code,
            error: delivery.error.clone(),
        };
        let mut disabled_now = false;
        let updated = self
            .store
            .outgoing
            .update_outgoing(room, &hook.id, |row| {
                row.last_delivery = Some(last.clone());
                disabled_now = false;
                if delivered {
                    row.failing_since = None;
                } else if row.status == EndpointStatus::Active && row.failed_at(now) {
                    row.status = EndpointStatus::Disabled;
                    row.disabled_at = Some(now);
                    disabled_now = true;
                }
            })
            .await;
        let updated = match updated.map_err(Error::from) {
            Ok(updated) => updated,
            // Deleted meanwhile: nothing to record.
            Err(Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        if disabled_now {
            tracing::warn!(%room, webhook = %hook.id, "an outgoing webhook failed for a day and was disabled");
            self.tell_managers_disabled(room, updated).await;
        }
        Ok(disabled_now)
    }

    async fn tell_managers_disabled(&self, room: &RoomId, hook: OutgoingWebhook) {
        let Ok(creator) = UserId::parse(&hook.created_by) else {
            return;
        };
        let text = format!(
            "An outgoing webhook was disabled: its endpoint failed every delivery for {} hours. Its managers can see it in the room's outgoing webhooks.",
            FAILURE_WINDOW.num_hours()
        );
        let author = Principal {
            user_id: creator.clone(),
            name: "Outgoing webhooks".into(),
        };
        self.announce(room, Submission::line(MessageType::System, &author, &text))
            .await;
        self.signals.notice(
            room,
            &creator,
            Signal::OutgoingWebhookDisabled {
                webhook: Box::new(hook),
            },
        );
    }

    fn hook_sender(&self) -> Result<&HookSender> {
        self.outgoing.as_deref().ok_or_else(|| {
            Error::Unavailable("outgoing webhooks are not configured on this server (no sealing key)".into())
        })
    }

    /// The caller may manage the room's outgoing webhooks (a non-member: 404).
    async fn outgoing_manager(&self, room: &RoomId, who: &Principal) -> Result<()> {
        self.access
            .access(room, &who.user_id)
            .await?
            .require(Permission::ManageWebhooks)
    }
}

/// What a sealed secret is bound to: its room and endpoint.
fn seal_context(room: &str, id: &str) -> String {
    format!("{room}/{id}")
}

/// After a committed change that wrote an event: a delivery run for its room in the
/// background, never in the change's way. The nudge only names the room to
/// [`Sending::deliver_when_nudged`], so the send path, which nudges, does not hold what
/// delivers (which writes through the send path).
pub struct OutgoingNudge {
    store: crate::store::Store,
    /// Where nudged rooms go: none when outgoing webhooks are not configured.
    rooms: Option<tokio::sync::mpsc::UnboundedSender<RoomId>>,
}

impl OutgoingNudge {
    /// A nudge, with the receiving end to hand to [`Sending::deliver_when_nudged`] when
    /// outgoing webhooks are `configured`.
    pub(crate) fn new(
        store: crate::store::Store,
        configured: bool,
    ) -> (OutgoingNudge, Option<tokio::sync::mpsc::UnboundedReceiver<RoomId>>) {
        let (rooms, nudged) = match configured {
            true => {
                let (rooms, nudged) = tokio::sync::mpsc::unbounded_channel();
                (Some(rooms), Some(nudged))
            }
            false => (None, None),
        };
        (OutgoingNudge { store, rooms }, nudged)
    }

    /// Asks for a delivery run of `room` when a change since the last one wrote an event.
    pub(crate) fn nudge(&self, room: &RoomId) {
        if let Some(rooms) = &self.rooms
            && self.store.outgoing.take_nudge(room)
        {
            let _ = rooms.send(room.clone());
        }
    }
}
