//! A room's own emoji: a member with ManageRoom names an image they uploaded to the room
//! (`createUpload`, not sent); `:name:` in the room's Markdown then marks it
//! (`markdown::render`), every member may list them and fetch the image (as an attachment, with
//! the same membership check), and deleting one deletes its image while old messages keep
//! showing the name.

use std::sync::Arc;

use crate::auth::Principal;
use crate::emoji::{CustomEmoji, MAX_CUSTOM_PER_ROOM, NewCustomEmoji, check_custom_image, is_custom_name};
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;

/// A room's own emoji. Holds the store, and the components whose checks and files it uses.
#[derive(Clone)]
pub struct RoomEmoji {
    pub(crate) store: crate::store::Store,
    pub(crate) access: Arc<crate::service::access::RoomAccess>,
    pub(crate) files: Arc<crate::service::attachments::Files>,
}

impl RoomEmoji {
    /// Makes `:name:` the room's own emoji (ManageRoom), its image the caller's upload
    /// `attachmentId`, claimed for it: checked as a send checks a file (the caller's, in this
    /// room, uploaded as declared, on no message), then as an image of at most 256 KiB.
    pub async fn create(&self, who: &Principal, room: &RoomId, input: NewCustomEmoji) -> Result<CustomEmoji> {
        let name = input.checked_name()?.to_owned();
        let access = self.access.access(room, &who.user_id).await?;
        access.require(Permission::ManageRoom)?;
        if self.store.room_emoji.list(room).await?.len() >= MAX_CUSTOM_PER_ROOM {
            return Err(Error::Conflict(format!(
                "a room has at most {MAX_CUSTOM_PER_ROOM} emoji of its own"
            )));
        }
        let claim = format!("emoji:{}", uuid::Uuid::new_v4().simple());
        let ids = [input.attachment_id.clone()];
        // The upload is the body's to name: one the caller cannot name is a bad value (422),
        // not a missing room.
        let claimed = match self
            .files
            .claim_attachments(&who.user_id, room, &ids, &claim, None)
            .await
        {
            Err(Error::NotFound(_)) => {
                return Err(Error::validation(
                    "attachmentId names no upload of yours in this room that is not sent yet",
                ));
            }
            claimed => claimed?,
        };
        let release = || {
            self.files
                .release_attachments(room, &claimed.taken, &claim, &who.user_id, None)
        };
        let image = claimed
            .files
            .first()
            .ok_or_else(|| Error::Internal("a claim named no file".into()))?;
        if let Err(e) = check_custom_image(&image.mime, image.size) {
            release().await;
            return Err(e);
        }
        let emoji = CustomEmoji {
            name,
            url: image.url.clone(),
            attachment_id: image.id.clone(),
            created_by: who.user_id.to_string(),
            created_at: self.store.now(),
        };
        let logged = ModerationEntry::by(ModerationAction::EmojiCreated, &who.user_id, emoji.created_at)
            .detail("name", &emoji.name);
        if let Err(e) = self.store.room_emoji.insert(room, &emoji, &logged).await {
            // An insert whose answer was lost may have committed: the claim stays with an
            // emoji that names the image (or when that cannot be told).
            let kept = self.store.room_emoji.get(room, &emoji.name).await;
            if matches!(&kept, Ok(found) if found.as_ref().is_none_or(|(found, _)| found.attachment_id != emoji.attachment_id))
            {
                release().await;
            }
            return Err(e.into());
        }
        Ok(emoji)
    }

    /// The room's own emoji (any member).
    pub async fn list(&self, who: &Principal, room: &RoomId) -> Result<Vec<CustomEmoji>> {
        self.access.access(room, &who.user_id).await?;
        Ok(self.store.room_emoji.list(room).await?)
    }

    /// Deletes the room's emoji `name` (ManageRoom): its image first, then its row, so a
    /// failure in between leaves a row whose image is gone (shown by its name, deleted by the
    /// next try), never an image nothing names. Messages that used it keep its name.
    pub async fn delete(&self, who: &Principal, room: &RoomId, name: &str) -> Result<()> {
        let access = self.access.access(room, &who.user_id).await?;
        access.require(Permission::ManageRoom)?;
        let missing = || Error::not_found(format!("the room has no :{name}:"));
        if !is_custom_name(name) {
            return Err(missing());
        }
        let (emoji, version) = self.store.room_emoji.get(room, name).await?.ok_or_else(missing)?;
        if let Some(upload) = self.store.uploads.upload(room, &emoji.attachment_id).await? {
            self.files.purge_attachments(room, &[upload.attachment()]).await?;
        }
        let logged =
            ModerationEntry::by(ModerationAction::EmojiDeleted, &who.user_id, self.store.now()).detail("name", name);
        Ok(self.store.room_emoji.delete(room, name, version, &logged).await?)
    }
}
