//! Notification claims: one `<message key>:n` row per message in `MessagesMetadata` (so it
//! goes with the message when it is purged), which a notification run claims with a lease,
//! renews while it pushes, and finally marks done.

use chrono::{DateTime, Utc};

use super::error::Result;
use super::schema::claim_key;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::MessageKey;
use tabletalk_tables::{ETag, Entity, ErrorKind, IfMatch, StoreError, UpdateMode, Value};

/// Proof of holding a claim (the claim row's ETag): what renews, releases and completes it.
#[derive(Debug, Clone)]
pub struct ClaimToken(ETag);

/// An event's claim row as read.
#[derive(Debug, Clone)]
pub enum ClaimRow {
    /// No run began.
    Missing,
    /// Processed (rows from before claims existed have no state, and count as processed).
    Done,
    /// A run holds or held it: when it last claimed it, and the token that proves the claim.
    Claimed {
        at: Option<DateTime<Utc>>,
        token: Option<ClaimToken>,
    },
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

/// Notification claims: who was pushed for a message, claimed once per run. Holds the tables it
/// uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct ClaimStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
}

impl ClaimStore {
    pub async fn claim_row(&self, room: &RoomId, message: &MessageKey) -> Result<ClaimRow> {
        let row = self
            .tables
            .get(&self.schema.metadata, room.as_str(), &claim_key(message))
            .await?;
        Ok(match row {
            None => ClaimRow::Missing,
            Some(row) if row.str("state") != Some("claimed") => ClaimRow::Done,
            Some(row) => ClaimRow::Claimed {
                at: row.datetime("claimedAt"),
                token: row.etag.clone().map(ClaimToken),
            },
        })
    }

    /// Claims an event no run has begun, or `None` when another run just did.
    pub async fn insert_claim(
        &self,
        room: &RoomId,
        message: &MessageKey,
        now: DateTime<Utc>,
    ) -> Result<Option<ClaimToken>> {
        let row = claim_row(room, message, "claimed", "claimedAt", now);
        match self.tables.insert(&self.schema.metadata, &row).await {
            Ok(etag) => Ok(Some(ClaimToken(etag))),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Claims (or renews) the event whose claim `token` was read: the new token, or `None`
    /// when another run changed the claim first.
    pub async fn reclaim(
        &self,
        room: &RoomId,
        message: &MessageKey,
        token: &ClaimToken,
        now: DateTime<Utc>,
    ) -> Result<Option<ClaimToken>> {
        let row = claim_row(room, message, "claimed", "claimedAt", now);
        let written = self
            .tables
            .update(&self.schema.metadata, &row, UpdateMode::Replace, &token.if_match())
            .await;
        match written {
            Ok(etag) => Ok(Some(ClaimToken(etag))),
            Err(e) if lost(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives a claim up, so that a retry starts clean; `Ok` also when it was no longer ours.
    pub async fn release_claim(&self, room: &RoomId, message: &MessageKey, token: &ClaimToken) -> Result<()> {
        let deleted = self
            .tables
            .delete(
                &self.schema.metadata,
                room.as_str(),
                &claim_key(message),
                &token.if_match(),
            )
            .await;
        match deleted {
            Err(e) if !lost(&e) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Records the event processed, if the claim `token` proves is still ours (`false` when
    /// another run took it over, which then records it itself).
    pub async fn record_done(&self, room: &RoomId, message: &MessageKey, token: &ClaimToken) -> Result<bool> {
        let row = claim_row(room, message, "done", "notifiedAt", self.clock.now());
        let written = self
            .tables
            .update(&self.schema.metadata, &row, UpdateMode::Replace, &token.if_match())
            .await;
        match written {
            Ok(_) => Ok(true),
            Err(e) if lost(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl ClaimToken {
    fn if_match(&self) -> IfMatch {
        IfMatch::Etag(self.0.clone())
    }
}
