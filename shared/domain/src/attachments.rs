//! Attachments: files a member uploads straight to the object store with a link the server
//! signed, then names in a message. The rules live here: what may be uploaded (a type on the
//! allow-list, a size within the maximum), where it is stored (the key
//! `<room>/<user>/<id>/<safe name>`), and what a send checks of each attachment it names (an
//! upload of this sender in this room, uploaded with the declared size and type, used by no
//! other message). The store and the object store are asked by the service; this module only
//! decides.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};

/// Most attachments on one message.
pub const MAX_PER_MESSAGE: usize = 10;
/// Longest file name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

crate::text_field!(
    /// A file's name in the document: what `AttachmentRules::check` accepts.
    UploadName, 1, MAX_NAME_CHARS, crate::text::ONE_LINE
);
/// How long an upload link lasts, in seconds (at most 5 minutes).
pub const UPLOAD_LINK_SECONDS: i64 = 300;
/// How long a download link lasts, in seconds.
pub const DOWNLOAD_LINK_SECONDS: i64 = 60;
/// How long an upload may stay unattached before housekeeping deletes it, in hours.
pub const UNATTACHED_HOURS: i64 = 24;

/// The types accepted unless configured otherwise: images, PDF and plain text — nothing a
/// browser runs.
pub const DEFAULT_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
];
/// The largest upload unless configured otherwise: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// What may be uploaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRules {
    pub allowed_types: Vec<String>,
    pub max_bytes: u64,
}

impl Default for AttachmentRules {
    fn default() -> AttachmentRules {
        AttachmentRules {
            allowed_types: DEFAULT_TYPES.iter().map(|t| (*t).to_owned()).collect(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// What a member declares before uploading.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUpload {
    /// The file's name as shown; stored under a safe form of it.
    #[schema(value_type = UploadName, inline)]
    pub name: String,
    /// Its type, which must be on the allow-list; the upload must carry it as `Content-Type`.
    pub mime: String,
    /// Its exact size in bytes; the send checks the stored object against it.
    pub size: u64,
}

impl AttachmentRules {
    /// The declared upload, checked: a name, a type on the list, a size within the maximum.
    pub fn check(&self, upload: &NewUpload) -> Result<()> {
        let chars = upload.name.chars().count();
        if upload.name.trim().is_empty() || chars > MAX_NAME_CHARS || upload.name.chars().any(char::is_control) {
            return Err(Error::validation(format!(
                "name must be 1-{MAX_NAME_CHARS} characters without control characters"
            )));
        }
        if !self.allowed_types.iter().any(|t| t == &upload.mime) {
            return Err(Error::validation(format!(
                "type {:?} is not allowed; allowed: {}",
                upload.mime,
                self.allowed_types.join(", ")
            )));
        }
        if upload.size == 0 {
            return Err(Error::validation("size must be at least 1 byte"));
        }
        if upload.size > self.max_bytes {
            return Err(Error::PayloadTooLarge(format!(
                "the file is {} bytes; at most {} are allowed",
                upload.size, self.max_bytes
            )));
        }
        Ok(())
    }
}

/// A file name made safe for a key and a header: letters, digits, `.`, `_` and `-`, every
/// other character `_`, no leading dot, at most 100 characters; never empty.
pub fn safe_name(name: &str) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            true => c,
            false => '_',
        })
        .collect();
    safe = safe.trim_start_matches('.').chars().take(100).collect();
    match safe.is_empty() {
        true => "file".to_owned(),
        false => safe,
    }
}

/// The longest user segment: with the room, the id and the safe name, a key stays within the
/// 255 bytes a file name may have, so the embedded store can keep each object in one file.
pub const MAX_USER_SEGMENT: usize = 64;

