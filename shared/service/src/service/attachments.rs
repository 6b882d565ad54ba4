//! Attachments as use cases: handing out an upload link, checking and claiming the uploads a
//! send names (called from the one door, `service::send`), the download redirect, copying a
//! message's files for a forward, and removing them when their message, room or retention
//! goes — or when an upload was never attached (housekeeping, after a day).
//!
//! An upload is claimed for a send before the message is written and released if the send
//! fails, so of two sends naming one upload exactly one carries it. Attempts of one send (one
//! client id) share a claim; a failed attempt releases only the claims it took itself, and
//! none once a message of that client id is stored (another attempt stored it with them) or
//! when that cannot be told; the attempt that stores the message claims again the files it
//! found held by another (which may have released them in between), and an attempt answered as
//! a repeat gives back what it took that the stored message does not carry (a retry naming
//! other files). A send without a client id whose failure leaves it unknown
//! whether the message was stored releases its claim: a later send may then carry the same
//! file again (it was this sender's anyway); nothing is ever shown to a reader who could not
//! see it.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::adapters::clock::Clock;
use crate::adapters::objects::embedded::EmbeddedObjects;
use crate::adapters::objects::{ObjectKey, Objects};
use crate::attachments::{
    self, Attachment, AttachmentRules, DOWNLOAD_LINK_SECONDS, DeclaredAttachment, NewUpload, UNATTACHED_HOURS,
    UPLOAD_LINK_SECONDS, Upload, UploadAnswer, UploadLink,
};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId, UserId};
use crate::store::uploads::{ClaimRefused, Claimed, Unattached};

/// Where attachments are stored and what may be uploaded.
#[derive(Debug, Clone)]
pub struct AttachmentSettings {
    pub objects: Objects,
    /// The embedded store, when it is the one: this binary serves its links.
    pub embedded: Option<EmbeddedObjects>,
    pub rules: AttachmentRules,
    /// Where link expiries are counted from (tests move it to hand out expired links).
    pub clock: Arc<dyn Clock>,
}

/// The uploads a send attempt named, as checked and claimed.
#[derive(Debug, Default)]
pub(crate) struct ClaimedFiles {
    /// Every one, in the order named: what the message carries.
    pub files: Vec<Attachment>,
    /// Those this attempt claimed itself; the others it found held by another attempt of the
    /// same send (one client id), which alone may release them.
    pub taken: Vec<Attachment>,
}

/// Most unattached uploads one housekeeping run deletes.
const EXPIRE_BATCH: usize = 500;

/// Attachments: upload links, the claims sends make on them, copies and removal. Holds what it
/// uses: the store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Files {
    pub(crate) store: crate::store::Store,
    pub(crate) attachments: Option<std::sync::Arc<crate::service::attachments::AttachmentSettings>>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
}

impl Files {
    /// The embedded object store whose links this binary serves, if it is the one.
    pub fn embedded_objects(&self) -> Option<&EmbeddedObjects> {
        self.attachments.as_ref()?.embedded.as_ref()
    }

