//! The state of the limits in the `Limits` table (`schema` names its partitions and rows): a
//! bucket row per bucket, drawn from in leases, and a repeat-text record per (room, sender,
//! text). Every change goes through the conditional-write helper, so processes sharing the
//! store never both spend the same tokens or both claim the same text.

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::schema::{
    MEMBER_BUCKET_PREFIX, RECENT_TEXT_PREFIX, bucket_key, limits_room_partition, recent_text_key, recent_texts_of,
};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{ClientId, RoomId, UserId};
use tabletalk_domain::limits::{Bucket, BucketId, Rate, repeat_wait};
use tabletalk_tables::conditional::{ConditionalError, update_conditionally};
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// A bucket's tokens are kept in millionths, as an integer: exact in both backends.
const MICROS: f64 = 1e6;

/// What a lease from a bucket row got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Leased {
    /// This many tokens (at least one), now this process's to spend.
    Granted(u32),
    /// The bucket is empty; a token will be there after this long.
    Empty(Duration),
}

/// A repeat-text record this send claimed, to take back if the send does not happen.
#[derive(Debug, Clone)]
pub struct TextClaim {
    partition: String,
    row: String,
    etag: ETag,
    /// Taken over from an earlier attempt of the same send (the record named the same client
    /// id): the record may stand for that attempt's stored message, whose text it keeps claimed.
    pub taken_over: bool,
}

fn bucket_row(partition: &str, row: &str, bucket: &Bucket) -> Entity {
    Entity::new(partition, row)
        .with("tokens", Value::Int64((bucket.tokens * MICROS).floor() as i64))
        .with("at", Value::Int64(bucket.at.timestamp_micros()))
}

fn parse_bucket(entity: &Entity, rate: Rate, now: DateTime<Utc>) -> Bucket {
    match (
        entity.i64("tokens"),
        entity.i64("at").and_then(DateTime::from_timestamp_micros),
    ) {
        (Some(tokens), Some(at)) => Bucket {
            tokens: tokens as f64 / MICROS,
            at,
        },
        // A row that does not read is treated as full: it was written by this code, so this
        // is a bug, and refusing every write of its user would make it an outage.
        _ => Bucket::full(rate, now),
    }
}

/// A repeat-text record: when the text was sent, the claim that wrote it (so a write whose
/// answer was lost can tell its own record) and the client id of the send, if it had one (so a
/// retry of that send is no repeat of it).
fn text_row(partition: &str, row: &str, at: DateTime<Utc>, claim: &str, client: Option<&ClientId>) -> Entity {
    let mut entity = Entity::new(partition, row)
        .with("at", Value::Int64(at.timestamp_micros()))
        .with(CLAIM_PROPERTY, Value::String(claim.to_owned()));
    if let Some(client) = client {
        entity.set(CLIENT_PROPERTY, Value::String(client.as_str().to_owned()));
    }
    entity
}

/// The repeat-text record's properties naming the claim that wrote it and its send's client id.
const CLAIM_PROPERTY: &str = "claim";
const CLIENT_PROPERTY: &str = "clientId";

fn text_sent_at(entity: &Entity) -> Option<DateTime<Utc>> {
    entity.i64("at").and_then(DateTime::from_timestamp_micros)
}

fn no_etag() -> super::error::Error {
    Error::Internal("a written record without an ETag".into()).into()
}

/// A lost race every attempt, or a re-read that failed: the caller may try again.
fn busy() -> Error {
    Error::Unavailable("the limits are busy; try again".into())
}

