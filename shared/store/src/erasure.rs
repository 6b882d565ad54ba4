//! What an erasure reads and writes of its own: the `UserHistory` index (partition = user, one
//! row per room the user has ever been a member of, with their first join) and the job rows
//! (`Housekeeping`, partition `erasures`, one row per user).
//!
//! Why an index per (user, room) and not per message: a send writes nothing more than before
//! (no author index on the hot path), and joins are rare. The index row is inserted once, when
//! the user first joins (an insert that finds the row keeps the first join), and kept when they
//! leave, so rooms they left are found too. Inside a room their messages lie among the message
//! rows sent since that first join: one key range, newest first, read in batches.
//!
//! A job row is written conditionally on the version its holder read: the holder's lease is
//! that version, so a process that lost the job (its lease lapsed and another took over) fails
//! its next checkpoint and stops.

use std::ops::Bound;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::messages::parse_message;
use super::schema::{ERASURE_PARTITION, user_key};
use tabletalk_domain::erasure::{Checkpoint, ErasureCounts, ErasureJob, ErasureStatus, RoomStep};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::messages::Message;
use tabletalk_tables::{ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// More history rows than any user has; a count reads them all, page by page.
pub const ALL_ROOMS: usize = 1_000_000;

/// The version of a job row its holder last wrote: the next write is conditional on it.
#[derive(Debug, Clone)]
pub struct Held(ETag);

/// One of a user's rooms in their history: the room, and their first join when it is known
/// (`None` for a membership older than the history index).
#[derive(Debug, Clone)]
pub struct PastRoom {
    pub room: RoomId,
    pub first_joined: Option<DateTime<Utc>>,
}

/// A reaction or vote row of a user, found by a scan of a room's companion rows.
#[derive(Debug, Clone)]
pub struct Mark {
    pub row_key: String,
    pub is_vote: bool,
}

fn job_row(user: &UserId, job: &ErasureJob) -> Entity {
    let c = &job.counts;
    let count = |n: u64| Value::Int64(n as i64);
    let mut row = Entity::new(ERASURE_PARTITION, user_key(user))
        .with("userId", Value::String(user.to_string()))
        .with("jobId", Value::String(job.id.clone()))
        .with("done", Value::Bool(job.status == ErasureStatus::Done))
        .with("startedAt", Value::datetime(job.started_at))
        .with("updatedAt", Value::datetime(job.updated_at))
        .with("leaseUntil", Value::datetime(job.lease_until))
        .with("roomsDone", count(c.rooms_done))
        .with("roomsHandedOver", count(c.rooms_handed_over))
        .with("roomsDeleted", count(c.rooms_deleted))
        .with("messagesErased", count(c.messages_erased))
        .with("reactionsRemoved", count(c.reactions_removed))
        .with("votesRemoved", count(c.votes_removed))
        .with("subscriptionsRemoved", count(c.subscriptions_removed));
    if let Some(at) = job.finished_at {
        row.set("finishedAt", Value::datetime(at));
    }
    if let Some(checkpoint) = &job.checkpoint {
        row.set("room", Value::String(checkpoint.room_id.clone()));
        row.set("step", Value::String(checkpoint.step.as_str().into()));
        if let Some(after) = &checkpoint.after {
            row.set("after", Value::String(after.clone()));
        }
    }
    row
}

fn parse_job(row: &Entity) -> tabletalk_domain::error::Result<ErasureJob> {
    let broken = || Error::Internal(format!("erasure row {} is incomplete", row.row_key));
    let count = |name: &str| row.i64(name).and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    let checkpoint = match (row.str("room"), row.str("step").and_then(RoomStep::parse)) {
        (Some(room), Some(step)) => Some(Checkpoint {
            room_id: room.to_owned(),
            step,
            after: row.str("after").map(str::to_owned),
        }),
        _ => None,
    };
    Ok(ErasureJob {
        id: row.str("jobId").ok_or_else(broken)?.to_owned(),
        status: match row.bool("done").unwrap_or(false) {
            true => ErasureStatus::Done,
            false => ErasureStatus::Running,
        },
        started_at: row.datetime("startedAt").ok_or_else(broken)?,
        updated_at: row.datetime("updatedAt").ok_or_else(broken)?,
        finished_at: row.datetime("finishedAt"),
        counts: ErasureCounts {
            rooms_done: count("roomsDone"),
            rooms_handed_over: count("roomsHandedOver"),
            rooms_deleted: count("roomsDeleted"),
            messages_erased: count("messagesErased"),
            reactions_removed: count("reactionsRemoved"),
            votes_removed: count("votesRemoved"),
            subscriptions_removed: count("subscriptionsRemoved"),
        },
        checkpoint,
        lease_until: row.datetime("leaseUntil").unwrap_or_default(),
    })
}

/// Erasure jobs and the history of rooms a user was ever in. Holds the tables it uses and, as
/// fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct ErasureStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
}

