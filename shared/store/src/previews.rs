//! Link previews as rows: a message's preview is a companion row (`<message key>:p` in
//! `MessagesMetadata`, read in the same range read as its reactions and deleted with them); a
//! preview still to be fetched is a row in `Housekeeping`'s `previews` partition; a fetched
//! URL's result is a row in its `linkcache` partition (see `schema`).
//!
//! A removal is a row too (`removed`): a preview is attached only where no row exists yet
//! (create-only), so a fetch finishing after the author removed the preview never brings it
//! back.

use std::ops::Bound;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::schema::{
    LINK_CACHE_PARTITION, PREVIEW_JOBS_PARTITION, SWEEP_CURSORS_PARTITION, link_cache_key, preview_job_key, preview_key,
};
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::messages::previews::LinkPreview;
use tabletalk_tables::{Entity, ErrorKind, RangeQuery, UpdateMode, Value};

/// A preview still to be fetched: the message and its first link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewJob {
    pub room: RoomId,
    pub message: MessageKey,
    pub url: String,
    /// When the send recorded it; `None` on a row that lost it.
    pub created_at: Option<DateTime<Utc>>,
}

/// What the cache holds of a URL: its preview (`None`: the fetch gave none) and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedLink {
    pub preview: Option<LinkPreview>,
    pub fetched_at: DateTime<Utc>,
}

/// A preview companion row as read back: the preview, or `None` where its author removed it.
pub fn preview_of(row: &Entity) -> Option<LinkPreview> {
    if row.bool("removed") == Some(true) {
        return None;
    }
    serde_json::from_str(row.str("preview")?).ok()
}

/// Link previews of messages. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct PreviewStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl PreviewStore {
    /// Records that `message`'s link is to be fetched.
    pub async fn put_preview_job(&self, job: &PreviewJob) -> Result<()> {
        let mut row = Entity::new(PREVIEW_JOBS_PARTITION, preview_job_key(&job.room, &job.message))
            .with("url", Value::String(job.url.clone()));
        if let Some(at) = job.created_at {
            row.set("createdAt", Value::datetime(at));
        }
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Up to `max` previews still to be fetched, oldest room and message first by key.
    pub async fn preview_jobs(&self, max: usize) -> Result<Vec<PreviewJob>> {
        let query = RangeQuery::partition(PREVIEW_JOBS_PARTITION, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.housekeeping, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let (room, message) = row.row_key.split_once(':')?;
                Some(PreviewJob {
                    room: RoomId::parse(room).ok()?,
                    message: MessageKey::parse(message)?,
                    url: row.str("url")?.to_owned(),
                    created_at: row.datetime("createdAt"),
                })
            })
            .collect())
    }

    /// Drops a job (done, or given up on); gone already is fine.
    pub async fn clear_preview_job(&self, room: &RoomId, message: &MessageKey) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.housekeeping,
            PREVIEW_JOBS_PARTITION,
            &preview_job_key(room, message),
        )
        .await
    }

    /// The cache's row for `url`, fresh or not (the caller judges its age).
    pub async fn cached_link(&self, url: &str) -> Result<Option<CachedLink>> {
        let Some(row) = self
            .tables
            .get(&self.schema.housekeeping, LINK_CACHE_PARTITION, &link_cache_key(url))
            .await?
        else {
            return Ok(None);
        };
        // Two URLs with one digest are not expected; a row of another URL is no answer.
        if row.str("url") != Some(url) {
            return Ok(None);
        }
        let Some(fetched_at) = row.datetime("fetchedAt") else {
            return Ok(None);
        };
        let preview = row.str("preview").and_then(|p| serde_json::from_str(p).ok());
        Ok(Some(CachedLink { preview, fetched_at }))
    }

    /// Keeps what a fetch of `url` gave.
    pub async fn cache_link(&self, url: &str, cached: &CachedLink) -> Result<()> {
        let mut row = Entity::new(LINK_CACHE_PARTITION, link_cache_key(url))
            .with("url", Value::String(url.to_owned()))
            .with("fetchedAt", Value::datetime(cached.fetched_at));
        if let Some(preview) = &cached.preview {
            row.set(
                "preview",
                Value::String(serde_json::to_string(preview).unwrap_or_default()),
            );
        }
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Deletes the cache's rows fetched before `before`, reading at most `max` rows. Returns
    /// how many went. The partition holds one row per URL fetched within the cache's window
    /// (and those expired since the last run), so a run costs in URLs linked lately, never in
    /// messages.
    ///
    /// A run goes on after the last row the previous one read (a cursor row in
    /// [`SWEEP_CURSORS_PARTITION`]) and starts over once it reached the end: keys are URL
    /// digests, in no order of age, so a run that always read the first `max` rows would
    /// never reach an expired row behind `max` fresh ones, and the cache would grow for good.
    pub async fn expire_link_cache(&self, before: DateTime<Utc>, max: usize) -> Result<usize> {
        let cursor = self
            .tables
            .get(&self.schema.housekeeping, SWEEP_CURSORS_PARTITION, LINK_CACHE_PARTITION)
            .await?
            .and_then(|row| row.str("after").map(str::to_owned));
        let mut query = RangeQuery::partition(LINK_CACHE_PARTITION, 1000);
        if let Some(after) = &cursor {
            query = query.from(Bound::Excluded(after.clone()));
        }
        let (rows, _) = self.tables.query_up_to(&self.schema.housekeeping, &query, max).await?;
        let mut expired = 0;
        for row in rows
            .iter()
            .filter(|row| row.datetime("fetchedAt").is_none_or(|at| at < before))
        {
            crate::delete_if_present(
                &self.tables,
                &self.schema.housekeeping,
                LINK_CACHE_PARTITION,
                &row.row_key,
            )
            .await?;
            expired += 1;
        }
        // A short page reached the end: the next run starts over.
        let next = match rows.len() < max {
            true => None,
            false => rows.last().map(|row| row.row_key.clone()),
        };
        match &next {
            Some(after) if cursor.as_ref() != Some(after) => {
                let row = Entity::new(SWEEP_CURSORS_PARTITION, LINK_CACHE_PARTITION)
                    .with("after", Value::String(after.clone()));
                self.tables
                    .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
                    .await?;
            }
            None if cursor.is_some() => {
                crate::delete_if_present(
                    &self.tables,
                    &self.schema.housekeeping,
                    SWEEP_CURSORS_PARTITION,
                    LINK_CACHE_PARTITION,
                )
                .await?;
            }
            _ => {}
        }
        Ok(expired)
    }

    /// Attaches `preview` to a message unless it has a preview row already (one attached, or
    /// the author's removal). Returns whether it was attached.
    pub async fn attach_preview(&self, room: &RoomId, message: &MessageKey, preview: &LinkPreview) -> Result<bool> {
        let row = Entity::new(room.as_str(), preview_key(message)).with(
            "preview",
            Value::String(serde_json::to_string(preview).unwrap_or_default()),
        );
        match self.tables.insert(&self.schema.metadata, &row).await {
            Ok(_) => Ok(true),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes a message's preview for good: its row becomes a removal, so no later fetch
    /// attaches one.
    pub async fn remove_preview(&self, room: &RoomId, message: &MessageKey) -> Result<()> {
        let row = Entity::new(room.as_str(), preview_key(message)).with("removed", Value::Bool(true));
        self.tables
            .upsert(&self.schema.metadata, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }
}
