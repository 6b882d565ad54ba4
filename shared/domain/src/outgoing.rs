//! Outgoing webhooks: HTTPS endpoints a room's managers (ManageWebhooks) register for the
//! room's message events — created, edited, deleted. Each event is delivered to each endpoint
//! as one [`Delivery`], signed with the endpoint's secret, retried with [`retry_after`]'s
//! backoff until it lands, and the endpoint is disabled once it has failed for a whole
//! [`FAILURE_WINDOW`] (docs/OUTGOING_WEBHOOKS.md has the receiver's side).
//!
//! HTTP cannot deliver exactly once: an answer lost after the receiver acted makes a retry.
//! Every attempt of one delivery therefore carries the same id ([`DELIVERY_HEADER`], also the
//! body's `id`), and a receiver that keeps the ids it has handled sees each event once.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::messages::{Message, MessageType};

/// Endpoints one room may have.
pub const MAX_OUTGOING_PER_ROOM: usize = 10;
/// The longest endpoint URL accepted.
pub const MAX_URL_CHARS: usize = 2000;
/// An endpoint failing without a success for this long is disabled.
pub const FAILURE_WINDOW: Duration = Duration::hours(24);
/// The first retry waits this long; each further one twice as long, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::seconds(30);
pub const MAX_BACKOFF: Duration = Duration::hours(1);
/// How long a process holds a delivery it is attempting before another may take it over.
pub const CLAIM: Duration = Duration::seconds(60);
/// The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub const SIGNATURE_HEADER: &str = "X-Tabletalk-Signature";
/// The delivery's id, the same on every attempt: what a receiver dedupes by.
pub const DELIVERY_HEADER: &str = "X-Tabletalk-Delivery";
/// The event's type (`message.created`, `message.edited`, `message.deleted`).
pub const EVENT_HEADER: &str = "X-Tabletalk-Event";
/// What a secret starts with, so one found lying around is recognised.
pub const SECRET_PREFIX: &str = "whsec_";

/// A message event an endpoint may receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum HookEvent {
    #[serde(rename = "message.created")]
    Created,
    #[serde(rename = "message.edited")]
    Edited,
    #[serde(rename = "message.deleted")]
    Deleted,
}

impl HookEvent {
    pub const ALL: [HookEvent; 3] = [HookEvent::Created, HookEvent::Edited, HookEvent::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::Created => "message.created",
            HookEvent::Edited => "message.edited",
            HookEvent::Deleted => "message.deleted",
        }
    }

    pub fn parse(text: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == text)
    }

    /// The event a change of `message` to its current state is, if it has events at all: a
    /// person's messages and polls. The server's own lines have none, and neither have the
    /// messages of webhooks and automations, so a receiver that answers by posting through a
    /// webhook can never loop (as Slack sends bots' messages to no outgoing webhook).
    pub fn of_change(message: &Message, created: bool) -> Option<HookEvent> {
        if !message.origin.triggers_automations() {
            return None;
        }
        match message.kind {
            MessageType::Message | MessageType::Poll | MessageType::Webhook => {}
            MessageType::Call | MessageType::EditRoom | MessageType::PinMessage | MessageType::System => {
                return None;
            }
        }
        Some(match (created, message.deleted_at.is_some()) {
            (true, _) => HookEvent::Created,
            (false, true) => HookEvent::Deleted,
            (false, false) => HookEvent::Edited,
        })
    }
}

/// Whether an endpoint is still called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointStatus {
    Active,
    /// Failed for a whole [`FAILURE_WINDOW`]; its pending deliveries were abandoned.
    Disabled,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet: waiting for its next attempt.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Its endpoint was disabled (or deleted) before it was delivered.
    Abandoned,
}