/// A user id as one key segment: letters, digits and `-` stay; every other byte is `_` and
/// two hex digits (reversible). One longer than [`MAX_USER_SEGMENT`] is the SHA-256 of the id
/// in hex instead: still one per user, and short.
pub fn user_segment(user: &UserId) -> String {
    let mut segment = String::new();
    for byte in user.as_str().bytes() {
        match byte.is_ascii_alphanumeric() || byte == b'-' {
            true => segment.push(byte as char),
            false => segment.push_str(&format!("_{byte:02x}")),
        }
    }
    if segment.len() > MAX_USER_SEGMENT {
        use sha2::{Digest, Sha256};
        return Sha256::digest(user.as_str().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
    }
    segment
}

/// Where an upload's bytes are stored: `<room>/<user>/<id>/<safe name>`, so one room's
/// objects share a prefix and a key names who uploaded it.
pub fn object_key(room: &RoomId, user: &UserId, id: &str, name: &str) -> String {
    format!("{room}/{}/{id}/{}", user_segment(user), safe_name(name))
}

/// The prefix of every object of a room.
pub fn room_prefix(room: &RoomId) -> String {
    format!("{room}/")
}

/// An attachment as a message carries it. `url` is tabletalk's own, stable: it checks the
/// reader's membership and redirects to a short-lived signed link of the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Attachment {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
    pub url: String,
    /// For an image whose thumbnail is made (shortly after the send): its size and where its
    /// thumbnail is, so a client reserves the image's box before anything loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInfo>,
}

/// An image attachment's own size, and its thumbnail's stable URL (membership-checked, as the
/// file's own): the image scaled to fit [`THUMBNAIL_EDGE`] pixels a side, never enlarged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    pub width: u32,
    pub height: u32,
    pub thumbnail_url: String,
}

/// The longest side of a thumbnail, in pixels.
pub const THUMBNAIL_EDGE: u32 = 320;
/// The longest side of an image a thumbnail is made of: a larger one (a decompression bomb's
/// header says so before any pixel is decoded) gets none.
pub const MAX_IMAGE_EDGE: u32 = 12_000;
/// The most pixels of an image a thumbnail is made of (a 48-megapixel phone photo has fewer).
pub const MAX_IMAGE_PIXELS: u64 = 50_000_000;
/// The most bytes a decoded image may take (its pixels, as the decoder reports them).
pub const MAX_DECODE_BYTES: u64 = 4 * MAX_IMAGE_PIXELS;

/// Whether an attachment of type `mime` gets a thumbnail: the image types attachments allow by
/// default, and no other type is ever decoded.
pub fn is_thumbnailed(mime: &str) -> bool {
    matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp")
}

/// The object key of the thumbnail of the upload stored at `key` (`<room>/<user>/<id>/<name>`):
/// `<room>/<user>/<id>.thumbnail`, beside the upload's own folder, so no upload's name can be it
/// and deleting the room's prefix deletes it too.
pub fn thumbnail_key(key: &str) -> String {
    let folder = key.rsplit_once('/').map_or(key, |(folder, _)| folder);
    format!("{folder}.thumbnail")
}

/// The stable URL of an attachment's thumbnail.
pub fn thumbnail_url(room: &RoomId, id: &str) -> String {
    format!("{}/thumbnail", attachment_url(room, id))
}

/// The stable download URL of an attachment.
pub fn attachment_url(room: &RoomId, id: &str) -> String {
    format!("/api/rooms/{room}/attachments/{id}")
}

/// An upload as the store keeps it, from the link being handed out until it is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub id: String,
    pub room_id: RoomId,
    pub user_id: UserId,
    pub name: String,
    pub mime: String,
    pub size: u64,
    pub key: String,
    pub created_at: DateTime<Utc>,
    /// Who claimed it: the send that attached it (`None` while unattached).
    pub claimed_by: Option<String>,
}

impl Upload {
    pub fn attachment(&self) -> Attachment {
        Attachment {
            id: self.id.clone(),
            name: self.name.clone(),
            mime: self.mime.clone(),
            size: self.size,
            url: attachment_url(&self.room_id, &self.id),
            image: None,
        }
    }
}

