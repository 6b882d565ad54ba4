//! Housekeeping, what the timer does: republish notification events still pending in the
//! outbox, purge messages older than their room's retention, raise the room's retention floor,
//! and expire idempotency records past their window.
//!
//! Rooms are found through the `Housekeeping` table (one row per room), so a run costs in rooms,
//! in expired messages and in the idempotency records kept (at most a day's worth), never in
//! the messages stored. A purge works in small batches and stops after a bounded amount of work
//! per room per run; the next run goes on.
//!
//! Purging a message deletes its index row and companion rows (reactions, votes) first, then,
//! in one entity group transaction, its message row, its feed row and its thread row together
//! with the counter's new floor: a reader can never see a purged change vanish without the
//! floor telling it so (its cursor below the floor answers RESET).

use std::collections::HashSet;
use std::ops::Bound;

use chrono::{DateTime, Duration, Utc};

use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::{MESSAGE_KEY_RANGE, Ticks};
use crate::messages::Message;
use crate::messages::reactions::companion_rows;
use crate::rooms::is_being_deleted;
use crate::service::Chat;
use crate::storage::conditional::ConditionalError;
use crate::storage::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, UpdateMode, Value};
use crate::store::ledger::{Counter, feed_key, feed_version};
use crate::store::schema::{FEED_PREFIX, HOUSEKEEPING_PARTITION, IDEMPOTENCY_PREFIX, ROOM_ROW, THREAD_PREFIX};

/// How long a client id protects against a repeated send.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::hours(24);
/// How long a housekeeping row may wait for its room to be created.
pub const REGISTRATION_GRACE: Duration = Duration::hours(1);
/// Messages purged per transaction: each takes up to three operations, plus the counter.
const PURGE_BATCH: usize = 30;
/// Batches one room gets per run, so that one big room never holds up the others.
const MAX_BATCHES_PER_ROOM: usize = 20;

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub rooms: usize,
    /// Rooms whose housekeeping failed this time (logged; retried next run).
    pub rooms_failed: usize,
    pub messages_purged: usize,
    pub idempotency_records_expired: usize,
}

