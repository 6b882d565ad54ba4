//! Upload rows: `upload:<id>` in the room's `MessagesMetadata` partition, one per upload link
//! handed out, with what was declared and whether a send claimed it; and one row per upload in
//! the `Housekeeping` partition `uploads` (`<created, Unix ms>:<room>:<id>`), so housekeeping
//! finds uploads left unattached in one partition read, oldest first (a claim given back writes
//! another, dated at the release: `release_upload`). That row also keeps the
//! object's key, so an object uploaded after its upload row went (its link used after its
//! message or room was deleted) is still found and deleted; removing a file writes one again
//! first, for an object whose delete then fails, and a forward writes one for each copy before
//! copying its object.

use std::ops::Bound;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::schema::{UPLOADS_PARTITION, upload_index_key, upload_key};
use tabletalk_domain::attachments::Upload;
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_tables::conditional::{Attempt, retry_lost_races};
use tabletalk_tables::{Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

fn upload_row(upload: &Upload) -> Entity {
    let mut entity = Entity::new(upload.room_id.as_str(), upload_key(&upload.id))
        .with("userId", Value::String(upload.user_id.to_string()))
        .with("name", Value::String(upload.name.clone()))
        .with("mime", Value::String(upload.mime.clone()))
        .with("size", Value::Int64(upload.size as i64))
        .with("key", Value::String(upload.key.clone()))
        .with("createdAt", Value::datetime(upload.created_at));
    if let Some(claim) = &upload.claimed_by {
        entity.set("claimedBy", Value::String(claim.clone()));
    }
    entity
}

fn parse_upload(room: &RoomId, id: &str, entity: &Entity) -> Result<Upload> {
    let broken = || Error::Internal(format!("upload row {room}/{id} is broken"));
    Ok(Upload {
        id: id.to_owned(),
        room_id: room.clone(),
        user_id: UserId::parse(entity.str("userId").ok_or_else(broken)?).map_err(|_| broken())?,
        name: entity.str("name").ok_or_else(broken)?.to_owned(),
        mime: entity.str("mime").ok_or_else(broken)?.to_owned(),
        size: entity
            .i64("size")
            .and_then(|s| u64::try_from(s).ok())
            .ok_or_else(broken)?,
        key: entity.str("key").ok_or_else(broken)?.to_owned(),
        created_at: entity.datetime("createdAt").ok_or_else(broken)?,
        claimed_by: entity.str("claimedBy").map(str::to_owned),
    })
}

/// An upload housekeeping may find unattached.
#[derive(Debug, Clone)]
pub struct UploadIndexRow {
    pub room: RoomId,
    pub id: String,
    pub row_key: String,
    /// The object's key (absent on rows written before it was kept).
    pub key: Option<String>,
}

/// A claim that lost to another send's, or found no upload.
#[derive(Debug)]
pub enum ClaimRefused {
    Missing,
    Taken,
}

/// How a claim succeeded: written now, or found already held by the same claim (another
/// attempt of the same send took it, and only that attempt may give it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    Now,
    Already,
}

/// What deleting an upload as unattached found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unattached {
    /// It was unclaimed, and its row is deleted.
    Deleted,
    /// A send holds it: it stays.
    Claimed,
    /// There is no row.
    Missing,
}

/// Upload links and the claims sends make on them. Holds the tables it uses and, as fields, the
/// surfaces it calls.
#[derive(Debug, Clone)]
pub struct UploadStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl UploadStore {
    /// Records an upload link handed out: its row, then its housekeeping row.
    pub async fn insert_upload(&self, upload: &Upload) -> Result<()> {
        self.tables.insert(&self.schema.metadata, &upload_row(upload)).await?;
        self.index_upload(upload, upload.created_at).await
    }