/// The buckets and records of the limits against abuse. Holds the tables it uses and, as fields,
/// the surfaces it calls.
#[derive(Debug, Clone)]
pub struct LimitStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl LimitStore {
    /// Takes up to `want` tokens from a bucket's row at `now`: the row is created full on
    /// first use, and rewritten conditionally on the version read (a lost race re-reads and
    /// takes again from what the other process left). An empty bucket is not written.
    pub async fn lease_tokens(&self, id: &BucketId, rate: Rate, want: u32, now: DateTime<Utc>) -> Result<Leased> {
        let (partition, row) = bucket_key(id);
        let table = &self.schema.limits;
        if self.tables.get(table, &partition, &row).await?.is_none() {
            let mut bucket = Bucket::full(rate, now);
            let granted = bucket
                .take(rate, now, want)
                .map_err(|_| Error::Internal("a full bucket is empty".into()))?;
            match self.tables.insert(table, &bucket_row(&partition, &row, &bucket)).await {
                Ok(_) => return Ok(Leased::Granted(granted)),
                // Another process created it first: take from what it left, below.
                Err(e) if e.is(ErrorKind::AlreadyExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut outcome = Leased::Empty(Duration::zero());
        let written = update_conditionally(&self.tables, table, &partition, &row, UpdateMode::Replace, |entity| {
            let mut bucket = parse_bucket(&entity, rate, now);
            match bucket.take(rate, now, want) {
                Ok(granted) => {
                    outcome = Leased::Granted(granted);
                    Ok(bucket_row(&partition, &row, &bucket))
                }
                Err(wait) => Err(wait),
            }
        });
        match written.await {
            Ok(_) => Ok(outcome),
            Err(ConditionalError::Rejected(wait)) => Ok(Leased::Empty(wait)),
            Err(ConditionalError::Store(e)) => Err(e.into()),
            Err(ConditionalError::NotFound | ConditionalError::Conflict) => Err(busy().into()),
        }
    }

    /// Claims the repeat-text record of `user`'s `fingerprint` in `room` at `now`; answers how
    /// long the text is still blocked when it was sent less than the window ago — unless the
    /// record is of an earlier attempt of this same send (`client`, its client id): a retry is
    /// no repeat, and takes the record over (its window kept), so the earlier attempt's
    /// release, on its own version, leaves it. A write that may have landed although it
    /// failed is looked at: a record it wrote is claimed, never left behind unclaimed.
    pub async fn claim_text(
        &self,
        room: &RoomId,
        user: &UserId,
        fingerprint: &str,
        now: DateTime<Utc>,
        client: Option<&ClientId>,
    ) -> Result<Result<TextClaim, Duration>> {
        let (partition, row) = (limits_room_partition(room), recent_text_key(user, fingerprint));
        let table = &self.schema.limits;
        let id = format!("{:016x}", rand::random::<u64>());
        let claim = |etag, taken_over| TextClaim {
            partition: partition.clone(),
            row: row.clone(),
            etag,
            taken_over,
        };
        // After a write that failed but may have landed, the record tells: this claim's own
        // (it landed), another's or none (it did not).
        let mine = |found: &Option<Entity>| {
            found
                .as_ref()
                .filter(|entity| entity.str(CLAIM_PROPERTY) == Some(id.as_str()))
                .map(|entity| entity.etag.clone().ok_or_else(no_etag))
        };
        match self
            .tables
            .insert(table, &text_row(&partition, &row, now, &id, client))
            .await
        {
            Ok(etag) => return Ok(Ok(claim(etag, false))),
            Err(e) if e.is(ErrorKind::AlreadyExists) => {}
            Err(e) if e.may_have_applied() => match self.tables.get(table, &partition, &row).await {
                Ok(found) => match mine(&found) {
                    Some(etag) => return Ok(Ok(claim(etag?, false))),
                    // Another's record: this insert did not land; claimed as any record that
                    // is there, below.
                    None if found.is_some() => {}
                    None => return Err(e.into()),
                },
                Err(_) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
        let taken_over = std::sync::atomic::AtomicBool::new(false);
        let written = update_conditionally(&self.tables, table, &partition, &row, UpdateMode::Replace, |entity| {
            let sent = text_sent_at(&entity);
            let same_send = client.is_some_and(|c| entity.str(CLIENT_PROPERTY) == Some(c.as_str()));
            match sent.and_then(|sent| repeat_wait(sent, now).map(|wait| (sent, wait))) {
                Some((sent, _)) if same_send => {
                    taken_over.store(true, std::sync::atomic::Ordering::Relaxed);
                    Ok(text_row(&partition, &row, sent, &id, client))
                }
                Some((_, wait)) => Err(wait),
                None => {
                    taken_over.store(false, std::sync::atomic::Ordering::Relaxed);
                    Ok(text_row(&partition, &row, now, &id, client))
                }
            }
        });
        let taken_over = || taken_over.load(std::sync::atomic::Ordering::Relaxed);
        match written.await {
            Ok(entity) => entity
                .etag
                .map(|etag| Ok(claim(etag, taken_over())))
                .ok_or_else(no_etag),
            Err(ConditionalError::Rejected(wait)) => Ok(Err(wait)),
            Err(ConditionalError::Store(e)) if e.may_have_applied() => {
                match self.tables.get(table, &partition, &row).await.map(|found| mine(&found)) {
                    Ok(Some(etag)) => Ok(Ok(claim(etag?, taken_over()))),
                    _ => Err(e.into()),
                }
            }
            Err(ConditionalError::Store(e)) => Err(e.into()),
            // Deleted meanwhile (expired by housekeeping): nothing blocks the text; a retry
            // claims it afresh.
            Err(ConditionalError::NotFound | ConditionalError::Conflict) => Err(busy().into()),
        }
    }

    /// Takes back a claim whose send did not happen, unless someone claimed the text since.
    /// A failure is logged: the text stays blocked until the window ends, never longer.
    pub async fn release_text(&self, claim: TextClaim) {
        let released = self
            .tables
            .delete(
                &self.schema.limits,
                &claim.partition,
                &claim.row,
                &IfMatch::Etag(claim.etag),
            )
            .await;
        match released {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::NotFound) || e.is(ErrorKind::PreconditionFailed) => {}
            Err(e) => tracing::warn!(error = %e, "could not take back a repeat-text record"),
        }
    }

    /// Deletes a room's repeat-text records sent before `texts_before` and its members'
    /// buckets last drawn from before `buckets_before`, each only as it was read (a record
    /// claimed again meanwhile stays). Answers how many went.
    pub async fn expire_limit_rows(
        &self,
        room: &RoomId,
        texts_before: DateTime<Utc>,
        buckets_before: DateTime<Utc>,
    ) -> Result<usize> {
        let partition = limits_room_partition(room);
        let mut expired = Vec::new();
        for (prefix, cutoff) in [
            (RECENT_TEXT_PREFIX, texts_before),
            (MEMBER_BUCKET_PREFIX, buckets_before),
        ] {
            let query = RangeQuery::prefix(partition.clone(), prefix, 1000);
            let (rows, _) = self.tables.query_up_to(&self.schema.limits, &query, 100_000).await?;
            expired.extend(
                rows.into_iter()
                    .filter(|row| text_sent_at(row).is_some_and(|at| at < cutoff))
                    .map(|row| BatchOp::Delete {
                        partition_key: row.partition_key,
                        row_key: row.row_key,
                        if_match: row.etag.map_or(IfMatch::Any, IfMatch::Etag),
                    }),
            );
        }
        let mut deleted = 0;
        for batch in expired.chunks(tabletalk_tables::rules::MAX_BATCH_OPS) {
            match self.tables.transact(&self.schema.limits, &partition, batch).await {
                Ok(_) => deleted += batch.len(),
                // One row of the batch changed or went meanwhile: the next run tries again.
                Err(e) if e.is(ErrorKind::NotFound) || e.is(ErrorKind::PreconditionFailed) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(deleted)
    }

    /// Deletes `user`'s rows in a room's partition: their member bucket and their
    /// repeat-text records (an erasure).
    pub async fn delete_user_limits(&self, room: &RoomId, user: &UserId) -> Result<()> {
        let partition = limits_room_partition(room);
        let (_, bucket) = bucket_key(&BucketId::Member(room.clone(), user.clone()));
        crate::delete_if_present(&self.tables, &self.schema.limits, &partition, &bucket).await?;
        let texts = RangeQuery::prefix(partition, &recent_texts_of(user), 1000);
        self.tables.delete_range(&self.schema.limits, &texts).await?;
        Ok(())
    }

    /// Deletes `user`'s write bucket (an erasure).
    pub async fn delete_user_bucket(&self, user: &UserId) -> Result<()> {
        let (partition, row) = bucket_key(&BucketId::User(user.clone()));
        crate::delete_if_present(&self.tables, &self.schema.limits, &partition, &row).await
    }

    /// Deletes a room's partition of `Limits` (the room is being deleted).
    pub async fn delete_room_limits(&self, room: &RoomId) -> Result<()> {
        let everything = RangeQuery::partition(limits_room_partition(room), 100);
        self.tables.delete_range(&self.schema.limits, &everything).await?;
        Ok(())
    }
}
