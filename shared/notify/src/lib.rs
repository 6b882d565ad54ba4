//! The notification function: for one message event, push a notification to each member who
//! should get one, on every device they subscribed.
//!
//! Recipients are the room's members minus the sender, by their notification level: `All`
//! always, `Mentions` when the message mentions them (directly, through one of their roles, or
//! `@everyone`; `@here` only reaches members who are online, and those are not pushed; every
//! message of a direct conversation mentions the other person, and a reply concerns the
//! followers of its thread as a mention does, mute aside), `Never` never; a muted room
//! only when it mentions them (a mention gets through Mentions-only and a mute,
//! never through Never or do-not-disturb); nobody under their do-not-disturb (a `~dnd` row
//! read with their subscriptions); and never a member with a live connection open (they
//! see the message live). The payload carries ids, the sender's name and a short
//! preview only. Deliveries run with bounded concurrency, each on its own: 404/410 delete the
//! subscription, 429 waits for `Retry-After`, 5xx retries with a bounded backoff, and one
//! failing endpoint never holds up the others.
//!
//! The consumer is idempotent per event id: a `<message key>:n` row in `MessagesMetadata`
//! claims the event (with a lease the run renews while it pushes) and then records it
//! processed, so a redelivered event — even one delivered while the first run is still
//! pushing, however long that takes — pushes nothing again (and the row goes with the message
//! when it is purged). Deliveries that must be answered quickly (Event Grid's webhook waits
//! 30 s) are answered once the event is claimed and recorded pending, and pushed in the
//! background (`Notifier::accept`).

use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use serde::Serialize;
use sha2::{Digest, Sha256};
use web_push::Urgency;

use std::sync::Arc;

use async_trait::async_trait;

use tabletalk_adapters::events::EventSink;
use tabletalk_adapters::live::LiveChannel;
use tabletalk_adapters::push::{Outcome, Push, PushSender};
use tabletalk_adapters::tasks::Supervisor;
use tabletalk_domain::error::{Error, Result};
use tabletalk_domain::events::MessageEvent;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::members::{Member, NotificationLevel};
use tabletalk_domain::messages::mentions::Mentions;
use tabletalk_domain::subscriptions::{MAX_SUBSCRIPTIONS_PER_USER, PushSubscription};
use tabletalk_store::Store;
use tabletalk_store::claims::{ClaimRow, ClaimToken};

/// How long a push service keeps an undelivered notification.
pub const PUSH_TTL_SECONDS: u32 = 4 * 3600;
/// Recipients, and deliveries, in flight at once for one event.
const CONCURRENT_DELIVERIES: usize = 16;
/// Tries at recording an event done once its pushes are made.
const DONE_ATTEMPTS: u32 = 4;
/// Attempts per subscription (429 and 5xx are retried).
const DELIVERY_ATTEMPTS: usize = 4;
/// The longest `Retry-After` honoured within one event; longer, the push is given up.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// The longest one subscription's delivery may take, all its attempts and waits included
/// (the default of `PushSettings::delivery_deadline`): one slow or silent endpoint holds up
/// neither the others nor the event past this.
pub const DELIVERY_DEADLINE: Duration = Duration::from_secs(60);

/// How push is configured for this deployment.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// The sender, when a VAPID key is configured; without one no push is sent.
    pub sender: Option<PushSender>,
    /// Development only: accept `http` and loopback/private endpoints.
    pub allow_private_endpoints: bool,
    /// How long a run's claim on an event holds off other runs unless renewed.
    pub claim_lease: Duration,
    /// The longest one subscription's delivery may take, all its attempts and waits included.
    pub delivery_deadline: Duration,
}

/// The default [`PushSettings::claim_lease`].
pub const CLAIM_LEASE: Duration = Duration::from_secs(180);

impl Default for PushSettings {
    fn default() -> PushSettings {
        PushSettings {
            sender: None,
            allow_private_endpoints: false,
            claim_lease: CLAIM_LEASE,
            delivery_deadline: DELIVERY_DEADLINE,
        }
    }
}