    /// The housekeeping row that finds `upload` a day after `since`: deleted then if it is
    /// unattached, and its object deleted by the key the row keeps if its upload row is gone
    /// (a file removed whose object's delete failed).
    pub async fn index_upload(&self, upload: &Upload, since: DateTime<Utc>) -> Result<()> {
        let index = Entity::new(UPLOADS_PARTITION, upload_index_key(since, &upload.room_id, &upload.id))
            .with("key", Value::String(upload.key.clone()));
        self.tables
            .upsert(&self.schema.housekeeping, &index, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Gives back an upload `claim` holds, unattached again as of `now`. Housekeeping forgets
    /// an upload's row once it finds it claimed, so a release (a cancelled or refused
    /// scheduled item, a failed send) writes a new one first: the upload is deleted a day
    /// later unless a send claims it meanwhile. A failure between the two leaves a row that
    /// finds the upload still held and goes.
    pub async fn release_upload(
        &self,
        room: &RoomId,
        id: &str,
        claim: &str,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Claimed, ClaimRefused>> {
        if let Some(upload) = self.upload(room, id).await?
            && upload.claimed_by.as_deref() == Some(claim)
        {
            self.index_upload(&upload, now).await?;
        }
        self.claim_upload(room, id, None, Some(claim)).await
    }

    pub async fn upload(&self, room: &RoomId, id: &str) -> Result<Option<Upload>> {
        if !is_upload_id(id) {
            return Ok(None);
        }
        let row = self
            .tables
            .get(&self.schema.metadata, room.as_str(), &upload_key(id))
            .await?;
        row.map(|row| parse_upload(room, id, &row)).transpose()
    }

    /// Marks an upload as claimed by `claim`, unless another claim holds it (a repeat of the
    /// same claim succeeds). Conditional on the row as read, so of two sends naming one upload
    /// exactly one wins.
    pub async fn claim_upload(
        &self,
        room: &RoomId,
        id: &str,
        claim: Option<&str>,
        from: Option<&str>,
    ) -> Result<std::result::Result<Claimed, ClaimRefused>> {
        let attempt = move || async move {
            let Some(row) = self
                .tables
                .get(&self.schema.metadata, room.as_str(), &upload_key(id))
                .await?
            else {
                return Ok(Attempt::Done(Err(ClaimRefused::Missing)));
            };
            let current = row.str("claimedBy");
            if current == claim {
                return Ok(Attempt::Done(Ok(Claimed::Already)));
            }
            if current != from {
                return Ok(Attempt::Done(Err(ClaimRefused::Taken)));
            }
            let mut upload = parse_upload(room, id, &row)?;
            upload.claimed_by = claim.map(str::to_owned);
            let if_match = row.etag().cloned().map_or(IfMatch::Any, IfMatch::Etag);
            match self
                .tables
                .update(
                    &self.schema.metadata,
                    &upload_row(&upload),
                    UpdateMode::Replace,
                    &if_match,
                )
                .await
            {
                Ok(_) => Ok(Attempt::Done(Ok(Claimed::Now))),
                Err(e) if e.is(ErrorKind::PreconditionFailed) => Ok(Attempt::LostRace),
                Err(e) if e.is(ErrorKind::NotFound) => Ok(Attempt::Done(Err(ClaimRefused::Missing))),
                Err(e) => Err(e.into()),
            }
        };
        retry_lost_races::<_, super::error::Error, _, _>(attempt)
            .await?
            .ok_or_else(|| Error::Unavailable(format!("upload {id} is changing too fast to claim")).into())
    }

    /// Records a copy the server made (a forward), already claimed.
    pub async fn insert_claimed_upload(&self, upload: &Upload) -> Result<()> {
        self.tables.insert(&self.schema.metadata, &upload_row(upload)).await?;
        Ok(())
    }

    pub async fn delete_upload(&self, room: &RoomId, id: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.metadata, room.as_str(), &upload_key(id)).await
    }

    /// Deletes an upload's row if no send holds it, conditional on the row as read: a claim
    /// landing meanwhile keeps it (the send that claimed it checked its object, which stays).
    pub async fn delete_unattached_upload(&self, room: &RoomId, id: &str) -> Result<Unattached> {
        let attempt = move || async move {
            let Some(row) = self
                .tables
                .get(&self.schema.metadata, room.as_str(), &upload_key(id))
                .await?
            else {
                return Ok(Attempt::Done(Unattached::Missing));
            };
            if row.str("claimedBy").is_some() {
                return Ok(Attempt::Done(Unattached::Claimed));
            }
            let if_match = row.etag().cloned().map_or(IfMatch::Any, IfMatch::Etag);
            match self
                .tables
                .delete(&self.schema.metadata, room.as_str(), &upload_key(id), &if_match)
                .await
            {
                Ok(()) => Ok(Attempt::Done(Unattached::Deleted)),
                Err(e) if e.is(ErrorKind::PreconditionFailed) => Ok(Attempt::LostRace),
                Err(e) if e.is(ErrorKind::NotFound) => Ok(Attempt::Done(Unattached::Missing)),
                Err(e) => Err(e.into()),
            }
        };
        retry_lost_races::<_, super::error::Error, _, _>(attempt)
            .await?
            .ok_or_else(|| Error::Unavailable(format!("upload {id} is changing too fast to expire")).into())
    }

    /// Uploads handed out before `cutoff`, oldest first, at most `limit`.
    pub async fn uploads_created_before(&self, cutoff: DateTime<Utc>, limit: usize) -> Result<Vec<UploadIndexRow>> {
        let query = RangeQuery::partition(UPLOADS_PARTITION, limit.min(1000))
            .to(Bound::Excluded(format!("{:013}", cutoff.timestamp_millis().max(0))));
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, limit)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut parts = row.row_key.splitn(3, ':');
                let (_, room, id) = (parts.next()?, parts.next()?, parts.next()?);
                Some(UploadIndexRow {
                    room: RoomId::parse(room).ok()?,
                    id: id.to_owned(),
                    row_key: row.row_key.clone(),
                    key: row.str("key").map(str::to_owned),
                })
            })
            .collect())
    }

    pub async fn delete_upload_index(&self, row_key: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.housekeeping, UPLOADS_PARTITION, row_key).await
    }
}

/// An upload id is 32 lowercase hex digits (a UUID without hyphens).
pub fn is_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
