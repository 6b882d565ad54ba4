//! The member model: a member of a room with their own settings and read position, the
//! inputs that change them, and moderation inputs. The use cases are `crate::service::members`
//! and `crate::service::moderation`.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::ids::UserId;
use crate::keys::{MessageKey, Ticks};
use crate::principal::Principal;
use crate::text::plain_text;

pub const MAX_NICKNAME_CHARS: usize = 32;

crate::text_field!(
    /// A nickname in the document (empty clears it).
    Nickname, 0, MAX_NICKNAME_CHARS, crate::text::ONE_LINE_OR_EMPTY
);
/// Longest timeout a moderator can give.
pub const MAX_TIMEOUT: Duration = Duration::days(28);
/// Members one listing returns.
pub const MAX_LISTED_MEMBERS: usize = 10_000;
/// Members of a listing whose presence is read (one point read each, a few at a time), so a
/// listing of a big room stays a bounded number of reads.
pub const MAX_PRESENCE_LISTED: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MemberRole {
    Owner,
    Member,
}

/// When a member is notified of a room's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub enum NotificationLevel {
    /// Every message.
    #[default]
    All,
    /// Only messages that mention them (directly, by role, or the whole room).
    Mentions,
    Never,
}

impl NotificationLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationLevel::All => "All",
            NotificationLevel::Mentions => "Mentions",
            NotificationLevel::Never => "Never",
        }
    }

    pub fn parse(text: &str) -> NotificationLevel {
        match text {
            "Mentions" => NotificationLevel::Mentions,
            "Never" => NotificationLevel::Never,
            _ => NotificationLevel::All,
        }
    }
}

/// A member row. Serialized, it is the member's own view of their membership.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    #[schema(value_type = String)]
    pub user_id: UserId,
    /// The display name from their token when they joined.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    pub role: MemberRole,
    /// Ids of the roles assigned to them.
    pub roles: Vec<String>,
    pub notifications: NotificationLevel,
    pub muted: bool,
    pub joined_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_until: Option<DateTime<Utc>>,
    /// The slowmode clock: when their last send was admitted. Server-only.
    #[serde(skip)]
    pub last_message_at: Option<DateTime<Utc>>,
    /// Their read position: every message with a key below this one (newer) is unread.
    #[serde(skip)]
    pub last_read: Option<MessageKey>,
    /// The trust level a moderator set for them, which holds instead of the earned one
    /// (`crate::trust`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 3)]
    pub trust_level: Option<crate::trust::TrustLevel>,
    /// The timeouts they were given: each lowers their earned trust level for a while.
    #[serde(skip)]
    pub strikes: crate::trust::Strikes,
    /// The version of the row it was read from (opaque: the store's ETag), so a write can be
    /// made conditional on it without reading the row again. None for a row not yet stored.
    #[serde(skip)]
    pub row_version: Option<String>,
}

/// Another member, as a member listing shows them.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSummary {
    pub user_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    pub role: MemberRole,
    pub roles: Vec<String>,
    pub joined_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_until: Option<DateTime<Utc>>,
    /// Their trust level in the room (`crate::trust`). While the server's limits are off
    /// nothing is earned or enforced: then only a level a moderator set is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 3)]
    pub trust_level: Option<crate::trust::TrustLevel>,
    /// True when a moderator set `trustLevel` (it holds instead of the earned one).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub trust_level_set: bool,
    /// Online or away, last seen and custom status; absent past the first
    /// `MAX_PRESENCE_LISTED` members of a listing, which reads one presence row per member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<crate::presence::Presence>,
}

/// The answer to marking every room read.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarkedAllRead {
    /// Rooms whose read position moved to now.
    pub rooms: usize,
}

/// How far a member has read a room, as `GET …/receipts` lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub user_id: String,
    /// Their read position, in the format of message ids: every message whose id sorts at or
    /// after it (ids sort newest first) is read by them. It is the id of the message they
    /// read up to, or of their last send, or a position in time (marking everything read).
    pub up_to: String,
    /// The time of that position.
    pub read_at: DateTime<Utc>,
}

