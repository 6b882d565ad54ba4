//! The room model: a room, a new room, a room in a member's list, its settings
//! (`settings`). The use cases are `crate::service::rooms`, `room_settings` and
//! `room_deletion`.

pub mod activity;
pub mod directory;
pub mod invitations;
pub mod settings;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::members::NotificationLevel;
use crate::permissions::Permissions;

pub use settings::{FilterAction, RoomChange, WordFilterSettings};

pub const MAX_ROOM_NAME_CHARS: usize = 100;
pub const MAX_DESCRIPTION_CHARS: usize = 500;

crate::text_field!(
    /// A room's name in the document: what [`crate::text::plain_text`] accepts.
    RoomName, 1, MAX_ROOM_NAME_CHARS, crate::text::ONE_LINE
);
crate::text_field!(
    /// A room's description in the document: what [`crate::text::plain_lines`] accepts.
    RoomDescription, 0, MAX_DESCRIPTION_CHARS, crate::text::LINES
);
/// Rooms one user can be listed in.
pub const MAX_ROOMS_PER_USER: usize = 1000;
/// Unread messages counted per room; past this the listing says "at least".
pub const MAX_UNREAD_COUNTED: usize = 100;

/// Who can find a room and join it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Listed in the directory; anyone may join by its id.
    Public,
    /// Not listed; joined only through an invitation. To anyone else it does not exist.
    #[default]
    Private,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Room {
    pub id: String,
    /// Empty for a direct conversation, which clients name after the other person.
    pub name: String,
    pub description: String,
    /// Empty for a direct conversation: it has no owner.
    pub owner_id: String,
    pub created_at: DateTime<Utc>,
    pub visibility: Visibility,
    /// A direct conversation: the one room of two people; nobody else joins it.
    pub direct: bool,
    /// Only members with ManageMessages may send.
    pub read_only: bool,
    /// Members reply in threads and start no posts (an announcement room); ManageMessages
    /// may still post.
    pub replies_only: bool,
    /// Seconds a member waits between sends (0: off). ManageMessages is exempt.
    pub slowmode_seconds: u32,
    pub word_filter: WordFilterSettings,
    /// What every member may do, on top of their roles.
    pub everyone_permissions: Permissions,
    /// Messages older than this many seconds are purged; absent keeps them forever.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_seconds: Option<u32>,
    /// A ceiling on sends per second across all members (0: none); ManageMessages is exempt.
    pub max_sends_per_second: u32,
    /// The room's own trust thresholds (`crate::trust`); absent: the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<crate::trust::Threshold>>, min_items = 3, max_items = 3)]
    pub trust_thresholds: Option<crate::trust::Thresholds>,
}

impl Room {
    /// True for a room anyone may find in the directory and join by id.
    pub fn is_listed(&self) -> bool {
        self.visibility == Visibility::Public && !self.direct
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewRoom {
    /// 1..=100 characters, trimmed, on one line.
    #[schema(value_type = RoomName, inline)]
    pub name: String,
    /// At most 500 characters, trimmed; line breaks allowed.
    #[serde(default)]
    #[schema(value_type = Option<RoomDescription>, inline)]
    pub description: Option<String>,
    /// `private` (the default) or `public`.
    #[serde(default)]
    pub visibility: Visibility,
}

/// Opens the direct conversation with another user.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewDirect {
    /// The other person.
    pub user_id: String,
}

/// Hands a room to another member.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnershipTransfer {
    /// The member who becomes the owner.
    pub user_id: String,
}

/// A room in the caller's list, with where they stand in it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoomEntry {
    #[serde(flatten)]
    pub room: Room,
    /// Messages from others after the read position (counted up to 100).
    pub unread_count: usize,
    /// True when there are more unread messages than `unreadCount` says.
    pub unread_capped: bool,
    /// Unread messages that mention the caller (directly, by role, or the whole room).
    pub mention_count: usize,
    /// The caller's read position: messages after it are unread.
    pub last_read_at: DateTime<Utc>,
    pub notifications: NotificationLevel,
    pub muted: bool,
    /// When the room last had a message (its creation, before the first): the room list is
    /// ordered by it, newest first.
    pub last_activity_at: DateTime<Utc>,
    /// The newest message, shortened; absent before the first message (or in a room whose
    /// last message predates previews, until its next one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message: Option<activity::MessagePreview>,
}