/// How an endpoint's newest attempt went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastDelivery {
    pub delivery_id: String,
    pub at: DateTime<Utc>,
    /// `delivered`, or `pending` for a failed attempt that will be retried.
    pub status: DeliveryStatus,
    /// The endpoint's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// Why the attempt failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An endpoint as its managers see it. The secret is never part of it.
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingWebhook {
    pub id: String,
    pub room_id: String,
    pub url: String,
    pub events: Vec<HookEvent>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub status: EndpointStatus,
    /// Since when every attempt failed (none after a success).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery: Option<LastDelivery>,
    /// The secret, sealed with the server's key (never shown, never logged).
    #[serde(skip)]
    pub sealed_secret: String,
}

impl std::fmt::Debug for OutgoingWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutgoingWebhook")
            .field("id", &self.id)
            .field("room_id", &self.room_id)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("status", &self.status)
            .field("failing_since", &self.failing_since)
            .field("disabled_at", &self.disabled_at)
            .field("last_delivery", &self.last_delivery)
            .finish_non_exhaustive()
    }
}

impl OutgoingWebhook {
    pub fn wants(&self, event: HookEvent) -> bool {
        self.status == EndpointStatus::Active && self.events.contains(&event)
    }

    /// After a failed attempt at `now`: whether the endpoint has now failed for the whole
    /// window (and is to be disabled).
    pub fn failed_at(&mut self, now: DateTime<Utc>) -> bool {
        let since = *self.failing_since.get_or_insert(now);
        now - since >= FAILURE_WINDOW
    }
}

/// An endpoint as created: its signing secret, shown this once (and never in `Debug`).
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingWebhookWithSecret {
    #[serde(flatten)]
    pub webhook: OutgoingWebhook,
    /// `whsec_` and 43 base64url characters: the HMAC key of [`SIGNATURE_HEADER`].
    pub secret: String,
}

impl std::fmt::Debug for OutgoingWebhookWithSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutgoingWebhookWithSecret")
            .field("webhook", &self.webhook)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// `POST /api/rooms/{roomId}/outgoing-webhooks`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewOutgoingWebhook {
    /// An `https` URL with a public host (no credentials in it).
    #[schema(min_length = 1, max_length = 2000, pattern = r"^\s*https?://\S+\s*$")]
    pub url: String,
    /// The events to receive; all three when left out.
    #[serde(default)]
    pub events: Option<Vec<HookEvent>>,
}

impl NewOutgoingWebhook {
    /// The URL (its syntax and reach are the outbound client's to check) and the events, each
    /// once, in their canonical order.
    pub fn checked(&self) -> Result<(String, Vec<HookEvent>)> {
        let url = self.url.trim();
        if url.is_empty() {
            return Err(Error::validation("url is empty"));
        }
        if url.chars().count() > MAX_URL_CHARS {
            return Err(Error::validation(format!(
                "url is longer than {MAX_URL_CHARS} characters"
            )));
        }
        let events = match &self.events {
            None => HookEvent::ALL.to_vec(),
            Some(list) if list.is_empty() => {
                return Err(Error::validation("events is empty: name at least one, or leave it out"));
            }
            Some(list) => HookEvent::ALL.into_iter().filter(|e| list.contains(e)).collect(),
        };
        Ok((url.to_owned(), events))
    }
}

/// One event for one endpoint, with every attempt's outcome.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The same on every attempt ([`DELIVERY_HEADER`]).
    pub id: String,
    pub webhook_id: String,
    pub event: HookEvent,
    pub message_id: String,
    /// The room's version of the change.
    pub version: u64,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When a pending delivery is tried next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The JSON body sent on every attempt.
    #[serde(skip)]
    pub body: String,
    /// Until when a process attempting it holds it.
    #[serde(skip)]
    pub claimed_until: Option<DateTime<Utc>>,
}

impl Delivery {
    /// Whether a run at `now` may attempt it.
    pub fn due(&self, now: DateTime<Utc>) -> bool {
        self.status == DeliveryStatus::Pending
            && self.next_attempt_at.is_none_or(|at| at <= now)
            && self.claimed_until.is_none_or(|until| until <= now)
    }
}