impl ErasureStore {
    /// Records that `user` has been a member of `room`, keeping an earlier record (so its time
    /// is their first join).
    pub async fn record_membership(&self, user: &UserId, room: &RoomId) -> Result<()> {
        let row = Entity::new(user_key(user), room.as_str()).with("firstJoinedAt", Value::datetime(self.clock.now()));
        match self.tables.insert(&self.schema.user_history, &row).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Adds `current`, the rooms of `user`'s current memberships, to their history, for
    /// memberships older than the history index (their first join unknown: the whole room is
    /// scanned). Answers how many were added.
    pub async fn record_current_rooms(&self, user: &UserId, current: &[RoomId]) -> Result<usize> {
        let mut added = 0;
        for room in current {
            let row = Entity::new(user_key(user), room.as_str());
            match self.tables.insert(&self.schema.user_history, &row).await {
                Ok(_) => added += 1,
                Err(e) if e.is(ErrorKind::AlreadyExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(added)
    }

    /// The first room of `user`'s history, in key order: the next one an erasure takes.
    pub async fn next_past_room(&self, user: &UserId) -> Result<Option<PastRoom>> {
        let query = RangeQuery::partition(user_key(user), 1);
        let (rows, _) = self.tables.query_up_to(&self.schema.user_history, &query, 1).await?;
        Ok(rows.first().and_then(|row| {
            Some(PastRoom {
                room: RoomId::parse(&row.row_key).ok()?,
                first_joined: row.datetime("firstJoinedAt"),
            })
        }))
    }

    /// How many rooms `user`'s history still holds.
    pub async fn past_room_count(&self, user: &UserId) -> Result<u64> {
        let query = RangeQuery::partition(user_key(user), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.user_history, &query, ALL_ROOMS)
            .await?;
        Ok(rows.len() as u64)
    }

    /// Takes `room` out of `user`'s history (once an erasure is done with it).
    pub async fn forget_past_room(&self, user: &UserId, room: &RoomId) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.user_history, &user_key(user), room.as_str()).await
    }

    /// Message rows of `room` after `after`, up to (excluding) `until`, newest first: up to
    /// `limit`, the last key read, and whether more follow.
    pub async fn message_batch(
        &self,
        room: &RoomId,
        (low, until): (&str, &str),
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Message>, Option<String>, bool)> {
        let from = after.map_or(Bound::Included(low.to_owned()), |key| Bound::Excluded(key.to_owned()));
        let query = RangeQuery::partition(room.as_str(), limit.min(1000))
            .from(from)
            .to(Bound::Excluded(until.to_owned()));
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        let last = rows.last().map(|row| row.row_key.clone());
        // A row that does not read as a message is left (and logged): one broken row must not
        // hold the whole erasure up for good.
        let messages = rows
            .iter()
            .filter_map(|row| match parse_message(room, row) {
                Ok(message) => Some(message),
                Err(e) => {
                    tracing::warn!(%room, row = %row.row_key, error = %e, "an erasure passed over an unreadable message row");
                    None
                }
            })
            .collect();
        Ok((messages, last, more))
    }

    /// `user`'s reaction and vote rows among a batch of `room`'s companion rows after `after`:
    /// theirs, the last key read, and whether more follow.
    pub async fn mark_batch(
        &self,
        room: &RoomId,
        user: &UserId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Mark>, Option<String>, bool)> {
        let from = after.map_or(Bound::Unbounded, |key| Bound::Excluded(key.to_owned()));
        let query = RangeQuery::partition(room.as_str(), limit.min(1000)).from(from);
        let (rows, more) = self.tables.query_up_to(&self.schema.metadata, &query, limit).await?;
        let last = rows.last().map(|row| row.row_key.clone());
        let marks = rows
            .iter()
            .filter(|row| row.str("userId") == Some(user.as_str()))
            .filter_map(|row| {
                let (_, rest) = row.row_key.split_once(':')?;
                let is_vote = match rest.get(..2)? {
                    "v:" => true,
                    "r:" => false,
                    _ => return None,
                };
                Some(Mark {
                    row_key: row.row_key.clone(),
                    is_vote,
                })
            })
            .collect();
        Ok((marks, last, more))
    }

    pub async fn delete_mark(&self, room: &RoomId, mark: &Mark) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.metadata, room.as_str(), &mark.row_key).await
    }