/// A member's change to their own settings; absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MembershipChange {
    /// At most 32 characters, trimmed, on one line; empty clears it.
    #[schema(value_type = Option<Nickname>, inline)]
    pub nickname: Option<String>,
    pub notifications: Option<NotificationLevel>,
    pub muted: Option<bool>,
}

/// Moves the caller's read position.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkRead {
    /// Everything up to and including this message is read; absent means everything so far.
    /// An older message moves the position back ("mark unread from here").
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeout {
    /// When the timeout ends: in the future, at most 28 days ahead; null (or absent) lifts it.
    pub until: Option<DateTime<Utc>>,
    /// At most 500 characters; recorded in the moderation log.
    #[serde(default)]
    #[schema(value_type = Option<crate::text::Reason>, inline)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ban {
    /// When the ban ends: in the future, before the year 10000; null or absent means never.
    pub until: Option<DateTime<Utc>>,
    /// At most 500 characters; listed with the ban and recorded in the moderation log.
    #[serde(default)]
    #[schema(value_type = Option<crate::text::Reason>, inline)]
    pub reason: Option<String>,
}

/// A moderator's setting of a member's trust level.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetTrustLevel {
    /// 0..=3, held instead of the earned level; null returns the member to what they earned.
    /// Required: a body that leaves it out is refused rather than read as null.
    #[serde(deserialize_with = "crate::trust::nullable")]
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 3, required = true)]
    pub level: Option<crate::trust::TrustLevel>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberRoles {
    pub role_ids: Vec<String>,
}

impl Member {
    pub fn new(user: &Principal, role: MemberRole, joined_at: DateTime<Utc>) -> Member {
        Member {
            user_id: user.user_id.clone(),
            name: user.name.clone(),
            nickname: None,
            role,
            roles: Vec::new(),
            notifications: NotificationLevel::default(),
            muted: false,
            joined_at,
            timeout_until: None,
            last_message_at: None,
            last_read: Some(Ticks::from_datetime(joined_at).message_key()),
            trust_level: None,
            strikes: Default::default(),
            row_version: None,
        }
    }

    /// The name other members see: the nickname if set.
    pub fn display_name(&self) -> &str {
        self.nickname.as_deref().unwrap_or(&self.name)
    }

    /// True while a timeout is running.
    pub fn timed_out_at(&self, now: DateTime<Utc>) -> bool {
        self.timeout_until.is_some_and(|until| until > now)
    }

    /// Their read position; a member who never read the room has read up to their join.
    pub fn read_position(&self) -> MessageKey {
        self.last_read
            .clone()
            .unwrap_or_else(|| Ticks::from_datetime(self.joined_at).message_key())
    }

    pub fn receipt(&self) -> Receipt {
        let position = self.read_position();
        Receipt {
            user_id: self.user_id.to_string(),
            read_at: position.ticks().to_datetime(),
            up_to: position.as_str().to_owned(),
        }
    }

    /// Moves the read position to `key` if that is newer (a send moves its sender's position
    /// forward only: "mark unread from here" is `mark_read`'s to do).
    pub fn read_up_to(&mut self, key: &MessageKey) -> bool {
        let newer = self.last_read.as_ref().is_none_or(|current| key < current);
        if newer {
            self.last_read = Some(key.clone());
        }
        newer
    }

    pub fn summary(&self) -> MemberSummary {
        MemberSummary {
            user_id: self.user_id.to_string(),
            name: self.name.clone(),
            nickname: self.nickname.clone(),
            role: self.role,
            roles: self.roles.clone(),
            joined_at: self.joined_at,
            timeout_until: self.timeout_until,
            trust_level: self.trust_level,
            trust_level_set: self.trust_level.is_some(),
            presence: None,
        }
    }
}

pub fn checked_nickname(nickname: &str) -> Result<Option<String>> {
    let nickname = plain_text(nickname, "a nickname", 0, MAX_NICKNAME_CHARS)?;
    Ok((!nickname.is_empty()).then_some(nickname))
}

/// A user id from a path segment; one that cannot be a user id names no member.
pub fn target_user(text: &str) -> Result<UserId> {
    UserId::parse(text).map_err(|_| Error::not_found("member not found"))
}