/// The notification consumer, a unit of its own as revolt's pushd is: fed message events —
/// by the in-process event sink, or on Azure by the Event Grid trigger and its webhook — it
/// reads what it needs from the store, asks the live channel who is online, and pushes.
/// Cloning is cheap (handles and `Arc`s).
#[derive(Debug, Clone)]
pub struct Notifier {
    store: Store,
    push: Arc<PushSettings>,
    /// Who is connected: a user with a live connection open is not pushed.
    presence: Option<Arc<dyn LiveChannel>>,
    /// Where an event's fan-out runs once the event is accepted.
    tasks: Supervisor,
}

/// The in-process event sink: an event is accepted once it is processed.
#[async_trait]
impl EventSink for Notifier {
    async fn publish(&self, event: &MessageEvent) -> Result<()> {
        self.notify(event).await.map(|_| ())
    }
}

/// The notification's JSON, as the service worker receives it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a> {
    room_id: &'a str,
    message_id: &'a str,
    sender_name: &'a str,
    preview: &'a str,
    mentioned: bool,
}

/// The pushes one event will make.
#[derive(Default)]
struct Plan {
    recipients: usize,
    online: usize,
    pushes: Vec<(UserId, PushSubscription, Push)>,
}

/// What one event's deliveries came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub recipients: usize,
    pub delivered: usize,
    pub gone: usize,
    pub failed: usize,
    /// Recipients not pushed because they had a live connection open.
    pub online: usize,
    /// True when the event had been processed before and nothing was sent.
    pub repeat: bool,
}

/// Whether `member` is pushed for a message with `mentions`, and whether it mentions them (a
/// message in a `direct` conversation always does).
fn wants(member: &Member, mentions: &Mentions, direct: bool, following: bool) -> Option<bool> {
    let mentioned = direct
        || mentions.everyone
        || mentions.users.iter().any(|u| u == member.user_id.as_str())
        || mentions.roles.iter().any(|r| member.roles.contains(r));
    // A mention gets through Mentions-only and through a mute; nothing gets through Never
    // (nor the user's do-not-disturb, checked with their subscriptions).
    // A reply in a thread they follow concerns a follower as a mention would, but it does
    // not get through a mute.
    let pushed = match member.notifications {
        NotificationLevel::All => !member.muted || mentioned,
        NotificationLevel::Mentions => mentioned || (following && !member.muted),
        NotificationLevel::Never => false,
    };
    pushed.then_some(mentioned)
}

/// A room's notifications share one topic, so a device that was offline gets the latest.
fn topic(room: &str) -> String {
    let digest = Sha256::digest(room.as_bytes());
    let mut topic = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    topic.truncate(32);
    topic
}

/// How an event's notification stands, as the outbox timer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationState {
    /// No run holds it (none began, or one died and its lease lapsed).
    Unclaimed,
    /// A run holds it and is alive (its lease is fresh).
    Claimed,
    /// Processed.
    Done,
}

/// How an event's claim stands.
enum Claim {
    /// This run holds it.
    Ours(ClaimToken),
    /// Processed before: nothing to do.
    Done,
    /// Another run holds it right now.
    Busy,
}

/// A run that holds an event's claim and has read everything it will push.
struct Run {
    room: RoomId,
    key: MessageKey,
    /// The claim, renewed as the run goes.
    etag: ClaimToken,
    plan: Plan,
}

/// How a run began.
enum Start {
    /// Processed before: nothing to do.
    Repeat,
    /// Nobody to push to: nothing to claim, nothing to record.
    Nothing(Report),
    Run(Run),
}

/// How a delivery of an event stood when [`Notifier::accept`] answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Nothing was left to push, or it had been processed before.
    Finished(Report),
    /// Claimed and recorded; this many pushes to this many recipients go on in the background.
    Pushing { recipients: usize, pushes: usize },
}

