//! The housekeeping rows and the retention purge: the `Housekeeping` table's `rooms`
//! partition lists every room (one row each), so a run finds every room without scanning the
//! room-partitioned tables; the purge reads a batch of expired messages (the service removes
//! their files before their rows go: nothing names a file once its message is purged), and
//! purging a message deletes its index row and companion rows
//! (reactions, votes) first, then, in one entity group transaction, its message row, its feed
//! row and its thread row together with the counter's new floor, so a reader can never see a
//! purged change vanish without the floor telling it so (its cursor below the floor answers
//! RESET).

use std::collections::HashSet;
use std::ops::Bound;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::ledger::Counter;
use super::messages::parse_message;
use super::schema::{
    FEED_PREFIX, HOUSEKEEPING_PARTITION, IDEMPOTENCY_PREFIX, ROOM_ROW, feed_key, feed_version, thread_key,
};
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::{MESSAGE_KEY_RANGE, Ticks};
use tabletalk_domain::messages::Message;
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, UpdateMode, Value};

/// Messages purged per transaction: each takes up to three operations, plus the counter.
const PURGE_BATCH: usize = 30;
/// Batches one room gets per run, so that one big room never holds up the others.
pub const MAX_BATCHES_PER_ROOM: usize = 20;

/// What housekeeping finds of a listed room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomStanding {
    /// No room row (yet, or any more).
    Missing,
    /// Marked by a delete that is still sweeping it.
    BeingDeleted,
    /// A room, with its retention if it has one.
    Kept { retention_seconds: Option<u32> },
}

/// Housekeeping and the retention purge. Holds the tables it uses and, as fields, the surfaces it
/// calls.
#[derive(Debug, Clone)]
pub struct PurgeStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
    pub(crate) companions: crate::companions::CompanionStore,
    pub(crate) ledger: crate::ledger::LedgerStore,
    pub(crate) pins: crate::pins::PinStore,
    pub(crate) words: crate::words::WordStore,
}

impl PurgeStore {
    /// Lists a room for housekeeping. Written before the room exists, so no room is missed; a
    /// row whose room has not appeared within [`REGISTRATION_GRACE`] is dropped (sooner, it may
    /// belong to a room being created right now).
    pub async fn register_room(&self, room: &RoomId) -> Result<()> {
        let row =
            Entity::new(HOUSEKEEPING_PARTITION, room.as_str()).with("registeredAt", Value::datetime(self.clock.now()));
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Every listed room, with when it was listed.
    pub async fn registered_rooms(&self) -> Result<Vec<(RoomId, Option<DateTime<Utc>>)>> {
        let query = RangeQuery::partition(HOUSEKEEPING_PARTITION, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, 10_000_000)
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((RoomId::parse(&row.row_key).ok()?, row.datetime("registeredAt"))))
            .collect())
    }

    /// Takes a room off the housekeeping list.
    pub async fn unregister_room(&self, room: &RoomId) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.housekeeping,
            HOUSEKEEPING_PARTITION,
            room.as_str(),
        )
        .await
    }

    /// What a listed room's row says, for housekeeping.
    pub async fn room_standing(&self, room: &RoomId) -> Result<RoomStanding> {
        let row = self.tables.get(&self.schema.rooms, room.as_str(), ROOM_ROW).await?;
        Ok(match row {
            None => RoomStanding::Missing,
            Some(row) if super::schema::is_being_deleted(&row) => RoomStanding::BeingDeleted,
            Some(row) => RoomStanding::Kept {
                retention_seconds: row
                    .i64("retentionSeconds")
                    .filter(|s| *s > 0)
                    .and_then(|s| u32::try_from(s).ok()),
            },
        })
    }

    /// The next batch of a room's messages sent before `cutoff`, oldest first: what one
    /// [`Store::purge_messages`] takes. The caller removes their files first.
    pub async fn expired_messages(&self, room: &RoomId, cutoff: DateTime<Utc>) -> Result<Vec<Message>> {
        // Older messages have larger keys: everything after the cutoff's key is expired.
        let expired = RangeQuery::partition(room.as_str(), PURGE_BATCH)
            .from(Bound::Excluded(
                Ticks::from_datetime(cutoff).message_key().as_str().to_owned(),
            ))
            .to(Bound::Excluded(MESSAGE_KEY_RANGE.1.to_owned()));
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.messages, &expired, PURGE_BATCH)
            .await?;
        Ok(rows
            .iter()
            .map(|row| parse_message(room, row))
            .collect::<tabletalk_domain::error::Result<Vec<_>>>()?)
    }

    /// Purges one batch of [`Store::expired_messages`]: how many it purged (none if another
    /// run purged some of them meanwhile, or one was edited: the next batch reads again).
    pub async fn purge_messages(&self, room: &RoomId, messages: &[Message]) -> Result<usize> {
        for message in messages {
            let index = message.key().ticks().ascending_key();
            crate::delete_if_present(&self.tables, &self.schema.ascending, room.as_str(), index.as_str()).await?;
            self.companions.delete_companions(room, &message.key()).await?;
            self.words.forget(room, message).await?;
            // Before the message, so a pin row never outlives it but by a crash.
            if message.is_pinned {
                self.pins.delete_pin_row(room, &message.key()).await?;
            }
        }
        match self.purge_batch(room, messages).await {
            Ok(()) => Ok(messages.len()),
            Err(e) if e.is(ErrorKind::NotFound) => {
                tracing::info!(%room, error = %e, "a purge batch raced another change; reading again");
                Ok(0)
            }
            Err(e) => Err(e.into()),
        }
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
            .tables
            .query_up_to(&self.schema.messages, &lowest, purged.len() + 1)
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
                deletes.push(delete(thread_key(root, &index)));
            }
        }
        self.ledger
            .with_counter(room, |known| async move {
                let step = |counter: Counter| Counter {
                    floor: counter.floor.max(lowest_left.map_or(counter.version, |v| v - 1)),
                    ..counter
                };
                let written = self
                    .ledger
                    .step_counter(room, known, step, |_| deletes.clone(), None)
                    .await
                    .map_err(super::ledger::step_failed)?
                    .row;
                Ok(((), written))
            })
            .await
    }

    /// Deletes a room's idempotency records older than `cutoff`.
    pub async fn expire_idempotency(&self, room: &RoomId, cutoff: DateTime<Utc>) -> Result<usize> {
        let query = RangeQuery::prefix(room.as_str(), IDEMPOTENCY_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.messages, &query, 100_000).await?;
        let expired: Vec<BatchOp> = rows
            .into_iter()
            .filter(|row| row.datetime("createdAt").is_some_and(|at| at < cutoff))
            .map(|row| BatchOp::Delete {
                partition_key: row.partition_key,
                row_key: row.row_key,
                if_match: IfMatch::Any,
            })
            .collect();
        for batch in expired.chunks(tabletalk_tables::rules::MAX_BATCH_OPS) {
            match self.tables.transact(&self.schema.messages, room.as_str(), batch).await {
                Ok(_) => {}
                Err(e) if e.is(ErrorKind::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(expired.len())
    }
}