impl Chat {
    /// Lists a room for housekeeping. Written before the room exists, so no room is missed; a
    /// row whose room has not appeared within [`REGISTRATION_GRACE`] is dropped (sooner, it may
    /// belong to a room being created right now).
    pub(crate) async fn register_room(&self, room: &RoomId) -> Result<()> {
        let row = Entity::new(HOUSEKEEPING_PARTITION, room.as_str()).with("registeredAt", Value::datetime(Utc::now()));
        self.store
            .tables
            .upsert(&self.store.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// One housekeeping run over every room.
    pub async fn housekeeping(&self, now: DateTime<Utc>) -> Result<Report> {
        let query = RangeQuery::partition(HOUSEKEEPING_PARTITION, 1000);
        let (rows, _) = self
            .store
            .tables
            .query_up_to(&self.store.schema.housekeeping, &query, 10_000_000)
            .await?;
        let mut report = Report::default();
        for row in rows {
            let Ok(room) = RoomId::parse(&row.row_key) else {
                continue;
            };
            let registered = row.datetime("registeredAt").unwrap_or(now);
            // One room's trouble (a busy counter, an unreadable row) never stops the others;
            // the next run tries it again.
            if let Err(e) = self.keep_room(&room, registered, now, &mut report).await {
                report.rooms_failed += 1;
                tracing::warn!(%room, error = %e, "housekeeping of a room failed");
            }
        }
        Ok(report)
    }

    async fn keep_room(
        &self,
        room: &RoomId,
        registered: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut Report,
    ) -> Result<()> {
        let room_row = self
            .store
            .tables
            .get(&self.store.schema.rooms, room.as_str(), ROOM_ROW)
            .await?;
        let retention = match &room_row {
            None if now - registered < REGISTRATION_GRACE => return Ok(()),
            None => {
                return self
                    .store
                    .delete_if_present(&self.store.schema.housekeeping, HOUSEKEEPING_PARTITION, room.as_str())
                    .await;
            }
            Some(row) if is_being_deleted(row) => return Ok(()),
            Some(row) => row.i64("retentionSeconds").filter(|s| *s > 0),
        };
        report.rooms += 1;
        if let Some(seconds) = retention {
            report.messages_purged += self.purge_room(room, now - Duration::seconds(seconds)).await?;
        }
        report.idempotency_records_expired += self.expire_idempotency(room, now - IDEMPOTENCY_WINDOW).await?;
        Ok(())
    }

    /// Purges a room's messages sent before `cutoff`, a bounded number of batches per call.
    pub(crate) async fn purge_room(&self, room: &RoomId, cutoff: DateTime<Utc>) -> Result<usize> {
        // Older messages have larger keys: everything after the cutoff's key is expired.
        let expired = RangeQuery::partition(room.as_str(), PURGE_BATCH)
            .from(Bound::Excluded(
                Ticks::from_datetime(cutoff).message_key().as_str().to_owned(),
            ))
            .to(Bound::Excluded(MESSAGE_KEY_RANGE.1.to_owned()));
        let mut purged = 0;
        for _ in 0..MAX_BATCHES_PER_ROOM {
            let (rows, _) = self
                .store
                .tables
                .query_up_to(&self.store.schema.messages, &expired, PURGE_BATCH)
                .await?;
            if rows.is_empty() {
                break;
            }
            let messages = rows
                .iter()
                .map(|row| Message::from_entity(room, row))
                .collect::<Result<Vec<_>>>()?;
            for message in &messages {
                let index = message.key().ticks().ascending_key();
                self.store
                    .delete_if_present(&self.store.schema.ascending, room.as_str(), index.as_str())
                    .await?;
                self.store
                    .tables
                    .delete_range(&self.store.schema.metadata, &companion_rows(room, &message.key()))
                    .await?;
            }
            match self.purge_batch(room, &messages).await {
                Ok(()) => purged += messages.len(),
                // Another run purged some of them meanwhile, or one was edited: read again.
                Err(e) if e.is(ErrorKind::NotFound) => {
                    tracing::info!(%room, error = %e, "a purge batch raced another change; reading again");
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(purged)
    }

    /// Deletes the messages' rows in the `Messages` partition and raises the floor, in one
    /// transaction conditional on the counter.
    ///
    /// The floor is just below the lowest version still in the feed: a reader sent back to the
    /// floor (RESET) gets every live message, and a cursor below it had not yet seen something
    /// that is gone. Versions do not follow send times (an edit moves an old message up), so the
    /// purged versions themselves say nothing about what is left. Feed rows only ever move up
    /// or go, so a lowest version read before the commit can only be lower than the true one:
    /// the floor errs low, never high.
    async fn purge_batch(&self, room: &RoomId, messages: &[Message]) -> Result<(), StoreError> {
        let purged: HashSet<u64> = messages.iter().map(|m| m.version).filter(|v| *v > 0).collect();
        let lowest = RangeQuery::prefix(room.as_str(), FEED_PREFIX, purged.len() + 1);
        let (rows, _) = self
            .store
            .tables
            .query_up_to(&self.store.schema.messages, &lowest, purged.len() + 1)
            .await?;
        let lowest_left = rows
            .iter()
            .filter_map(|row| feed_version(&row.row_key))
            .find(|v| !purged.contains(v));
        let mut deletes = Vec::new();
        let delete = |row_key: String| BatchOp::Delete {
            partition_key: room.to_string(),
            row_key,
            if_match: IfMatch::Any,
        };
        for message in messages {
            deletes.push(delete(message.id.clone()));
            if message.version > 0 {
                deletes.push(delete(feed_key(message.version)));
            }
            if let Some(root) = &message.thread_id {
                let index = message.key().ticks().ascending_key();
                deletes.push(delete(format!("{THREAD_PREFIX}{root}:{}", index.as_str())));
            }
        }
        self.store
            .with_counter(room, |known| async move {
                let step = |counter: Counter| Counter {
                    floor: counter.floor.max(lowest_left.map_or(counter.version, |v| v - 1)),
                    ..counter
                };
                let written = self
                    .store
                    .step_counter(room, known, step, |_| deletes.clone())
                    .await
                    .map_err(|e| match e {
                        ConditionalError::Store(e) => e,
                        ConditionalError::NotFound => {
                            StoreError::new(ErrorKind::NotFound, "the room's counter is gone")
                        }
                        ConditionalError::Conflict => StoreError::new(ErrorKind::Unavailable, "the room is busy"),
                        ConditionalError::Rejected(never) => match never {},
                    })?
                    .row;
                Ok(((), written))
            })
            .await
    }

    /// Deletes a room's idempotency records older than `cutoff`.
    async fn expire_idempotency(&self, room: &RoomId, cutoff: DateTime<Utc>) -> Result<usize> {
        let query = RangeQuery::prefix(room.as_str(), IDEMPOTENCY_PREFIX, 1000);
        let (rows, _) = self
            .store
            .tables
            .query_up_to(&self.store.schema.messages, &query, 100_000)
            .await?;
        let expired: Vec<BatchOp> = rows
            .into_iter()
            .filter(|row| row.datetime("createdAt").is_some_and(|at| at < cutoff))
            .map(|row| BatchOp::Delete {
                partition_key: row.partition_key,
                row_key: row.row_key,
                if_match: IfMatch::Any,
            })
            .collect();
        for batch in expired.chunks(crate::storage::rules::MAX_BATCH_OPS) {
            match self
                .store
                .tables
                .transact(&self.store.schema.messages, room.as_str(), batch)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is(ErrorKind::NotFound) => {}
                Err(e) => return Err(Error::from(e)),
            }
        }
        Ok(expired.len())
    }
}