    /// The time by the service's clock, which the embedded object store's links are signed
    /// and checked at.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.store.now()
    }

    /// The largest upload allowed, when attachments are configured.
    pub fn attachment_max_bytes(&self) -> Option<u64> {
        Some(self.attachments.as_ref()?.rules.max_bytes)
    }

    fn attachment_settings(&self) -> Result<&AttachmentSettings> {
        self.attachments
            .as_deref()
            .ok_or_else(|| Error::Unavailable("attachments are not configured on this server".into()))
    }

    /// `createUpload`: a member declares a file; the answer is a link to upload it with (for
    /// at most five minutes) and the attachment id a send names.
    pub async fn create_upload(&self, who: &Principal, room: &RoomId, input: NewUpload) -> Result<UploadAnswer> {
        let access = self.access.access(room, &who.user_id).await?;
        let settings = self.attachment_settings()?;
        settings.rules.check(&input)?;
        crate::messages::checks::before_limits(&access, self.store.now())?;
        self.limiter.check_user_limit(&who.user_id).await?;
        self.limiter.check_may_upload(&access).await?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let key = attachments::object_key(room, &who.user_id, &id, &input.name);
        let object = ObjectKey::parse(&key)?;
        let upload = Upload {
            id: id.clone(),
            room_id: room.clone(),
            user_id: who.user_id.clone(),
            name: input.name.clone(),
            mime: input.mime.clone(),
            size: input.size,
            key,
            created_at: crate::store::stored_time(self.store.now()),
            claimed_by: None,
        };
        self.store.uploads.insert_upload(&upload).await?;
        let expires = settings.clock.now() + Duration::seconds(UPLOAD_LINK_SECONDS);
        let link = settings.objects.upload_link(&object, &input.mime, expires).await?;
        Ok(UploadAnswer {
            upload: UploadLink {
                method: link.method,
                url: link.url,
                headers: link.headers.into_iter().collect::<BTreeMap<_, _>>(),
            },
            attachment: DeclaredAttachment {
                id,
                name: input.name,
                mime: input.mime,
                size: input.size,
            },
        })
    }

    /// The download redirect: for a member, a link of the store valid for 60 seconds that
    /// answers with `Content-Disposition: attachment` and the declared type.
    pub async fn attachment_link(&self, who: &Principal, room: &RoomId, id: &str) -> Result<String> {
        self.access.access(room, &who.user_id).await?;
        let settings = self.attachment_settings()?;
        let missing = || Error::not_found("attachment not found");
        let upload = self.store.uploads.upload(room, id).await?.ok_or_else(missing)?;
        // Until a message carries it, an upload is its uploader's alone.
        if upload.claimed_by.is_none() && upload.user_id != who.user_id {
            return Err(missing());
        }
        let object = ObjectKey::parse(&upload.key)?;
        let expires = settings.clock.now() + Duration::seconds(DOWNLOAD_LINK_SECONDS);
        settings
            .objects
            .download_url(&object, &upload.mime, &attachments::safe_name(&upload.name), expires)
            .await
    }

    /// The thumbnail redirect: for a member, a link of the store valid for 60 seconds to the
    /// thumbnail of an image a message carries (`service::thumbnails`); 404 until it is made,
    /// and for a file that gets none.
    pub async fn thumbnail_link(&self, who: &Principal, room: &RoomId, id: &str) -> Result<String> {
        self.access.access(room, &who.user_id).await?;
        let settings = self.attachment_settings()?;
        let missing = || Error::not_found("thumbnail not found");
        let upload = self.store.uploads.upload(room, id).await?.ok_or_else(missing)?;
        if upload.claimed_by.is_none() {
            return Err(missing());
        }
        let object = ObjectKey::parse(&attachments::thumbnail_key(&upload.key))?;
        let made = settings.objects.head(&object).await?.ok_or_else(missing)?;
        let expires = settings.clock.now() + Duration::seconds(DOWNLOAD_LINK_SECONDS);
        settings
            .objects
            .download_url(&object, &made.mime, "thumbnail", expires)
            .await
    }

    /// The claim a send makes on the uploads it names: its client id when it has one, so a
    /// retry of the same send finds its own claim.
    pub(crate) fn attachment_claim(user: &UserId, client_id: Option<&ClientId>) -> String {
        match client_id {
            Some(client_id) => format!("send:{}:{}", attachments::user_segment(user), client_id.as_str()),
            None => format!("send:{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// Checks each upload a send names and claims it for this send (see the module notes);
    /// refused as a whole if any one is refused, releasing what it claimed. A file found
    /// larger, smaller or of another type than declared is deleted at once: no send can ever
    /// carry it, and Blob Storage's upload link cannot cap what is uploaded.
    pub(crate) async fn claim_attachments(
        &self,
        who: &UserId,
        room: &RoomId,
        ids: &[String],
        claim: &str,
        client_id: Option<&ClientId>,
    ) -> Result<ClaimedFiles> {
        attachments::check_ids(ids)?;
        let mut claimed = ClaimedFiles::default();
        if ids.is_empty() {
            return Ok(claimed);
        }
        let settings = self.attachment_settings()?;
        let outcome = async {
            for id in ids {
                let upload = self.store.uploads.upload(room, id).await?;
                let stored = match &upload {
                    Some(upload) => settings.objects.head(&ObjectKey::parse(&upload.key)?).await?,
                    None => None,
                };
                let checked = attachments::check_for_send(
                    id,
                    upload.as_ref(),
                    stored.as_ref().map(|s| (s.size, s.mime.as_str())),
                    who,
                    claim,
                );
                if let (Err(Error::Validation(_)), Some(upload)) = (&checked, &upload) {
                    self.discard_mismatched(upload).await;
                }
                checked?;
                let upload = upload.expect("checked above");
                match self.store.uploads.claim_upload(room, id, Some(claim), None).await? {
                    Ok(how) => {
                        if how == Claimed::Now {
                            claimed.taken.push(upload.attachment());
                        }
                        claimed.files.push(upload.attachment());
                    }
                    Err(ClaimRefused::Missing) => return Err(Error::not_found(format!("attachment {id} not found"))),
                    Err(ClaimRefused::Taken) => {
                        return Err(Error::Conflict(format!(
                            "attachment {id} is already on another message"
                        )));
                    }
                }
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => Ok(claimed),
            Err(e) => {
                self.release_attachments(room, &claimed.taken, claim, who, client_id)
                    .await;
                Err(e)
            }
        }
    }

    /// Deletes the object of an upload whose bytes differ from its declaration (its row stays
    /// until it expires unattached, so a link still valid may upload the right file). Only an
    /// upload no send holds: a held one's object is a message's. Logged, never failing the send.
    async fn discard_mismatched(&self, upload: &Upload) {
        let Some(settings) = self.attachments.as_deref() else {
            return;
        };
        if upload.claimed_by.is_some() {
            return;
        }
        let deleted = async { settings.objects.delete(&ObjectKey::parse(&upload.key)?).await };
        if let Err(e) = deleted.await {
            tracing::warn!(room = %upload.room_id, attachment = %upload.id, error = %e, "could not delete a mismatched upload");
        }
    }

    /// Takes back the claims a failed send attempt took itself (`taken`: never one it found
    /// held by another attempt of the same send). With a client id, not if a message of that
    /// client id is stored — another attempt of the same send stored it with these files — or
    /// if that cannot be told. Logged, never failing: an upload left claimed is only one its
    /// uploader cannot attach again.
    pub(crate) async fn release_attachments(
        &self,
        room: &RoomId,
        taken: &[Attachment],
        claim: &str,
        sender: &UserId,
        client_id: Option<&ClientId>,
    ) {
        if taken.is_empty() {
            return;
        }
        if let Some(client_id) = client_id {
            match self.store.messages.sent_with_client_id(room, sender, client_id).await {
                Ok(None) => {}
                Ok(Some(_)) => return,
                Err(e) => {
                    tracing::warn!(%room, error = %e, "could not tell whether a send was stored; its attachments stay claimed");
                    return;
                }
            }
        }
        self.give_back(room, taken, claim).await
    }

    /// Releases `claim` on `files`, known to be on no message. Logged, never failing.
    pub(crate) async fn give_back(&self, room: &RoomId, files: &[Attachment], claim: &str) {
        for attachment in files {
            if let Err(e) = self
                .store
                .uploads
                .release_upload(room, &attachment.id, claim, self.store.now())
                .await
            {
                tracing::warn!(%room, attachment = %attachment.id, error = %e, "could not release an attachment");
            }
        }
    }

    /// After a send stored its message: claims again the files it found held by another
    /// attempt of the same send (one client id) rather than claiming them itself, since that
    /// attempt may have failed and released them before this one stored the message. Logged,
    /// never failing: the message is stored.
    pub(crate) async fn keep_claims(&self, room: &RoomId, files: &[Attachment], taken: &[Attachment], claim: &str) {
        for file in files.iter().filter(|f| !taken.iter().any(|t| t.id == f.id)) {
            match self.store.uploads.claim_upload(room, &file.id, Some(claim), None).await {
                Ok(Ok(_)) => {}
                Ok(Err(refused)) => {
                    tracing::warn!(%room, attachment = %file.id, ?refused, "a stored message's attachment was claimed again by another send")
                }
                Err(e) => {
                    tracing::warn!(%room, attachment = %file.id, error = %e, "could not keep a stored message's attachment claimed")
                }
            }
        }
    }

    /// Copies a message's files into `target` as the forwarder's own, claimed for the copy.
    pub(crate) async fn copy_attachments(
        &self,
        who: &UserId,
        source_room: &RoomId,
        target: &RoomId,
        files: &[Attachment],
        claim: &str,
    ) -> Result<Vec<Attachment>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let settings = self.attachment_settings()?;
        let mut copies = Vec::new();
        // An object copied whose row is not written yet.
        let mut pending: Option<ObjectKey> = None;
        let outcome = async {
            for file in files {
                let source = self
                    .store
                    .uploads
                    .upload(source_room, &file.id)
                    .await?
                    .ok_or_else(|| Error::Conflict(format!("attachment {} is gone", file.id)))?;
                let id = uuid::Uuid::new_v4().simple().to_string();
                let key = attachments::object_key(target, who, &id, &source.name);
                let copy = Upload {
                    id,
                    room_id: target.clone(),
                    user_id: who.clone(),
                    key,
                    created_at: crate::store::stored_time(self.store.now()),
                    claimed_by: Some(claim.to_owned()),
                    ..source.clone()
                };
                let to = ObjectKey::parse(&copy.key)?;
                // Before the object: should the copy be left with no row (a crash, or a failed
                // write and then a failed delete), housekeeping finds it by its key a day later.
                self.store.uploads.index_upload(&copy, self.store.now()).await?;
                pending = Some(to.clone());
                if !settings.objects.copy(&ObjectKey::parse(&source.key)?, &to).await? {
                    return Err(Error::Conflict(format!("attachment {} is gone", file.id)));
                }
                self.store.uploads.insert_claimed_upload(&copy).await?;
                pending = None;
                copies.push(copy.attachment());
            }
            Ok(())
        }
        .await;
        if let Err(e) = outcome {
            // Nothing refers to the copies made so far: they go, rows and objects.
            self.remove_attachments(target, &copies).await;
            if let Some(key) = pending
                && let Err(e) = settings.objects.delete(&key).await
            {
                tracing::warn!(room = %target, error = %e, "could not delete a copy of a failed forward");
            }
            return Err(e);
        }
        Ok(copies)
    }

    /// Deletes files (their rows, then their objects): a tombstone's, a purged message's. The
    /// row goes first, since without it no link is handed out: a failure in between leaves an
    /// object nobody can reach, never a file still downloadable — and a housekeeping row
    /// written before, which finds the object a day later by its key and deletes it. Logged,
    /// never failing the operation that removed their message.
    pub(crate) async fn remove_attachments(&self, room: &RoomId, files: &[Attachment]) {
        let Some(settings) = self.attachments.as_deref() else {
            return;
        };
        for file in files {
            let removed = async {
                let upload = self.store.uploads.upload(room, &file.id).await?;
                if let Some(upload) = &upload
                    && let Err(e) = self.store.uploads.index_upload(upload, self.store.now()).await
                {
                    // The file goes all the same; only a failure of its object's delete as
                    // well would then leave that object for good.
                    tracing::warn!(%room, attachment = %file.id, error = %e, "could not write a removed file's housekeeping row");
                }
                self.store.uploads.delete_upload(room, &file.id).await?;
                if let Some(upload) = upload {
                    delete_objects(settings, &upload.key).await?;
                }
                Ok::<(), Error>(())
            };
            if let Err(e) = removed.await {
                tracing::warn!(%room, attachment = %file.id, error = %e, "could not remove an attachment");
            }
        }
    }

    /// Deletes the files of messages the retention purge is about to remove: each object,
    /// then its upload row, failing on the first failure so that the purge keeps the messages
    /// (which still name the files) for its next run. Object first: a row without its object
    /// is only a file that answers 404, while an object without its row is one nothing would
    /// ever delete.
    pub(crate) async fn purge_attachments(&self, room: &RoomId, files: &[Attachment]) -> Result<()> {
        let Some(settings) = self.attachments.as_deref() else {
            return Ok(());
        };
        for file in files {
            if let Some(upload) = self.store.uploads.upload(room, &file.id).await? {
                delete_objects(settings, &upload.key).await?;
                self.store.uploads.delete_upload(room, &file.id).await?;
                // A thumbnail stored in between (its maker found the row still there) goes too.
                let thumbnail = attachments::thumbnail_key(&upload.key);
                settings.objects.delete(&ObjectKey::parse(&thumbnail)?).await?;
            }
        }
        Ok(())
    }

    /// Deletes every object of a room (room deletion; its rows go with its partitions).
    pub(crate) async fn remove_room_objects(&self, room: &RoomId) -> Result<()> {
        match self.attachments.as_deref() {
            Some(settings) => settings.objects.delete_prefix(&attachments::room_prefix(room)).await,
            None => Ok(()),
        }
    }

    /// Housekeeping: uploads handed out over a day ago and never attached are deleted, with
    /// their objects; and so is an object whose upload row is gone by then — its link (valid
    /// for minutes) was used after its message or room was deleted, and nothing else refers to
    /// it. Returns how many uploads.
    pub(crate) async fn expire_unattached_uploads(&self, now: DateTime<Utc>) -> Result<usize> {
        let Some(settings) = self.attachments.as_deref() else {
            return Ok(0);
        };
        let mut expired = 0;
        for row in self
            .store
            .uploads
            .uploads_created_before(now - Duration::hours(UNATTACHED_HOURS), EXPIRE_BATCH)
            .await?
        {
            match self.store.uploads.upload(&row.room, &row.id).await? {
                // Its message owns it now (and deletes it with itself); a claim given back
                // later writes a new row (`Store::release_upload`).
                Some(upload) if upload.claimed_by.is_some() => {}
                Some(upload) => {
                    // The row first, on the condition that no send claimed it meanwhile (that
                    // send checked the object, which must then stay); the index row stays until
                    // the object is gone, so a failure in between is finished next run.
                    if self.store.uploads.delete_unattached_upload(&row.room, &row.id).await? == Unattached::Deleted {
                        delete_objects(settings, &upload.key).await?;
                        expired += 1;
                    }
                }
                None => {
                    if let Some(key) = &row.key {
                        delete_objects(settings, key).await?;
                    }
                }
            }
            self.store.uploads.delete_upload_index(&row.row_key).await?;
        }
        Ok(expired)
    }
}

/// Deletes the objects of the upload stored at `key`: its thumbnail, if one was made, then the
/// file.
async fn delete_objects(settings: &AttachmentSettings, key: &str) -> Result<()> {
    settings
        .objects
        .delete(&ObjectKey::parse(&attachments::thumbnail_key(key))?)
        .await?;
    settings.objects.delete(&ObjectKey::parse(key)?).await
}
