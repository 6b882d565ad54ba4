//! Scheduled messages: a member's text or poll, with attachments or not, to be sent at a time
//! they chose, through the one door as if they sent it then (every check runs again at that
//! time). What an item is,
//! its states, and the rules a request must meet. Storing and claiming them is
//! `tabletalk::store::scheduled`; sending them is `tabletalk::service::scheduled`.
//!
//! # Exactly once
//!
//! An item's send carries the client id [`Scheduled::client_id`], so the send path's
//! idempotency record (committed in the same transaction as the message) makes a second send
//! of the same item return the first message instead of storing another: two processes, a
//! timer that fires twice, or a retry after a crash between the send and recording it all meet
//! that one record. The claim (a conditional write of `Sending` on the item) only keeps a
//! second sender from trying while the first is at it; a claim older than [`CLAIM_LEASE`] is
//! the mark of a sender that stopped, and is taken over.
//!
//! # Attachments
//!
//! The uploads an item names are checked when it is scheduled, as a send checks them, and
//! claimed with the claim its send will make ([`Scheduled::client_id`] is the send's client
//! id, and a send's claim is made of it): no other message can take them meanwhile, and
//! housekeeping leaves them, since they are attached. At its time the send checks and claims
//! them again, through the one door; its own claim is no obstacle. An item cancelled or
//! refused gives them back to its owner.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::html;
use crate::ids::ClientId;
use crate::messages::MessageType;
use crate::messages::polls::NewPoll;
use crate::messages::send::{NewMessage, checked_text};

/// How long a claim protects a send in progress; after it, another run takes the item over.
pub const CLAIM_LEASE: Duration = Duration::seconds(60);
/// How far ahead a message may be scheduled.
pub const MAX_AHEAD: Duration = Duration::days(366);
/// Pending items one member may have in one room.
pub const MAX_PENDING_PER_MEMBER: usize = 100;
/// Items one member may keep in one room, pending or finished (finished ones stay for
/// [`FINISHED_KEPT`]): so one listing holds them all and counts the pending ones exactly, and
/// scheduling and cancelling in a loop stores no more.
pub const MAX_KEPT_PER_MEMBER: usize = 200;
/// How long a finished item (sent, refused, cancelled) stays listed before housekeeping
/// removes it.
pub const FINISHED_KEPT: Duration = Duration::days(7);
/// Attempts that failed for the server's reasons (the store unavailable) before an item is
/// refused rather than tried again.
pub const MAX_ATTEMPTS: u32 = 5;

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ScheduledStatus {
    /// Waiting for its time; its owner may edit or cancel it.
    Scheduled,
    /// Claimed by a sender at `claimedAt`.
    Sending,
    /// Sent: `messageId` is the message.
    Sent,
    /// A check refused it at its time: `refusal` says why.
    Refused,
    Cancelled,
}

impl ScheduledStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduledStatus::Scheduled => "scheduled",
            ScheduledStatus::Sending => "sending",
            ScheduledStatus::Sent => "sent",
            ScheduledStatus::Refused => "refused",
            ScheduledStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<ScheduledStatus> {
        [
            ScheduledStatus::Scheduled,
            ScheduledStatus::Sending,
            ScheduledStatus::Sent,
            ScheduledStatus::Refused,
            ScheduledStatus::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// True while the item may still be sent.
    pub fn is_pending(self) -> bool {
        matches!(self, ScheduledStatus::Scheduled | ScheduledStatus::Sending)
    }
}

/// Why a check refused an item at its time: the error's stable code and message, as the send
/// would have answered the member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Refusal {
    pub code: String,
    pub message: String,
}

/// A scheduled message.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scheduled {
    pub id: String,
    pub room_id: String,
    pub user_id: String,
    /// The name the member had when scheduling it: the sender's name if they have no nickname.
    pub user_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll: Option<NewPoll>,
    /// The upload ids it carries, claimed for it since it was scheduled.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub attachments: Vec<String>,
    pub send_at: DateTime<Utc>,
    pub status: ScheduledStatus,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<DateTime<Utc>>,
    /// Sends tried: a claim counts one.
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// When it was sent, refused or cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

impl Scheduled {
    /// The client id its send carries: the same for every attempt (see the module comment).
    pub fn client_id(&self) -> ClientId {
        ClientId::parse(&format!("sched.{}", self.id)).expect("an item id is 32 hex digits")
    }

    /// The send, as the member would make it.
    pub fn message(&self) -> NewMessage {
        NewMessage {
            kind: Some(match self.poll {
                Some(_) => MessageType::Poll,
                None => MessageType::Message,
            }),
            text: self.text.clone(),
            format: None,
            poll: self.poll.clone(),
            client_id: Some(self.client_id().as_str().to_owned()),
            reply_to: None,
            attachments: (!self.attachments.is_empty()).then(|| self.attachments.clone()),
        }
    }

    /// True when a sender may claim it at `now`: due, and waiting or abandoned by a sender.
    pub fn claimable(&self, now: DateTime<Utc>) -> bool {
        self.send_at <= now
            && match self.status {
                ScheduledStatus::Scheduled => true,
                ScheduledStatus::Sending => self.claimed_at.is_none_or(|at| now - at >= CLAIM_LEASE),
                _ => false,
            }
    }

