//! Changing a room: name, description, read-only, slowmode, the word filter (ManageRoom) and
//! what every member may do (ManageRoles). The room row is rewritten through the
//! conditional-write helper, so two moderators changing different settings both land. A
//! rename writes an `EditRoom` line in the room's own voice.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{MAX_DESCRIPTION_CHARS, MAX_ROOM_NAME_CHARS, Room};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::messages::MessageType;
use crate::permissions::{Permission, Permissions};
use crate::service::Chat;
use crate::text::{plain_lines, plain_text};
use crate::word_filter::WordFilter;

pub const MAX_SLOWMODE_SECONDS: u32 = 6 * 3600;
pub const MAX_FILTER_WORDS: usize = 1000;
pub const MAX_FILTER_WORD_CHARS: usize = 100;
/// The stored word list's budget, under table storage's 32 Ki UTF-16 units per string.
pub const MAX_FILTER_STORED_UNITS: usize = 30_000;
pub const MAX_FILTER_TIMEOUT_SECONDS: u32 = 7 * 24 * 3600;

/// What happens to a send the word filter catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub enum FilterAction {
    /// Refuse the send (403).
    #[default]
    Block,
    /// Refuse it and time the sender out for `timeoutSeconds` (a running longer timeout is
    /// never shortened).
    BlockAndTimeout,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WordFilterSettings {
    /// Words or phrases (at most 1000, each 1..=100 characters), matched as whole words after
    /// normalisation.
    #[schema(max_items = 1000)]
    pub words: Vec<String>,
    #[serde(default)]
    pub action: FilterAction,
    /// For `BlockAndTimeout`: 1..=604800.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 604800)]
    pub timeout_seconds: Option<u32>,
}

impl WordFilterSettings {
    pub fn filter(&self) -> WordFilter {
        WordFilter::new(self.words.iter().map(String::as_str))
    }

    fn checked(mut self) -> Result<WordFilterSettings> {
        if self.words.len() > MAX_FILTER_WORDS {
            return Err(Error::validation(format!("at most {MAX_FILTER_WORDS} filter words")));
        }
        for word in &mut self.words {
            *word = plain_text(word, "a filter word", 1, MAX_FILTER_WORD_CHARS)?;
        }
        // The list is stored as one string property, which holds at most 32 Ki UTF-16 units.
        let stored = serde_json::to_string(&self).unwrap_or_default().encode_utf16().count();
        if stored > MAX_FILTER_STORED_UNITS {
            return Err(Error::validation(format!(
                "the word list takes {stored} characters stored; at most {MAX_FILTER_STORED_UNITS} fit"
            )));
        }
        match (self.action, self.timeout_seconds) {
            (FilterAction::Block, Some(_)) => Err(Error::validation("timeoutSeconds belongs to BlockAndTimeout")),
            (FilterAction::BlockAndTimeout, Some(s)) if (1..=MAX_FILTER_TIMEOUT_SECONDS).contains(&s) => Ok(self),
            (FilterAction::BlockAndTimeout, _) => Err(Error::validation(format!(
                "BlockAndTimeout needs timeoutSeconds in 1..={MAX_FILTER_TIMEOUT_SECONDS}"
            ))),
            (FilterAction::Block, None) => Ok(self),
        }
    }
}

/// A change to a room; absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoomChange {
    /// 1..=100 characters, trimmed, on one line.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    /// At most 500 characters, trimmed; line breaks allowed.
    #[schema(max_length = 500)]
    pub description: Option<String>,
    pub read_only: Option<bool>,
    /// 0 turns slowmode off; at most 21600.
    #[schema(maximum = 21600)]
    pub slowmode_seconds: Option<u32>,
    pub word_filter: Option<WordFilterSettings>,
    /// Needs ManageRoles.
    pub everyone_permissions: Option<Permissions>,
    /// Seconds messages are kept (1..=315360000); null keeps them forever.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 315360000)]
    pub retention_seconds: Option<Option<u32>>,
}

/// Tells a field sent as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

pub const MAX_RETENTION_SECONDS: u32 = 10 * 365 * 24 * 3600;

impl Chat {
    pub async fn update_room(&self, who: &Principal, room_id: &RoomId, change: RoomChange) -> Result<Room> {
        let name = change
            .name
            .as_deref()
            .map(|n| plain_text(n, "name", 1, MAX_ROOM_NAME_CHARS))
            .transpose()?;
        let description = change
            .description
            .as_deref()
            .map(|d| plain_lines(d, "description", MAX_DESCRIPTION_CHARS))
            .transpose()?;
        if change.slowmode_seconds.is_some_and(|s| s > MAX_SLOWMODE_SECONDS) {
            return Err(Error::validation(format!(
                "slowmodeSeconds must be 0..={MAX_SLOWMODE_SECONDS}"
            )));
        }
        let word_filter = change.word_filter.map(WordFilterSettings::checked).transpose()?;
        if let Some(Some(seconds)) = change.retention_seconds
            && !(1..=MAX_RETENTION_SECONDS).contains(&seconds)
        {
            return Err(Error::validation(format!(
                "retentionSeconds must be 1..={MAX_RETENTION_SECONDS}, or null"
            )));
        }

        let access = self.access(room_id, &who.user_id).await?;
        let room_fields = name.is_some()
            || description.is_some()
            || change.read_only.is_some()
            || change.slowmode_seconds.is_some()
            || change.retention_seconds.is_some()
            || word_filter.is_some();
        if room_fields {
            access.require(Permission::ManageRoom)?;
        }
        if let Some(permissions) = change.everyone_permissions {
            access.require(Permission::ManageRoles)?;
            access.require_grantable(permissions)?;
        }

        let mut renamed = false;
        let room = self
            .store
            .update_room(room_id, |room| {
                if let Some(name) = &name {
                    renamed = &room.name != name;
                    room.name = name.clone();
                }
                room.description = description.clone().unwrap_or(room.description.clone());
                room.read_only = change.read_only.unwrap_or(room.read_only);
                room.slowmode_seconds = change.slowmode_seconds.unwrap_or(room.slowmode_seconds);
                room.word_filter = word_filter.clone().unwrap_or(room.word_filter.clone());
                room.everyone_permissions = change.everyone_permissions.unwrap_or(room.everyone_permissions);
                room.retention_seconds = change.retention_seconds.unwrap_or(room.retention_seconds);
                Ok(())
            })
            .await?;
        if renamed {
            let line = format!("{} renamed the room to {}.", access.member.display_name(), room.name);
            self.announce(room_id, MessageType::EditRoom, who, line).await;
        }
        Ok(room)
    }
}
