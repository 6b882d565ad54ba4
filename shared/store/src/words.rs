//! The word index: in a room's `Messages` partition, one row per bucket and message
//! (`w:<bucket> <message key>`, see `tabletalk_domain::search::index`), listing the message's
//! terms in that bucket. A bucket's rows are one range read, newest message first, and one
//! that starts at a message key resumes a search where its last page ended.
//!
//! A message's rows commit in the transaction that stores or changes it ([`word_change`]): a
//! change upserts the rows of its new text and empties those of buckets its old text had and
//! the new one lacks (upserts, so a row that was never written — a message older than the
//! index, or one whose follow-up has not run — costs nothing). Only the first
//! [`INLINE_ROWS`] ride in that transaction; a message with more gets a job row in the same
//! transaction (`outbox:<message id>:words`) and its room the outbox marker, and the rest is
//! written by `MessageStore::complete_words` right after the commit, or by the outbox timer if the
//! process stopped in between. Until then a search may miss the message by a word whose row
//! is not yet written; it never shows what a message no longer says, because every result is
//! checked against the message itself.
//!
//! A row the index kept for a message that is gone or no longer has those terms (an emptied
//! row, or one a crash left behind) is dropped when a search reads it ([`WordStore::drop`]).

use std::collections::BTreeSet;
use std::ops::Bound;

use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::messages::Message;
use tabletalk_domain::search::index::buckets;
use tabletalk_tables::rules::MAX_BATCH_OPS;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

use super::error::Result;
use super::schema::{word_bucket_prefix, word_key, words_job_key};

/// Index rows a message's own transaction carries; the rest are a follow-up's. With the
/// message's other rows (at most ten) a change still fits one transaction of 100.
pub const INLINE_ROWS: usize = 64;

/// The property listing a row's terms, space-separated; absent on an emptied row.
const TERMS: &str = "terms";
/// The job row's properties: the message's key, and the buckets to empty.
const JOB_MESSAGE: &str = "message";
const JOB_CLEAR: &str = "clear";

/// The index rows a message's commit carries, and the job row for those that do not fit.
#[derive(Debug, Clone, Default)]
pub struct WordChange {
    pub inline: Vec<BatchOp>,
    /// The job row of the rows left to [`WordStore::complete`], committed with `inline`.
    pub job: Option<BatchOp>,
}

impl WordChange {
    /// The operations to commit: the inline rows, then the job row.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp> + '_ {
        self.inline.iter().chain(self.job.iter()).cloned()
    }
}

/// The buckets `message` has rows in.
pub fn indexed_buckets(message: &Message) -> BTreeSet<String> {
    buckets(message).into_keys().collect()
}

/// Every row `message` as it is now should have, and emptied rows for the buckets in `old` it
/// no longer has: upserts, one per bucket.
fn rows(room: &RoomId, message: &Message, old: &BTreeSet<String>) -> Vec<BatchOp> {
    let key = message.key();
    let now = buckets(message);
    let written = now.iter().map(|(bucket, terms)| {
        let terms = terms.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
        Entity::new(room.as_str(), word_key(bucket, &key)).with(TERMS, Value::String(terms))
    });
    let emptied = old
        .iter()
        .filter(|bucket| !now.contains_key(*bucket))
        .map(|bucket| Entity::new(room.as_str(), word_key(bucket, &key)));
    written
        .chain(emptied)
        .map(|entity| BatchOp::Upsert {
            entity,
            mode: UpdateMode::Replace,
        })
        .collect()
}

/// What committing `message` (new, or changed from a text whose buckets were `old`) does to
/// the index.
pub fn word_change(room: &RoomId, message: &Message, old: &BTreeSet<String>) -> WordChange {
    let mut inline = rows(room, message, old);
    if inline.len() <= INLINE_ROWS {
        return WordChange { inline, job: None };
    }
    inline.truncate(INLINE_ROWS);
    let clear = old.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
    let job = Entity::new(room.as_str(), words_job_key(&message.id))
        .with(JOB_MESSAGE, Value::String(message.id.clone()))
        .with(JOB_CLEAR, Value::String(clear))
        .with("createdAt", Value::datetime(changed_at(message)));
    WordChange {
        inline,
        job: Some(BatchOp::Upsert {
            entity: job,
            mode: UpdateMode::Replace,
        }),
    }
}

/// When `message` last changed: when its job was made.
fn changed_at(message: &Message) -> chrono::DateTime<chrono::Utc> {
    message.deleted_at.or(message.edited_at).unwrap_or(message.created_at)
}

/// The message id a job row (an outbox row) names, if it is one.
pub fn job_message(row: &Entity) -> Option<&str> {
    row.str(JOB_MESSAGE)
}