/// The body of a delivery: `{id, type, createdAt, roomId, message}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryBody<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: HookEvent,
    pub created_at: DateTime<Utc>,
    pub room_id: &'a str,
    /// The message as clients see it after the change (a tombstone for a delete).
    pub message: &'a serde_json::Value,
}

/// The wait before the attempt after the `attempts`-th failed one: 30 s, 1 min, 2 min, … up
/// to an hour, so an outage of minutes costs a few attempts and a day's costs about thirty.
pub fn retry_after(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    let wait = FIRST_BACKOFF * 2i32.pow(doublings);
    wait.min(MAX_BACKOFF)
}

/// A delivery id: the endpoint's id and the change's version and message, so fanning an event
/// out again (after a crash) names the same delivery.
pub fn delivery_id(webhook_id: &str, version: u64, message_id: &str) -> String {
    format!("{webhook_id}.{version:020}.{message_id}")
}

/// An endpoint id names nothing when it is not 32 lowercase hex digits (answered 404).
pub fn check_id(id: &str) -> Result<()> {
    match id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        true => Ok(()),
        false => Err(missing()),
    }
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub fn missing() -> Error {
    Error::not_found("outgoing webhook not found")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Origin;

    #[test]
    fn only_a_persons_messages_make_outgoing_events() {
        let mut message = crate::messages::sample("0000000000000000001", "<p>hi</p>");
        assert_eq!(HookEvent::of_change(&message, true), Some(HookEvent::Created));
        assert_eq!(HookEvent::of_change(&message, false), Some(HookEvent::Edited));
        for origin in [Origin::Webhook, Origin::Automation, Origin::Server] {
            message.origin = origin;
            message.kind = MessageType::Webhook;
            assert_eq!(HookEvent::of_change(&message, true), None, "{origin:?}");
            assert_eq!(HookEvent::of_change(&message, false), None, "{origin:?}");
        }
    }

    #[test]
    fn retries_back_off_from_half_a_minute_to_an_hour() {
        assert_eq!(retry_after(1), Duration::seconds(30));
        assert_eq!(retry_after(2), Duration::seconds(60));
        assert_eq!(retry_after(4), Duration::seconds(240));
        assert_eq!(retry_after(8), Duration::hours(1));
        assert_eq!(retry_after(u32::MAX), Duration::hours(1));
    }

    #[test]
    fn an_endpoint_is_disabled_only_after_a_whole_window_of_failures() {
        let start = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut hook = OutgoingWebhook {
            id: new_id(),
            room_id: "r".into(),
            url: "https://example.com".into(),
            events: HookEvent::ALL.to_vec(),
            created_by: "u".into(),
            created_at: start,
            status: EndpointStatus::Active,
            failing_since: None,
            disabled_at: None,
            last_delivery: None,
            sealed_secret: String::new(),
        };
        assert!(!hook.failed_at(start));
        assert!(!hook.failed_at(start + FAILURE_WINDOW - Duration::seconds(1)));
        assert!(hook.failed_at(start + FAILURE_WINDOW));
    }

    #[test]
    fn a_secret_never_shows_in_debug_output() {
        let created = OutgoingWebhookWithSecret {
            webhook: OutgoingWebhook {
                id: new_id(),
                room_id: "r".into(),
                url: "https://example.com".into(),
                events: HookEvent::ALL.to_vec(),
                created_by: "u".into(),
                created_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
                status: EndpointStatus::Active,
                failing_since: None,
                disabled_at: None,
                last_delivery: None,
                sealed_secret: "sealed-bytes".into(),
            },
            secret: "whsec_do-not-print".into(),
        };
        let printed = format!("{created:?}");
        assert!(
            !printed.contains("whsec_do-not-print") && !printed.contains("sealed-bytes"),
            "{printed}"
        );
    }
}