/// How to upload: the request a client makes with no further help from tabletalk.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadLink {
    /// `PUT`.
    pub method: String,
    pub url: String,
    /// Headers to send with the bytes (`Content-Type` among them).
    pub headers: BTreeMap<String, String>,
}

/// The answer to `createUpload`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadAnswer {
    pub upload: UploadLink,
    pub attachment: DeclaredAttachment,
}

/// The attachment a send names by `id`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeclaredAttachment {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
}

/// The ids a send names: at most [`MAX_PER_MESSAGE`], none twice.
pub fn check_ids(ids: &[String]) -> Result<()> {
    if ids.len() > MAX_PER_MESSAGE {
        return Err(Error::validation(format!(
            "a message carries at most {MAX_PER_MESSAGE} attachments"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if !ids.iter().all(|id| seen.insert(id)) {
        return Err(Error::validation("an attachment is named twice"));
    }
    Ok(())
}

/// What a send checks of one attachment it names: an upload (`upload`) of this sender in this
/// room, not claimed by another send, whose stored object (`stored`: size and type, `None`
/// when nothing was uploaded) has the declared size and type. Another user's or another
/// room's upload answers exactly as a missing one.
pub fn check_for_send(
    id: &str,
    upload: Option<&Upload>,
    stored: Option<(u64, &str)>,
    sender: &UserId,
    claim: &str,
) -> Result<()> {
    let missing = || Error::not_found(format!("attachment {id} not found"));
    let upload = upload.ok_or_else(missing)?;
    if &upload.user_id != sender {
        return Err(missing());
    }
    if upload.claimed_by.as_deref().is_some_and(|c| c != claim) {
        return Err(Error::Conflict(format!(
            "attachment {id} is already on another message"
        )));
    }
    let (size, mime) = stored.ok_or_else(|| Error::not_found(format!("attachment {id} was never uploaded")))?;
    if size != upload.size {
        return Err(Error::validation(format!(
            "attachment {id} is {size} bytes, not the {} declared",
            upload.size
        )));
    }
    if mime != upload.mime {
        return Err(Error::validation(format!(
            "attachment {id} was uploaded as {mime:?}, not the {:?} declared",
            upload.mime
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(name: &str, mime: &str, size: u64) -> NewUpload {
        NewUpload {
            name: name.into(),
            mime: mime.into(),
            size,
        }
    }

    #[test]
    fn an_upload_needs_an_allowed_type_and_a_size_within_the_maximum() {
        let rules = AttachmentRules::default();
        assert!(rules.check(&upload("a.png", "image/png", 10)).is_ok());
        assert!(matches!(
            rules.check(&upload("a.html", "text/html", 10)),
            Err(Error::Validation(_))
        ));
        assert!(matches!(
            rules.check(&upload("a.png", "image/png", DEFAULT_MAX_BYTES + 1)),
            Err(Error::PayloadTooLarge(_))
        ));
        assert!(matches!(
            rules.check(&upload("a.png", "image/png", 0)),
            Err(Error::Validation(_))
        ));
        assert!(matches!(
            rules.check(&upload(" ", "image/png", 1)),
            Err(Error::Validation(_))
        ));
    }

    #[test]
    fn a_safe_name_keeps_only_safe_characters() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name("photo été.png"), "photo__t_.png");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name("ok-name_1.pdf"), "ok-name_1.pdf");
    }

    #[test]
    fn a_long_user_id_makes_a_short_segment() {
        let long = UserId::parse(&"é".repeat(200)).unwrap();
        let segment = user_segment(&long);
        assert_eq!(segment.len(), MAX_USER_SEGMENT);
        assert_ne!(segment, user_segment(&UserId::parse(&"è".repeat(200)).unwrap()));
    }

    #[test]
    fn a_user_segment_is_reversible_and_safe() {
        let user = UserId::parse("a.b|c_d").unwrap();
        assert_eq!(user_segment(&user), "a_2eb_7cc_5fd");
    }
}
