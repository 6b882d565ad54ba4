//! Notification claims: one `<message key>:n` row per message in `MessagesMetadata` (so it
//! goes with the message when it is purged), which a notification run claims with a lease,
//! renews while it pushes, and finally marks done.

use chrono::{DateTime, Utc};

use super::Store;
use super::error::Result;
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::storage::{ETag, Entity, ErrorKind, IfMatch, StoreError, UpdateMode, Value};

/// An event's claim row as read.
#[derive(Debug, Clone)]
pub(crate) enum ClaimRow {
    /// No run began.
    Missing,
    /// Processed (rows from before claims existed have no state, and count as processed).
    Done,
    /// A run holds or held it: when it last claimed it, and the row's ETag.
    Claimed {
        at: Option<DateTime<Utc>>,
        etag: Option<ETag>,
    },
}

fn claim_key(message: &MessageKey) -> String {
    format!("{}:n", message.as_str())
}

fn claim_row(room: &RoomId, message: &MessageKey, state: &str, time_name: &str, at: DateTime<Utc>) -> Entity {
    Entity::new(room.as_str(), claim_key(message))
        .with("state", Value::String(state.into()))
        .with(time_name, Value::datetime(at))
}

/// True for the errors of a conditional write that found the row changed or gone: the claim
/// is not (any more) ours.
fn lost(e: &StoreError) -> bool {
    e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound)
}

impl Store {
    pub(crate) async fn claim_row(&self, room: &RoomId, message: &MessageKey) -> Result<ClaimRow> {
        let row = self
            .tables
            .get(&self.schema.metadata, room.as_str(), &claim_key(message))
            .await?;
        Ok(match row {
            None => ClaimRow::Missing,
            Some(row) if row.str("state") != Some("claimed") => ClaimRow::Done,
            Some(row) => ClaimRow::Claimed {
                at: row.datetime("claimedAt"),
                etag: row.etag.clone(),
            },
        })
    }

    /// Claims an event no run has begun: its ETag, or `None` when another run just did.
    pub(crate) async fn insert_claim(
        &self,
        room: &RoomId,
        message: &MessageKey,
        now: DateTime<Utc>,
    ) -> Result<Option<ETag>> {
        let row = claim_row(room, message, "claimed", "claimedAt", now);
        match self.tables.insert(&self.schema.metadata, &row).await {
            Ok(etag) => Ok(Some(etag)),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Claims (or renews) the event whose claim row had `etag`: the new ETag, or `None` when
    /// another run changed the row first.
    pub(crate) async fn reclaim(
        &self,
        room: &RoomId,
        message: &MessageKey,
        etag: &ETag,
        now: DateTime<Utc>,
    ) -> Result<Option<ETag>, StoreError> {
        let row = claim_row(room, message, "claimed", "claimedAt", now);
        match self
            .tables
            .update(
                &self.schema.metadata,
                &row,
                UpdateMode::Replace,
                &IfMatch::Etag(etag.clone()),
            )
            .await
        {
            Ok(etag) => Ok(Some(etag)),
            Err(e) if lost(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives a claim up, so that a retry starts clean; `Ok` also when it was no longer ours.
    pub(crate) async fn release_claim(
        &self,
        room: &RoomId,
        message: &MessageKey,
        etag: &ETag,
    ) -> Result<(), StoreError> {
        match self
            .tables
            .delete(
                &self.schema.metadata,
                room.as_str(),
                &claim_key(message),
                &IfMatch::Etag(etag.clone()),
            )
            .await
        {
            Err(e) if !lost(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Records the event processed, if the claim with `etag` is still ours (`false` when
    /// another run took it over, which then records it itself).
    pub(crate) async fn record_done(
        &self,
        room: &RoomId,
        message: &MessageKey,
        etag: &ETag,
    ) -> Result<bool, StoreError> {
        let row = claim_row(room, message, "done", "notifiedAt", Utc::now());
        match self
            .tables
            .update(
                &self.schema.metadata,
                &row,
                UpdateMode::Replace,
                &IfMatch::Etag(etag.clone()),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if lost(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
