//! Changing a room: name, description, visibility, read-only, slowmode, the word filter, the
//! ceiling on sends per second (ManageRoom) and what every member may do (ManageRoles). The room row is rewritten through the
//! conditional-write helper, so two moderators changing different settings both land. A
//! rename writes an `EditRoom` line in the room's own voice. A change that changes something
//! logs it (`roomSettingsChanged` with the new values of the settings that changed, and
//! `everyonePermissionsChanged`) in the room row's own transaction.

use super::rooms::Rooms;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::limits::MAX_ROOM_SENDS_PER_SECOND;
use crate::messages::MessageType;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;
use crate::rooms::settings::{MAX_RETENTION_SECONDS, MAX_SLOWMODE_SECONDS, RoomChange, WordFilterSettings};
use crate::rooms::{MAX_DESCRIPTION_CHARS, MAX_ROOM_NAME_CHARS, Room, Visibility};
use crate::service::send::Submission;
use crate::text::{plain_lines, plain_text};

impl Rooms {
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

        let access = self.access.access(room_id, &who.user_id).await?;
        if access.room.direct && change.visibility.is_some_and(|v| v != Visibility::Private) {
            return Err(Error::Conflict("a direct conversation is always private".into()));
        }
        let room_fields = name.is_some()
            || description.is_some()
            || change.visibility.is_some()
            || change.read_only.is_some()
            || change.replies_only.is_some()
            || change.slowmode_seconds.is_some()
            || change.retention_seconds.is_some()
            || change.max_sends_per_second.is_some()
            || change.trust_thresholds.is_some()
            || word_filter.is_some();
        if room_fields {
            access.require(Permission::ManageRoom)?;
        }
        if let Some(permissions) = change.everyone_permissions {
            access.require(Permission::ManageRoles)?;
            access.require_grantable(permissions)?;
        }

        let apply = |room: &mut Room| {
            if let Some(name) = &name {
                room.name = name.clone();
            }
            room.description = description.clone().unwrap_or(room.description.clone());
            room.read_only = change.read_only.unwrap_or(room.read_only);
            room.replies_only = change.replies_only.unwrap_or(room.replies_only);
            room.visibility = change.visibility.unwrap_or(room.visibility);
            room.slowmode_seconds = change.slowmode_seconds.unwrap_or(room.slowmode_seconds);
            room.word_filter = word_filter.clone().unwrap_or(room.word_filter.clone());
            room.everyone_permissions = change.everyone_permissions.unwrap_or(room.everyone_permissions);
            room.retention_seconds = change.retention_seconds.unwrap_or(room.retention_seconds);
            room.max_sends_per_second = change.max_sends_per_second.unwrap_or(room.max_sends_per_second);
            room.trust_thresholds = change.trust_thresholds.unwrap_or(room.trust_thresholds);
        };
        // The directory row is written before the room becomes listed under a name, and the
        // rows it no longer has are removed after, if unchanged since read here (see
        // `store::directory`).
        let mut expected = access.room.clone();
        apply(&mut expected);
        self.store.directory.list_in_directory(&expected).await?;
        let held = self
            .store
            .directory
            .hold_directory_rows([&access.room, &expected])
            .await?;
        let mut renamed = false;
        let entries = |before: &Room, after: &Room| {
            let mut entries = Vec::new();
            let mut settings =
                ModerationEntry::by(ModerationAction::RoomSettingsChanged, &who.user_id, self.store.now());
            let diff = |a: serde_json::Value, b: serde_json::Value| (a != b).then_some(b);
            let fields = [
                ("name", diff(before.name.clone().into(), after.name.clone().into())),
                (
                    "description",
                    diff(before.description.clone().into(), after.description.clone().into()),
                ),
                ("readOnly", diff(before.read_only.into(), after.read_only.into())),
                (
                    "repliesOnly",
                    diff(before.replies_only.into(), after.replies_only.into()),
                ),
                ("visibility", diff(json(&before.visibility), json(&after.visibility))),
                (
                    "slowmodeSeconds",
                    diff(before.slowmode_seconds.into(), after.slowmode_seconds.into()),
                ),
                ("wordFilter", diff(json(&before.word_filter), json(&after.word_filter))),
                (
                    "retentionSeconds",
                    diff(before.retention_seconds.into(), after.retention_seconds.into()),
                ),
                (
                    "maxSendsPerSecond",
                    diff(before.max_sends_per_second.into(), after.max_sends_per_second.into()),
                ),
            ];
            for (field, value) in fields {
                if let Some(value) = value {
                    settings = settings.detail(field, value);
                }
            }
            if !settings.details.is_empty() {
                entries.push(settings);
            }
            if before.everyone_permissions != after.everyone_permissions {
                let entry = ModerationEntry::by(
                    ModerationAction::EveryonePermissionsChanged,
                    &who.user_id,
                    self.store.now(),
                )
                .detail("from", before.everyone_permissions)
                .detail("to", after.everyone_permissions);
                entries.push(entry);
            }
            entries
        };
        let room = self
            .store
            .rooms
            .update_room(
                room_id,
                |room| {
                    renamed = name.as_ref().is_some_and(|name| &room.name != name);
                    apply(room);
                    Ok(())
                },
                entries,
            )
            .await?;
        self.store.directory.relist(&room, held).await?;
        if renamed {
            let line = format!("{} renamed the room to {}.", access.member.display_name(), room.name);
            self.sending
                .announce(room_id, Submission::line(MessageType::EditRoom, who, &line))
                .await;
        }
        Ok(room)
    }
}

fn json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}
