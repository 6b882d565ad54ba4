//! The moderation log: what a moderation action leaves behind (who did what to whom, why and
//! when), who may read it, how it is paged, and the optional reason moderators give. Writing
//! the log is the store's (`store::moderation_log`), in the same transaction as the action
//! wherever the two share a partition; reading it is `crate::service::moderation_log`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::access::Access;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::{KEY_WIDTH, Ticks};
use crate::permissions::Permission;
use crate::text::plain_lines;

pub use crate::text::{MAX_REASON_CHARS, Reason};

pub const DEFAULT_LOG_LIMIT: usize = 50;
pub const MAX_LOG_LIMIT: usize = 100;
/// Longest log cursor accepted; anything longer is garbage.
const MAX_CURSOR_LEN: usize = 256;

/// The permissions that let a member read the log: each one's actions are in it, so whoever
/// may take one kind of action may see what the others did.
pub const LOG_READERS: [Permission; 5] = [
    Permission::ManageMembers,
    Permission::ManageMessages,
    Permission::ManageRoles,
    Permission::ManageRoom,
    Permission::ManageWebhooks,
];

/// What was done. Stored and served by its camelCase name, so a new kind is one line here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModerationAction {
    Kick,
    Ban,
    Unban,
    /// A timeout given, or lifted (`details.until` null).
    Timeout,
    /// A member with ManageMessages deleted someone else's message.
    ModeratedDelete,
    RoleCreated,
    RoleChanged,
    RoleDeleted,
    MemberRolesSet,
    EveryonePermissionsChanged,
    RoomSettingsChanged,
    /// A report group closed: `details.resolution` is `dismissed` or `messageDeleted`.
    ReportsResolved,
    OwnershipTransferred,
    /// An invitation revoked: `details.invitationId`, and `targetUserId` for a user's.
    InvitationRevoked,
    /// An inbound webhook made: `details.webhookId` and `details.name` (never its URL).
    WebhookCreated,
    /// An inbound webhook renamed: `details.webhookId` and the new `details.name`.
    WebhookRenamed,
    /// An inbound webhook given a new secret URL: `details.webhookId` (never the URL).
    WebhookRotated,
    /// An inbound webhook deleted: `details.webhookId`.
    WebhookDeleted,
    /// A slash command of the room's own registered: `details.name` (never its secret).
    SlashCommandCreated,
    /// A slash command of the room's own deleted: `details.name`.
    SlashCommandDeleted,
    /// An emoji of the room's own made: `details.name`.
    EmojiCreated,
    /// An emoji of the room's own deleted: `details.name`.
    EmojiDeleted,
    /// A member's trust level set (`details.level`), or cleared back to the earned one
    /// (`details.level` null).
    TrustLevelSet,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModerationEntry {
    /// Unique in the room; sorts newest first.
    pub id: String,
    pub action: ModerationAction,
    /// Who did it; null for the server's own doing (reports of a message retention purged).
    pub actor_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_role_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
    /// What the action set, by field (e.g. `until`, `permissions`, the changed settings).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty", default)]
    #[schema(value_type = Object)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl ModerationEntry {
    /// An entry for `action` by `actor` at `at`. Its id is fixed here, once, so a retried
    /// write of the same entry writes the same row.
    pub fn new(action: ModerationAction, actor: Option<&UserId>, at: DateTime<Utc>) -> ModerationEntry {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        ModerationEntry {
            id: format!("{}-{}", Ticks::from_datetime(at).message_key().as_str(), &suffix[..8]),
            action,
            actor_id: actor.map(UserId::to_string),
            target_user_id: None,
            target_message_id: None,
            target_role_id: None,
            reason: None,
            at,
            details: serde_json::Map::new(),
        }
    }

    pub fn by(action: ModerationAction, actor: &UserId, at: DateTime<Utc>) -> ModerationEntry {
        ModerationEntry::new(action, Some(actor), at)
    }

    pub fn user(mut self, user: &UserId) -> ModerationEntry {
        self.target_user_id = Some(user.to_string());
        self
    }

    pub fn message(mut self, id: &str) -> ModerationEntry {
        self.target_message_id = Some(id.to_owned());
        self
    }

    pub fn role(mut self, id: &str) -> ModerationEntry {
        self.target_role_id = Some(id.to_owned());
        self
    }

    pub fn reason(mut self, reason: Option<String>) -> ModerationEntry {
        self.reason = reason;
        self
    }

    pub fn detail(mut self, name: &str, value: impl Serialize) -> ModerationEntry {
        self.details
            .insert(name.to_owned(), serde_json::to_value(value).unwrap_or_default());
        self
    }
}