    /// A 409 unless its owner may still change it.
    pub fn require_changeable(&self) -> Result<()> {
        match self.status {
            ScheduledStatus::Scheduled => Ok(()),
            other => Err(Error::Conflict(format!(
                "the scheduled message is {}; only a scheduled one can be changed",
                other.as_str()
            ))),
        }
    }
}

/// `POST /api/rooms/{roomId}/scheduled`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewScheduled {
    /// HTML, sanitized; a `Message`. Exactly one of `text` and `poll`.
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub poll: Option<NewPoll>,
    /// Upload ids (`createUpload`), at most 10, as a send names them: each must be uploaded
    /// already, by the caller, in this room, and on no other message or scheduled message.
    /// They are checked now and again when it is sent, and held for it until then.
    #[serde(default)]
    pub attachments: Option<Vec<String>>,
    /// When to send it: in the future, at most 366 days ahead.
    pub send_at: DateTime<Utc>,
}

/// `PATCH /api/rooms/{roomId}/scheduled/{scheduledId}`: what changes. A new `text` replaces a
/// poll and a new `poll` a text. The attachments stay as scheduled (cancel and schedule again
/// to change them).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduledEdit {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub poll: Option<NewPoll>,
    #[serde(default)]
    pub send_at: Option<DateTime<Utc>>,
}

/// A body checked at scheduling time: sanitized text or a valid poll. (Everything that
/// depends on the room and the member is checked again when it is sent.)
pub fn checked_body(text: Option<&str>, poll: Option<&NewPoll>) -> Result<(Option<String>, Option<NewPoll>)> {
    match (text, poll) {
        (Some(text), None) => Ok((Some(checked_text(&html::sanitize(text))?), None)),
        (None, Some(poll)) => {
            poll.validate()?;
            Ok((None, Some(poll.clone())))
        }
        _ => Err(Error::validation(
            "a scheduled message carries exactly one of `text` and `poll`",
        )),
    }
}

/// A 404 unless `id` is shaped like an item id (32 lower-case hex digits), so no other text
/// reaches a row key.
pub fn check_id(id: &str) -> Result<()> {
    match id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        true => Ok(()),
        false => Err(Error::not_found("scheduled message not found")),
    }
}

/// A 422 unless `send_at` is after `now` and at most [`MAX_AHEAD`] later.
pub fn checked_send_at(send_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    if send_at <= now || send_at - now > MAX_AHEAD {
        return Err(Error::validation(
            "`sendAt` must be in the future, at most 366 days ahead",
        ));
    }
    Ok(send_at)
}

/// True when `error` is a check's answer (the member's doing, or the room's), which refuses
/// the item; false for the server's trouble (the store unavailable, a race), which is tried
/// again.
pub fn refuses(error: &Error) -> bool {
    !matches!(
        error,
        Error::Unavailable(_) | Error::Unconfirmed | Error::Internal(_) | Error::Conflict(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(status: ScheduledStatus, send_at: DateTime<Utc>, claimed_at: Option<DateTime<Utc>>) -> Scheduled {
        Scheduled {
            id: "0123456789abcdef0123456789abcdef".into(),
            room_id: "r".into(),
            user_id: "u".into(),
            user_name: "U".into(),
            text: Some("hi".into()),
            poll: None,
            attachments: Vec::new(),
            send_at,
            status,
            created_at: send_at,
            claimed_at,
            attempts: 0,
            message_id: None,
            refusal: None,
            finished_at: None,
        }
    }

    #[test]
    fn an_item_is_claimable_when_due_and_waiting_or_its_claim_lapsed() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        assert!(item(ScheduledStatus::Scheduled, now, None).claimable(now));
        assert!(!item(ScheduledStatus::Scheduled, now + Duration::seconds(1), None).claimable(now));
        let claimed = now - Duration::seconds(10);
        assert!(!item(ScheduledStatus::Sending, now, Some(claimed)).claimable(now));
        assert!(item(ScheduledStatus::Sending, now, Some(claimed)).claimable(claimed + CLAIM_LEASE));
        for done in [
            ScheduledStatus::Sent,
            ScheduledStatus::Refused,
            ScheduledStatus::Cancelled,
        ] {
            assert!(!item(done, now, None).claimable(now + Duration::days(1)));
        }
    }

    #[test]
    fn every_send_of_an_item_carries_the_same_client_id() {
        let a = item(
            ScheduledStatus::Scheduled,
            chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            None,
        );
        assert_eq!(a.message().client_id, a.message().client_id);
        assert_eq!(a.client_id().as_str(), "sched.0123456789abcdef0123456789abcdef");
    }

    #[test]
    fn the_time_and_body_are_checked() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        assert!(checked_send_at(now, now).is_err());
        assert!(checked_send_at(now + MAX_AHEAD + Duration::seconds(1), now).is_err());
        assert!(checked_send_at(now + Duration::seconds(1), now).is_ok());
        assert!(checked_body(None, None).is_err());
        assert!(checked_body(Some("<script>x</script>"), None).is_err());
        assert_eq!(
            checked_body(Some("<b>x</b>"), None).unwrap().0.as_deref(),
            Some("<b>x</b>")
        );
    }
}
