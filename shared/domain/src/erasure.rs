//! A user's erasure of themselves (`POST /api/me/erase`): the job's state as the client reads
//! it, where a job stands (its checkpoint), and the rules it follows that need no store — who
//! inherits a room, and which messages of a room can be the user's. Running it is
//! `crate::service::erasure` in the `tabletalk` crate.
//!
//! What an erasure removes: every message the user wrote (tombstoned, as their own delete
//! would), their reactions and poll votes, their push subscriptions and their memberships,
//! the reports they filed, the invitations waiting for them and their rows of the limits.
//! What it leaves: other people's messages — their replies to the user's messages (which then
//! point at a tombstone) and their forwarded copies of them (a copy is the forwarder's
//! message, as a quote in an e-mail is the sender's) —, the user's id inside other people's
//! mentions (an id, not content the user wrote), bans on the user (a moderator's record), and
//! the emoji they made for a room (the room's, as the room's settings are; a manager deletes
//! one).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Rank;
use crate::ids::UserId;
use crate::keys::{MESSAGE_KEY_RANGE, MessageKey, Ticks};

/// How far before the recorded first join a room's scan for the user's messages starts: the
/// join and a send may run in processes whose clocks differ a little.
pub const CLOCK_SLACK: Duration = Duration::minutes(5);

/// Where an erasure job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ErasureStatus {
    /// Working through the user's rooms (in this process or another; a crashed one's job is
    /// taken over once its lease lapses).
    Running,
    /// Everything is erased.
    Done,
}

/// What has been erased so far, counted once per item even across a crash and a resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErasureCounts {
    /// Rooms finished (memberships removed, messages and marks erased).
    pub rooms_done: u64,
    /// Rooms the user owned that went to another member.
    pub rooms_handed_over: u64,
    /// Rooms the user owned with no other member, deleted.
    pub rooms_deleted: u64,
    /// The user's messages tombstoned by this erasure.
    pub messages_erased: u64,
    /// The user's reactions removed from other people's messages.
    pub reactions_removed: u64,
    /// The user's poll votes removed from other people's polls.
    pub votes_removed: u64,
    pub subscriptions_removed: u64,
}

/// An erasure as `GET /api/me/erase` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Erasure {
    /// The job's id: a repeated `POST` while it runs answers this same job.
    pub id: String,
    pub status: ErasureStatus,
    pub started_at: DateTime<Utc>,
    /// When the last step was recorded.
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Rooms still to go (0 once done).
    pub rooms_left: u64,
    #[serde(flatten)]
    pub counts: ErasureCounts,
}

/// The step a room is at. A room goes through them in this order; a resumed job starts the
/// room again at the step its checkpoint names, after the last key it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomStep {
    /// Hand the room over or delete it (if the user owns it), then remove the membership.
    Membership,
    /// Tombstone the user's messages, a batch at a time.
    Messages,
    /// Remove the user's reactions and votes, a batch at a time.
    Marks,
    /// Everything of the room is done; only its history row is left to forget.
    Finished,
}

impl RoomStep {
    pub fn as_str(self) -> &'static str {
        match self {
            RoomStep::Membership => "membership",
            RoomStep::Messages => "messages",
            RoomStep::Marks => "marks",
            RoomStep::Finished => "finished",
        }
    }

    pub fn parse(text: &str) -> Option<RoomStep> {
        match text {
            "membership" => Some(RoomStep::Membership),
            "messages" => Some(RoomStep::Messages),
            "marks" => Some(RoomStep::Marks),
            "finished" => Some(RoomStep::Finished),
            _ => None,
        }
    }
}

/// How far the job got in its current room: the step and the last row key that step finished
/// (`None`: from the step's start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub room_id: String,
    pub step: RoomStep,
    pub after: Option<String>,
}

/// How erasures run: operators tune them (`TABLETALK_ERASURE_*`), tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErasureSettings {
    /// Rows one batch reads (messages, or reaction and vote rows) before it records its
    /// checkpoint.
    pub batch: usize,
    /// Pause after each batch, so that erasing a prolific user never crowds out live traffic.
    pub pause: std::time::Duration,
    /// How long a job stays with the process running it without a new checkpoint; a job whose
    /// lease lapsed (its process died) is taken over by the next housekeeping run.
    pub lease: std::time::Duration,
}