    /// Deletes every push subscription of `user`; answers how many there were.
    pub async fn delete_subscriptions(&self, user: &UserId) -> Result<u64> {
        let query = RangeQuery::partition(user_key(user), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.push_subscriptions, &query, ALL_ROOMS)
            .await?;
        for row in &rows {
            crate::delete_if_present(
                &self.tables,
                &self.schema.push_subscriptions,
                &row.partition_key,
                &row.row_key,
            )
            .await?;
        }
        Ok(rows.len() as u64)
    }

    /// `user`'s erasure job, if they ever asked for one, and the version read.
    pub async fn erasure(&self, user: &UserId) -> Result<Option<(ErasureJob, Held)>> {
        let row = self
            .tables
            .get(&self.schema.housekeeping, ERASURE_PARTITION, &user_key(user))
            .await?;
        Ok(match row {
            Some(row) => {
                let etag = row
                    .etag
                    .clone()
                    .ok_or_else(|| Error::Internal("an erasure row without an ETag".into()))?;
                Some((parse_job(&row)?, Held(etag)))
            }
            None => None,
        })
    }

    /// Every erasure job still running, with the user it erases.
    pub async fn running_erasures(&self) -> Result<Vec<(UserId, ErasureJob, Held)>> {
        let query = RangeQuery::partition(ERASURE_PARTITION, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, ALL_ROOMS)
            .await?;
        let mut running = Vec::new();
        for row in rows {
            let (Some(user), Ok(job), Some(etag)) = (
                row.str("userId").and_then(|u| UserId::parse(u).ok()),
                parse_job(&row),
                row.etag.clone(),
            ) else {
                tracing::warn!(row = %row.row_key, "an unreadable erasure row was left alone");
                continue;
            };
            if job.is_running() {
                running.push((user, job, Held(etag)));
            }
        }
        Ok(running)
    }

    /// Writes a new job for `user`: in place of `replacing` (a finished job, as read), or as
    /// the first. `None` when another start got there first.
    pub async fn start_erasure(
        &self,
        user: &UserId,
        job: &ErasureJob,
        replacing: Option<&Held>,
    ) -> Result<Option<Held>> {
        let row = job_row(user, job);
        let written = match replacing {
            None => self.tables.insert(&self.schema.housekeeping, &row).await,
            Some(Held(etag)) => {
                let if_match = IfMatch::Etag(etag.clone());
                self.tables
                    .update(&self.schema.housekeeping, &row, UpdateMode::Replace, &if_match)
                    .await
            }
        };
        match written {
            Ok(etag) => Ok(Some(Held(etag))),
            Err(e) if e.is(ErrorKind::AlreadyExists) || e.is(ErrorKind::PreconditionFailed) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Records `job` over the version `held`; `None` when the job is no longer this holder's
    /// (another process took it over, or the row is gone).
    pub async fn save_erasure(&self, user: &UserId, job: &ErasureJob, held: &Held) -> Result<Option<Held>> {
        let if_match = IfMatch::Etag(held.0.clone());
        match self
            .tables
            .update(
                &self.schema.housekeeping,
                &job_row(user, job),
                UpdateMode::Replace,
                &if_match,
            )
            .await
        {
            Ok(etag) => Ok(Some(Held(etag))),
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