/// True for text shaped like an entry id (`<19 digits>-<8 hex>`), so a cursor cannot smuggle
/// any other key into a range read.
pub fn is_entry_id(id: &str) -> bool {
    let Some((ticks, suffix)) = id.split_once('-') else {
        return false;
    };
    ticks.len() == KEY_WIDTH
        && ticks.bytes().all(|b| b.is_ascii_digit())
        && suffix.len() == 8
        && suffix.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A 403 unless the caller holds one of [`LOG_READERS`].
pub fn require_log_reader(access: &Access) -> Result<()> {
    if LOG_READERS.iter().any(|p| access.can(*p)) {
        Ok(())
    } else {
        Err(Error::Forbidden(
            "reading the moderation log needs ManageMembers, ManageMessages, ManageRoles or ManageRoom".into(),
        ))
    }
}

/// A moderator's optional reason: trimmed, at most [`MAX_REASON_CHARS`]; empty is none.
pub fn checked_reason(reason: Option<&str>) -> Result<Option<String>> {
    let Some(reason) = reason else { return Ok(None) };
    let reason = plain_lines(reason, "reason", MAX_REASON_CHARS)?;
    Ok((!reason.is_empty()).then_some(reason))
}

/// The optional body of a kick (a kick without a body is still a kick).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kick {
    /// At most 500 characters; recorded in the moderation log.
    #[schema(value_type = Option<Reason>, inline)]
    pub reason: Option<String>,
}

/// A ban as `GET …/bans` lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BanEntry {
    pub user_id: String,
    pub banned_by: String,
    pub banned_at: DateTime<Utc>,
    /// Null: until lifted.
    pub until: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Query parameters of a log read.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadModerationLog {
    /// Entries per page, 1..=100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModerationLogPage {
    /// Newest first.
    pub entries: Vec<ModerationEntry>,
    /// True when more entries follow `nextCursor`.
    pub has_more: bool,
    /// Resume here; null when the page is the last.
    pub next_cursor: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u8,
    r: String,
    k: String,
}

/// Where a log page resumes: after the entry with this id. Bound to its room, like a message
/// cursor, so one room's cursor never reads another's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCursor(pub String);

impl LogCursor {
    pub fn encode(&self, room: &RoomId) -> String {
        let wire = Wire {
            v: 1,
            r: room.to_string(),
            k: self.0.clone(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("a cursor serializes"))
    }

    /// A cursor issued for `room`; anything else is a BAD_REQUEST.
    pub fn decode(text: &str, room: &RoomId) -> Result<LogCursor> {
        let invalid = || Error::bad_request("cursor is not valid for this room's moderation log");
        if text.len() > MAX_CURSOR_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if wire.v != 1 || wire.r != room.as_str() || !is_entry_id(&wire.k) {
            return Err(invalid());
        }
        Ok(LogCursor(wire.k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_entries_sort_first_and_ids_are_checked() {
        let alice = UserId::parse("alice").unwrap();
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let first = ModerationEntry::by(ModerationAction::Kick, &alice, at);
        let second = ModerationEntry::by(ModerationAction::Ban, &alice, at + chrono::Duration::milliseconds(2));
        assert!(second.id < first.id, "{} < {}", second.id, first.id);
        assert!(is_entry_id(&first.id));
        for garbage in ["", "123", "0000000000000000000-xyzxyzxy", "0000000000000000000-0000000"] {
            assert!(!is_entry_id(garbage), "{garbage}");
        }
    }

    #[test]
    fn a_cursor_round_trips_only_in_its_room() {
        let room = RoomId::generate();
        let id = ModerationEntry::new(ModerationAction::Unban, None, DateTime::UNIX_EPOCH).id;
        let text = LogCursor(id.clone()).encode(&room);
        assert_eq!(LogCursor::decode(&text, &room).unwrap(), LogCursor(id));
        assert!(LogCursor::decode(&text, &RoomId::generate()).is_err());
        for garbage in ["", "!!!", "eyJ2IjoxfQ", &"A".repeat(300)] {
            assert_eq!(LogCursor::decode(garbage, &room).unwrap_err().code(), "BAD_REQUEST");
        }
    }

    #[test]
    fn reasons_are_trimmed_bounded_and_optional() {
        assert_eq!(checked_reason(None).unwrap(), None);
        assert_eq!(checked_reason(Some("  ")).unwrap(), None);
        assert_eq!(checked_reason(Some(" spam ")).unwrap().as_deref(), Some("spam"));
        let long = "x".repeat(MAX_REASON_CHARS + 1);
        assert_eq!(checked_reason(Some(&long)).unwrap_err().code(), "VALIDATION");
    }
}