impl Notifier {
    pub fn new(
        store: Store,
        push: Arc<PushSettings>,
        presence: Option<Arc<dyn LiveChannel>>,
        tasks: Supervisor,
    ) -> Notifier {
        Notifier {
            store,
            push,
            presence,
            tasks,
        }
    }

    pub fn settings(&self) -> &PushSettings {
        &self.push
    }

    /// Whether `user` has a live connection open; when that cannot be told, false (better a
    /// push too many than a message missed).
    async fn online(&self, user: &str) -> bool {
        let Some(presence) = &self.presence else {
            return false;
        };
        presence.user_connected(user).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not tell whether a user is online");
            false
        })
    }

    /// Processes one message event, once per event id however often and however concurrently
    /// it is delivered, and returns when every push has been tried. The event is only a
    /// pointer: the message is read back from the store, so a forged or stale event can push
    /// nothing the room does not hold, and a message deleted meanwhile pushes nothing.
    ///
    /// A run first claims the event (its marker row, with a lease), reads every recipient's
    /// subscriptions, and only then pushes; a failure before the first push releases the
    /// claim, so a retry starts clean. While it pushes it renews the lease, so however long
    /// the fan-out takes no other delivery of the event takes it over; each push is bounded
    /// by the delivery deadline. An event whose claim another run holds answers
    /// `Unavailable`, so its delivery is retried later and finds it done.
    pub async fn notify(&self, event: &MessageEvent) -> Result<Report> {
        let Some(sender) = self.push.sender.clone() else {
            return Ok(Report::default());
        };
        match self.start(event).await? {
            Start::Repeat => Ok(Report {
                repeat: true,
                ..Report::default()
            }),
            Start::Nothing(report) => Ok(report),
            Start::Run(run) => self.fan_out(&sender, run).await,
        }
    }

    /// [`Notifier::notify`] for a delivery that must be answered before a slow fan-out ends —
    /// Event Grid waits 30 s for its webhook, then redelivers. It answers once the event is
    /// claimed, every recipient's subscriptions are read, and the event is recorded pending
    /// in the outbox (`outbox:<message id>:fanout`, the service's `outbox`); the pushes go on in
    /// the background, renewing the claim, and clear that row when they are done.
    ///
    /// Why the outbox, and not just the claim: once this answers, Event Grid holds the event
    /// delivered, so a background run that dies (the process recycled mid-fan-out) would lose
    /// it, and releasing the claim would invite no retry. The pending row is what the outbox
    /// timer already republishes; it leaves one whose claim is still held alone, so a live
    /// run is never raced, and republishes it once a dead run's lease has lapsed — then the
    /// redelivery takes the claim over. Until the answer, a failure is reported as usual
    /// (the claim released), and the delivery is retried.
    pub async fn accept(&self, event: &MessageEvent) -> Result<Accepted> {
        let Some(sender) = self.push.sender.clone() else {
            return Ok(Accepted::Finished(Report::default()));
        };
        let run = match self.start(event).await? {
            Start::Repeat => {
                return Ok(Accepted::Finished(Report {
                    repeat: true,
                    ..Report::default()
                }));
            }
            Start::Nothing(report) => return Ok(Accepted::Finished(report)),
            Start::Run(run) => run,
        };
        let pending = match self.store.outbox.record_fan_out(&run.room, event).await {
            Ok(pending) => pending,
            Err(e) => {
                self.release(&run).await;
                return Err(e.into());
            }
        };
        let accepted = Accepted::Pushing {
            recipients: run.plan.recipients,
            pushes: run.plan.pushes.len(),
        };
        let (notifier, id) = (self.clone(), event.id.clone());
        self.tasks.spawn(async move {
            let room = run.room.clone();
            match notifier.fan_out(&sender, run).await {
                Ok(report) => {
                    tracing::info!(event = %id, ?report, "an event's pushes are done");
                    notifier.store.outbox.clear_fan_out(&room, pending).await;
                }
                // The pending row stays: the outbox timer republishes the event once no run
                // holds its claim.
                Err(e) => tracing::warn!(event = %id, error = %e, "an event's fan-out failed; it waits in the outbox"),
            }
        });
        Ok(accepted)
    }

    /// Reads what the event will push and, when there is something, claims the event. An
    /// event with nobody to push to writes nothing — no claim, no record that it is done: a
    /// later delivery plans again and, at most, pushes to a subscription made since. So a
    /// send in a room without push subscribers costs the store no write after its own.
    async fn start(&self, event: &MessageEvent) -> Result<Start> {
        let room = RoomId::parse(&event.room_id)?;
        let key =
            MessageKey::parse(&event.message_id).ok_or_else(|| Error::validation("the event names no message"))?;
        let row = self.store.claims.claim_row(&room, &key).await?;
        if let ClaimRow::Done = row {
            return Ok(Start::Repeat);
        }
        let plan = self.plan(&room, &key).await?;
        if plan.pushes.is_empty() {
            return Ok(Start::Nothing(Report {
                recipients: plan.recipients,
                online: plan.online,
                ..Report::default()
            }));
        }
        let etag = match self.claim(&room, &key, row).await? {
            Claim::Ours(etag) => etag,
            Claim::Done => return Ok(Start::Repeat),
            Claim::Busy => return Err(Error::Unavailable("the event is being processed".into())),
        };
        Ok(Start::Run(Run { room, key, etag, plan }))
    }

    /// Gives a run's claim up, so that a retry starts clean.
    async fn release(&self, run: &Run) {
        if let Err(release) = self.store.claims.release_claim(&run.room, &run.key, &run.etag).await {
            tracing::warn!(error = %release, "an event's claim was not released; its lease will expire");
        }
    }

    /// Pushes everything `run` planned, each push bounded by the delivery deadline, renewing
    /// the claim every third of its lease, then records the event done. A renewal that finds
    /// the claim taken over (it could not be renewed in time) stops the pushes not yet made.
    async fn fan_out(&self, sender: &PushSender, run: Run) -> Result<Report> {
        let Run {
            room,
            key,
            mut etag,
            plan,
        } = run;
        let mut report = Report {
            recipients: plan.recipients,
            online: plan.online,
            ..Report::default()
        };
        let deliveries = futures::stream::iter(plan.pushes)
            .map(|(user, subscription, push)| self.deliver_in_time(sender, user, subscription, push))
            .buffer_unordered(CONCURRENT_DELIVERIES)
            .collect::<Vec<Outcome>>();
        tokio::pin!(deliveries);
        let renew_every = self.push.claim_lease / 3;
        let outcomes = loop {
            tokio::select! {
                outcomes = &mut deliveries => break outcomes,
                () = tokio::time::sleep(renew_every) => match self.store.claims.reclaim(&room, &key, &etag, self.store.now()).await {
                    Ok(Some(renewed)) => etag = renewed,
                    Ok(None) => {
                        return Err(Error::Unavailable("the event's claim was taken over; its pushes stopped".into()));
                    }
                    // The lease still holds for a while: try again next time.
                    Err(e) => tracing::warn!(error = %e, "an event's claim was not renewed"),
                },
            }
        };
        for outcome in outcomes {
            match outcome {
                Outcome::Delivered => report.delivered += 1,
                Outcome::Gone => report.gone += 1,
                Outcome::RetryAfter(_) | Outcome::Failed(_) => report.failed += 1,
            }
        }
        // Every recipient has been pushed: failing to record that would push them all again
        // once the lease lapses, so a passing store error is given a few more tries. (A lost
        // claim means another run took over, and it records the event itself — or an earlier
        // try of ours landed after all.)
        for attempt in 1..=DONE_ATTEMPTS {
            match self.store.claims.record_done(&room, &key, &etag).await {
                Ok(_) => break,
                Err(e) if attempt < DONE_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "an event's pushes are done but not yet recorded; trying again");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(report)
    }

    /// How the notification of the message `message_id` in `room` stands, for the outbox
    /// timer: it leaves an event alone while a run holds its claim.
    pub async fn state(&self, room: &RoomId, message_id: &str) -> Result<NotificationState> {
        let Some(key) = MessageKey::parse(message_id) else {
            return Ok(NotificationState::Unclaimed);
        };
        let lease = chrono::Duration::from_std(self.push.claim_lease).unwrap_or(chrono::Duration::MAX);
        Ok(match self.store.claims.claim_row(room, &key).await? {
            ClaimRow::Missing => NotificationState::Unclaimed,
            ClaimRow::Done => NotificationState::Done,
            ClaimRow::Claimed { at, .. } if at.is_some_and(|at| self.store.now() - at < lease) => {
                NotificationState::Claimed
            }
            ClaimRow::Claimed { .. } => NotificationState::Unclaimed,
        })
    }

    /// Claims the event of `key`, whose claim row read `row`: a new claim, or one whose lease
    /// ran out, is ours.
    async fn claim(&self, room: &RoomId, key: &MessageKey, row: ClaimRow) -> Result<Claim> {
        let now = self.store.now();
        let lease = chrono::Duration::from_std(self.push.claim_lease).unwrap_or(chrono::Duration::MAX);
        Ok(match row {
            ClaimRow::Missing => match self.store.claims.insert_claim(room, key, now).await? {
                Some(etag) => Claim::Ours(etag),
                None => Claim::Busy,
            },
            ClaimRow::Done => Claim::Done,
            ClaimRow::Claimed { at, token: Some(token) } if !at.is_some_and(|at| now - at < lease) => {
                match self.store.claims.reclaim(room, key, &token, now).await? {
                    Some(etag) => Claim::Ours(etag),
                    None => Claim::Busy,
                }
            }
            ClaimRow::Claimed { .. } => Claim::Busy,
        })
    }

    /// Everything a run will push, read before the first push: the recipients (members −
    /// sender, by their levels, not online) and each one's subscriptions.
    async fn plan(&self, room: &RoomId, key: &MessageKey) -> Result<Plan> {
        let mut plan = Plan::default();
        let stored = self.store.messages.message(room, key).await?.filter(|m| m.is_live());
        let Some(event) = stored.as_ref().and_then(MessageEvent::of) else {
            return Ok(plan);
        };
        // A member row that cannot be read costs that member their push, not everyone theirs.
        let followers = async {
            match stored.as_ref().and_then(|m| m.thread_id.as_deref()) {
                Some(root) => {
                    self.store
                        .follows
                        .followers(room, root, tabletalk_domain::members::MAX_LISTED_MEMBERS)
                        .await
                }
                None => Ok(Vec::new()),
            }
        };
        let (members, direct, followers) = tokio::try_join!(
            self.store
                .members
                .members(room, tabletalk_domain::members::MAX_LISTED_MEMBERS, false),
            self.store.rooms.room(room),
            followers,
        )?;
        // In a direct conversation every message is addressed to the other person.
        let direct = direct.is_some_and(|room| room.direct);
        let recipients: Vec<(UserId, bool)> = members
            .into_iter()
            .filter(|member| member.user_id.as_str() != event.sender_id)
            .filter_map(|member| {
                let following = followers.contains(&member.user_id);
                wants(&member, &event.mentions, direct, following).map(|mentioned| (member.user_id, mentioned))
            })
            .collect();
        plan.recipients = recipients.len();
        let reached: Vec<Result<Option<(UserId, bool, Vec<PushSubscription>)>>> = futures::stream::iter(recipients)
            .map(|(user, mentioned)| async move {
                if self.online(user.as_str()).await {
                    return Ok(None);
                }
                let (subscriptions, dnd) = self
                    .store
                    .subscriptions
                    .push_targets(&user, MAX_SUBSCRIPTIONS_PER_USER)
                    .await?;
                // Under do-not-disturb, nothing is pushed, mentions included.
                let subscriptions = match dnd.holds_at(self.store.now()) {
                    true => Vec::new(),
                    false => subscriptions,
                };
                Ok(Some((user, mentioned, subscriptions)))
            })
            .buffer_unordered(CONCURRENT_DELIVERIES)
            .collect()
            .await;
        for recipient in reached {
            let Some((user, mentioned, subscriptions)) = recipient? else {
                plan.online += 1;
                continue;
            };
            let payload = Payload {
                room_id: &event.room_id,
                message_id: &event.message_id,
                sender_name: &event.sender_name,
                preview: &event.preview,
                mentioned,
            };
            let push = Push {
                payload: serde_json::to_vec(&payload).map_err(|e| Error::Internal(e.to_string()))?,
                ttl: PUSH_TTL_SECONDS,
                urgency: if mentioned { Urgency::High } else { Urgency::Normal },
                topic: Some(topic(&event.room_id)),
            };
            for subscription in subscriptions {
                plan.pushes.push((user.clone(), subscription, push.clone()));
            }
        }
        Ok(plan)
    }

    /// [`Notifier::deliver`] within the delivery deadline; past it, the push is given up.
    pub async fn deliver_in_time(
        &self,
        sender: &PushSender,
        user: UserId,
        subscription: PushSubscription,
        push: Push,
    ) -> Outcome {
        let deadline = self.push.delivery_deadline;
        match tokio::time::timeout(deadline, self.deliver(sender, user.clone(), subscription, push)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::info!(%user, ?deadline, "a push was given up at the delivery deadline");
                Outcome::Failed(format!("not delivered within {deadline:?}"))
            }
        }
    }

    /// Delivers one push to one subscription, retrying 429 and 5xx a bounded number of times;
    /// a gone subscription is deleted.
    async fn deliver(&self, sender: &PushSender, user: UserId, subscription: PushSubscription, push: Push) -> Outcome {
        let mut outcome = Outcome::Failed("not attempted".into());
        for attempt in 0..DELIVERY_ATTEMPTS {
            outcome = sender.send(&subscription, &push).await;
            match &outcome {
                Outcome::RetryAfter(wait) if *wait <= MAX_RETRY_WAIT && attempt + 1 < DELIVERY_ATTEMPTS => {
                    let backoff = Duration::from_millis(100 << attempt);
                    tokio::time::sleep((*wait).max(backoff)).await;
                }
                Outcome::Gone => {
                    if let Err(e) = self
                        .store
                        .subscriptions
                        .delete_subscription(&user, &subscription.endpoint)
                        .await
                    {
                        tracing::warn!(error = %e, "could not delete a gone push subscription");
                    }
                    break;
                }
                _ => break,
            }
        }
        if matches!(outcome, Outcome::Failed(_) | Outcome::RetryAfter(_)) {
            tracing::info!(%user, ?outcome, "a push was not delivered");
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tabletalk_domain::events::PREVIEW_CHARS;
    use tabletalk_domain::messages::{Message, MessageType};

    #[test]
    fn server_lines_do_not_notify_and_previews_are_short_text() {
        let now = chrono::Utc::now();
        let mut message = Message {
            id: "2516062669865313804".into(),
            room_id: "r".into(),
            kind: MessageType::Message,
            author_id: "a".into(),
            author_name: "A".into(),
            origin: Default::default(),
            avatar_url: None,
            text: format!("<p>{}</p>", "word ".repeat(100)),
            source: None,
            created_at: now,
            version: 1,
            client_id: None,
            edited_at: None,
            deleted_at: None,
            deleted_by: None,
            moderated: false,
            is_pinned: false,
            reply_to: None,
            thread_id: None,
            pinned_message_id: None,
            forwarded_from: None,
            mentions: Mentions::default(),
            poll: None,
            reactions: Vec::new(),
            attachments: Vec::new(),
            thread: None,
            preview: None,
        };
        let event = MessageEvent::of(&message).unwrap();
        assert_eq!(event.preview.chars().count(), PREVIEW_CHARS);
        assert!(!event.preview.contains('<'));
        assert_eq!(event.id, "r/2516062669865313804");
        message.kind = MessageType::System;
        assert!(MessageEvent::of(&message).is_none());
    }
}