/// The rows a message's transaction left to a follow-up: its job row, and the buckets its
/// change emptied that did not fit either.
#[derive(Debug, Clone)]
pub struct WordJob {
    row_key: String,
    clear: BTreeSet<String>,
    etag: ETag,
}

/// One index row read: a message that has terms in the bucket.
#[derive(Debug, Clone)]
pub struct Posting {
    pub message: MessageKey,
    pub terms: Vec<String>,
    row_key: String,
    etag: Option<ETag>,
}

/// The word index of every room. Holds the tables it uses.
#[derive(Debug, Clone)]
pub struct WordStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl WordStore {
    /// Up to `max` rows of `bucket` in `room`, newest message first, starting after `from`
    /// (a message key; `Included` to take that message too); and whether the bucket has
    /// more.
    pub async fn postings(
        &self,
        room: &RoomId,
        bucket: &str,
        from: Bound<&MessageKey>,
        max: usize,
    ) -> Result<(Vec<Posting>, bool)> {
        let prefix = word_bucket_prefix(bucket);
        let mut query = RangeQuery::prefix(room.as_str(), &prefix, max.min(1000));
        query.from = match from {
            Bound::Included(key) => Bound::Included(format!("{prefix}{key}", key = key.as_str())),
            Bound::Excluded(key) => Bound::Excluded(format!("{prefix}{key}", key = key.as_str())),
            Bound::Unbounded => query.from,
        };
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, max).await?;
        let postings = rows
            .into_iter()
            .filter_map(|row| {
                let message = MessageKey::parse(row.row_key.strip_prefix(&prefix)?)?;
                let terms = row
                    .str(TERMS)
                    .unwrap_or("")
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect();
                Some(Posting {
                    message,
                    terms,
                    etag: row.etag.clone(),
                    row_key: row.row_key,
                })
            })
            .collect();
        Ok((postings, more))
    }

    /// Drops a row a search found stale, unless it was written again since it was read.
    pub async fn drop(&self, room: &RoomId, posting: &Posting) {
        let Some(etag) = posting.etag.clone() else {
            return;
        };
        let dropped = self
            .tables
            .delete(
                &self.schema.messages,
                room.as_str(),
                &posting.row_key,
                &IfMatch::Etag(etag),
            )
            .await;
        match dropped {
            Err(e) if !e.is(ErrorKind::PreconditionFailed) && !e.is(ErrorKind::NotFound) => {
                tracing::warn!(%room, row = %posting.row_key, error = %e, "could not drop a stale index row");
            }
            _ => {}
        }
    }

    /// Deletes the rows of `message` as it is (a purge, before the message row goes).
    pub async fn forget(&self, room: &RoomId, message: &Message) -> Result<()> {
        for bucket in indexed_buckets(message) {
            crate::delete_if_present(
                &self.tables,
                &self.schema.messages,
                room.as_str(),
                &word_key(&bucket, &message.key()),
            )
            .await?;
        }
        Ok(())
    }

    /// The job of message `id` (its transaction's rows did not all fit), if it is still to do.
    pub async fn job(&self, room: &RoomId, id: &str) -> Result<Option<WordJob>> {
        let Some(row) = self
            .tables
            .get(&self.schema.messages, room.as_str(), &words_job_key(id))
            .await?
        else {
            return Ok(None);
        };
        let clear = row
            .str(JOB_CLEAR)
            .unwrap_or("")
            .split(' ')
            .filter(|b| !b.is_empty())
            .map(str::to_owned)
            .collect();
        let etag = row
            .etag
            .clone()
            .ok_or_else(|| Error::Internal("a job row without an ETag".into()))?;
        Ok(Some(WordJob {
            row_key: row.row_key,
            clear,
            etag,
        }))
    }

    /// Does `job` from `message` as it is now (none: purged, its rows went with it): writes
    /// every row it should have, empties the job's buckets it no longer has, and deletes the
    /// job with the last of them. Run again after a failure, it does the same.
    pub async fn finish(&self, room: &RoomId, message: Option<&Message>, job: WordJob) -> Result<()> {
        let table = &self.schema.messages;
        let mut ops = match message {
            Some(message) => rows(room, message, &job.clear),
            None => Vec::new(),
        };
        let done = BatchOp::Delete {
            partition_key: room.to_string(),
            row_key: job.row_key,
            if_match: IfMatch::Etag(job.etag),
        };
        let mut last = ops.split_off(ops.len() - ops.len() % (MAX_BATCH_OPS - 1));
        for batch in ops.chunks(MAX_BATCH_OPS - 1) {
            self.tables.transact(table, room.as_str(), batch).await?;
        }
        last.push(done);
        match self.tables.transact(table, room.as_str(), &last).await {
            Ok(_) => Ok(()),
            // A later change of the message wrote its own job: that one finishes the index.
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
