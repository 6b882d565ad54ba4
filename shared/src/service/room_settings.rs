//! Changing a room: name, description, read-only, slowmode, the word filter, the ceiling on
//! sends per second (ManageRoom) and what every member may do (ManageRoles). The room row is rewritten through the
//! conditional-write helper, so two moderators changing different settings both land. A
//! rename writes an `EditRoom` line in the room's own voice.

use super::Chat;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::limits::MAX_ROOM_SENDS_PER_SECOND;
use crate::messages::MessageType;
use crate::permissions::Permission;
use crate::rooms::settings::{MAX_RETENTION_SECONDS, MAX_SLOWMODE_SECONDS, RoomChange, WordFilterSettings};
use crate::rooms::{MAX_DESCRIPTION_CHARS, MAX_ROOM_NAME_CHARS, Room};
use crate::text::{plain_lines, plain_text};

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

        if change
            .max_sends_per_second
            .is_some_and(|n| n > MAX_ROOM_SENDS_PER_SECOND)
        {
            return Err(Error::validation(format!(
                "maxSendsPerSecond must be 0..={MAX_ROOM_SENDS_PER_SECOND}"
            )));
        }

        let access = self.access(room_id, &who.user_id).await?;
        let room_fields = name.is_some()
            || description.is_some()
            || change.read_only.is_some()
            || change.slowmode_seconds.is_some()
            || change.retention_seconds.is_some()
            || change.max_sends_per_second.is_some()
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
                room.max_sends_per_second = change.max_sends_per_second.unwrap_or(room.max_sends_per_second);
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