impl Default for ErasureSettings {
    fn default() -> ErasureSettings {
        ErasureSettings {
            batch: 100,
            pause: std::time::Duration::from_millis(50),
            lease: std::time::Duration::from_secs(60),
        }
    }
}

/// A job as it is stored: what the client is shown, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureJob {
    pub id: String,
    pub status: ErasureStatus,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub counts: ErasureCounts,
    /// The room being worked on, if one is.
    pub checkpoint: Option<Checkpoint>,
    /// Until when the process that last recorded a step holds the job.
    pub lease_until: DateTime<Utc>,
}

impl ErasureJob {
    /// A new job, held by its starter until `lease_until`.
    pub fn start(id: String, now: DateTime<Utc>, lease_until: DateTime<Utc>) -> ErasureJob {
        ErasureJob {
            id,
            status: ErasureStatus::Running,
            started_at: now,
            updated_at: now,
            finished_at: None,
            counts: ErasureCounts::default(),
            checkpoint: None,
            lease_until,
        }
    }

    pub fn is_running(&self) -> bool {
        self.status == ErasureStatus::Running
    }

    /// What the client is shown, with the rooms still to go.
    pub fn view(&self, rooms_left: u64) -> Erasure {
        Erasure {
            id: self.id.clone(),
            status: self.status,
            started_at: self.started_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
            rooms_left: if self.is_running() { rooms_left } else { 0 },
            counts: self.counts,
        }
    }
}

/// The newest-first message key range that can hold the user's messages in a room they first
/// joined at `joined` (unknown for a membership older than the join record: the whole room).
/// A message's key is its send time reversed, so "sent after the join" is one key range.
pub fn authored_range(joined: Option<DateTime<Utc>>) -> (String, String) {
    let (low, high) = MESSAGE_KEY_RANGE;
    let high = match joined {
        Some(at) => {
            let key: MessageKey = Ticks::from_datetime(at - CLOCK_SLACK).message_key();
            key.as_str().to_owned().min(high.to_owned())
        }
        None => high.to_owned(),
    };
    (low.to_owned(), high)
}

/// A remaining member as the hand-over compares them.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub user_id: UserId,
    pub rank: Rank,
    pub joined_at: DateTime<Utc>,
}

/// Who inherits a room: the highest-ranked remaining member; of equals, the longest-standing
/// member, then the smallest user id (so every process picks the same one).
pub fn successor(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates.iter().min_by(|a, b| {
        b.rank
            .cmp(&a.rank)
            .then(a.joined_at.cmp(&b.joined_at))
            .then(a.user_id.cmp(&b.user_id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: &str, rank: u32, minutes: i64) -> Candidate {
        Candidate {
            user_id: UserId::parse(id).unwrap(),
            rank: Rank(rank),
            joined_at: DateTime::<Utc>::UNIX_EPOCH + Duration::minutes(minutes),
        }
    }

    #[test]
    fn the_highest_ranked_member_inherits_then_the_longest_standing() {
        let members = [candidate("bob", 0, 1), candidate("carol", 5, 9), candidate("dan", 5, 3)];
        assert_eq!(successor(&members).unwrap().user_id.as_str(), "dan");
        let equals = [candidate("zed", 0, 1), candidate("amy", 0, 1)];
        assert_eq!(successor(&equals).unwrap().user_id.as_str(), "amy");
        assert!(successor(&[]).is_none());
    }

    #[test]
    fn messages_sent_after_the_first_join_are_inside_the_authored_range() {
        let joined = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap() - Duration::hours(1);
        let (low, high) = authored_range(Some(joined));
        let after = Ticks::from_datetime(joined + Duration::seconds(1)).message_key();
        let before = Ticks::from_datetime(joined - Duration::hours(1)).message_key();
        assert!(low.as_str() <= after.as_str() && after.as_str() < high.as_str());
        assert!(
            before.as_str() >= high.as_str(),
            "a message from before the join is outside"
        );
        assert_eq!(authored_range(None).1, MESSAGE_KEY_RANGE.1);
    }
}
