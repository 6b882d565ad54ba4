//! The word index: in a room's `Messages` partition, one row per bucket and message
//! (`w:<bucket> <message key>`, see `tabletalk_domain::search::index`), listing the message's
//! terms in that bucket. A bucket's rows are one range read, newest message first, and one
//! that starts at a message key resumes a search where its last page ended.
//!
//! A message's rows commit in the transaction that stores or changes it ([`word_change`]): a
//! change upserts the rows of its new text and empties those of buckets its old text had and
//! the new one lacks (upserts, which fail nothing whether or not the row was ever written).
//! Only the first [`INLINE_ROWS`] ride in that transaction. A change that has more, or that
//! drops buckets, also commits a job row (`outbox:<message id>:words:<when it changed>`) and
//! marks its room in the outbox; `MessageStore::finish_words` does the job right after the
//! commit, or the outbox timer if the process stopped in between: it writes the rows that did
//! not fit (each batch conditional on the message row, so none lands after a later change)
//! and deletes the rows of the dropped buckets (each conditional on the row as read before the
//! message, so none a later change wrote again). With the index off no row is written, but a
//! change still removes the rows of its old text. Until a job is done a search may miss the
//! message by a word whose row is not yet written; it never shows what a message no longer
//! says, because every result is checked against the message itself.
//!
//! A row a search finds stale (its message gone, or no longer with terms in its bucket) is
//! dropped when read ([`WordStore::drop`]).
//!
//! On a store that indexes text rows itself (the embedded one: `tabletalk_tables::text`), a
//! message has one text row instead, `x:<message key>`, its buckets as the row's words and its
//! terms beside them, written over in every transaction that stores or changes the message:
//! the store's own index finds it by a bucket, in the order the bucket's rows would. Nothing is
//! left to a follow-up, and no row is ever stale.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::messages::Message;
use tabletalk_domain::search::index::{bucket as index_bucket, buckets};
use tabletalk_tables::rules::MAX_BATCH_OPS;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value, text};

use super::error::Result;
use super::schema::{word_bucket_prefix, word_key, words_job_key, words_jobs_prefix};

/// Index rows a message's own transaction carries; the rest are a follow-up's. With the
/// message's other rows (at most ten) a change still fits one transaction of 100.
pub const INLINE_ROWS: usize = 64;
/// Job rows' follow-up reads made at once.
const AT_ONCE: usize = 16;

/// The property listing a row's terms, space-separated; absent on an emptied row. A text
/// row's terms take as many properties as they need: `terms`, `terms1`, `terms2`…
const TERMS: &str = "terms";
/// UTF-16 units in one property of a text row's terms: within a property's 32 Ki.
const TERMS_PER_PROPERTY: usize = 30_000;
/// The job row's properties: the message's id; the buckets the change emptied, to delete;
/// whether rows of the message's own did not fit its transaction.
const JOB_MESSAGE: &str = "message";
const JOB_CLEAR: &str = "clear";
const JOB_REST: &str = "rest";

/// The index rows a message's commit carries, and the job row of what they leave to do.
#[derive(Debug, Clone, Default)]
pub struct WordChange {
    pub inline: Vec<BatchOp>,
    /// The job row of what `inline` leaves to do, committed with it.
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

/// Every row `message` as it is now has: upserts, one per bucket.
fn rows(room: &RoomId, message: &Message) -> Vec<BatchOp> {
    rows_of(room, &message.key(), buckets(message))
}

fn rows_of(room: &RoomId, key: &MessageKey, buckets: BTreeMap<String, BTreeSet<String>>) -> Vec<BatchOp> {
    buckets
        .into_iter()
        .map(|(bucket, terms)| {
            let terms = terms.into_iter().collect::<Vec<_>>().join(" ");
            upsert(Entity::new(room.as_str(), word_key(&bucket, key)).with(TERMS, Value::String(terms)))
        })
        .collect()
}

fn upsert(entity: Entity) -> BatchOp {
    BatchOp::Upsert {
        entity,
        mode: UpdateMode::Replace,
    }
}

/// The text row of `message` as it is now: its buckets as words, with the terms in them.
fn text_row(room: &RoomId, key: &MessageKey, buckets: BTreeMap<String, BTreeSet<String>>) -> BatchOp {
    let mut row = Entity::new(room.as_str(), text::row_key(key.as_str()));
    let words = buckets.keys().map(String::as_str).collect::<Vec<_>>().join(" ");
    // Each chunk with its length in UTF-16 units.
    let mut chunks: Vec<(String, usize)> = vec![(String::new(), 0)];
    for term in buckets.values().flatten() {
        let units = term.encode_utf16().count();
        if chunks
            .last()
            .is_some_and(|(_, used)| *used > 0 && used + 1 + units > TERMS_PER_PROPERTY)
        {
            chunks.push((String::new(), 0));
        }
        let (chunk, used) = chunks.last_mut().expect("never empty");
        if *used > 0 {
            chunk.push(' ');
            *used += 1;
        }
        chunk.push_str(term);
        *used += units;
    }
    let chunks = chunks.into_iter().map(|(chunk, _)| chunk);
    for (i, chunk) in chunks.enumerate().filter(|(_, chunk)| !chunk.is_empty()) {
        let name = match i {
            0 => TERMS.to_owned(),
            i => format!("{TERMS}{i}"),
        };
        row = row.with(&name, Value::String(chunk));
    }
    upsert(row.with(text::WORDS, Value::String(words)))
}

/// A text row's terms in `bucket`.
fn text_terms(row: &Entity, bucket: &str) -> Vec<String> {
    let chunks = (0..).map_while(|i| match i {
        0 => row.str(TERMS),
        i => row.str(&format!("{TERMS}{i}")),
    });
    chunks
        .flat_map(str::split_whitespace)
        // Most terms fail the first test, which allocates nothing.
        .filter(|term| term.starts_with(bucket) && index_bucket(term) == bucket)
        .map(str::to_owned)
        .collect()
}

/// What committing `message` (new, or changed from a text whose buckets were `old`) does to
/// the index: with `index` off no row is written, but the rows of `old` still go.
fn word_change(room: &RoomId, message: &Message, old: &BTreeSet<String>, index: bool) -> WordChange {
    let now = match index {
        true => buckets(message),
        false => BTreeMap::new(),
    };
    let key = message.key();
    let emptied: Vec<&String> = old.iter().filter(|bucket| !now.contains_key(*bucket)).collect();
    let rest = now.len() > INLINE_ROWS;
    let mut inline = rows_of(room, &key, now);
    inline.extend(
        emptied
            .iter()
            .filter(|_| index)
            .map(|bucket| upsert(Entity::new(room.as_str(), word_key(bucket, &key)))),
    );
    if !rest && emptied.is_empty() {
        return WordChange { inline, job: None };
    }
    inline.truncate(INLINE_ROWS);
    let changed_at = message.deleted_at.or(message.edited_at).unwrap_or(message.created_at);
    // The time orders a message's jobs; the random part keeps two changes in one instant apart.
    let change = format!(
        "{}-{:08x}",
        changed_at.format("%Y%m%dT%H%M%S%.6fZ"),
        rand::random::<u32>()
    );
    let clear = emptied
        .iter()
        .map(|bucket| bucket.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let job = Entity::new(room.as_str(), words_job_key(&message.id, &change))
        .with(JOB_MESSAGE, Value::String(message.id.clone()))
        .with(JOB_CLEAR, Value::String(clear))
        .with(JOB_REST, Value::Bool(rest))
        .with("createdAt", Value::datetime(changed_at));
    WordChange {
        inline,
        job: Some(upsert(job)),
    }
}

/// Every row `message` has, in batches that leave room in a transaction for one more
/// operation (the condition `MessageStore::finish_words` writes them under).
pub fn row_batches(room: &RoomId, message: &Message) -> Vec<Vec<BatchOp>> {
    rows(room, message)
        .chunks(MAX_BATCH_OPS - 1)
        .map(<[BatchOp]>::to_vec)
        .collect()
}

/// The message id a job row (an outbox row) names, if it is one.
pub fn job_message(row: &Entity) -> Option<&str> {
    row.str(JOB_MESSAGE)
}

/// What a message's change left to its follow-up: rows to write, and emptied buckets.
#[derive(Debug, Clone)]
pub struct WordJob {
    row_key: String,
    clear: BTreeSet<String>,
    /// Rows of the message's own did not fit its transaction.
    pub rest: bool,
    etag: ETag,
}

/// A row of a bucket a job empties, as read before the message was: deleted only if it
/// is still that row (a later change that wrote the bucket again changed its ETag).
#[derive(Debug, Clone)]
pub struct HeldRow {
    bucket: String,
    row_key: String,
    etag: ETag,
}

/// One index row read: a message that has terms in the bucket.
#[derive(Debug, Clone)]
pub struct Posting {
    pub message: MessageKey,
    pub bucket: String,
    pub terms: Vec<String>,
    row_key: String,
    etag: Option<ETag>,
}

/// The word index of every room. Holds the tables it uses.
#[derive(Debug, Clone)]
pub struct WordStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// The tables index text rows: a message has one, and no rows of buckets.
    pub(crate) text_rows: bool,
}

impl WordStore {
    /// What committing `message` (new, or changed from a text whose buckets were `old`) does
    /// to the index: with `index` off nothing is written, but what `old` wrote still goes.
    pub fn change(&self, room: &RoomId, message: &Message, old: &BTreeSet<String>, index: bool) -> WordChange {
        if !self.text_rows {
            return word_change(room, message, old, index);
        }
        let now = match index {
            true => buckets(message),
            false => BTreeMap::new(),
        };
        // Written over whatever the row held; emptied, it finds nothing.
        let inline = match now.is_empty() && old.is_empty() {
            true => Vec::new(),
            false => vec![text_row(room, &message.key(), now)],
        };
        WordChange { inline, job: None }
    }

    /// Whether rows a message's transaction left out are a follow-up's to write: never for a
    /// message's text row, which its transaction always carries.
    pub fn writes_rest(&self) -> bool {
        !self.text_rows
    }

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
        if self.text_rows {
            return self.text_postings(room, bucket, from, max).await;
        }
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
                    bucket: bucket.to_owned(),
                    terms,
                    etag: row.etag.clone(),
                    row_key: row.row_key,
                })
            })
            .collect();
        Ok((postings, more))
    }

    /// [`WordStore::postings`] from the tables' own index of text rows.
    async fn text_postings(
        &self,
        room: &RoomId,
        bucket: &str,
        from: Bound<&MessageKey>,
        max: usize,
    ) -> Result<(Vec<Posting>, bool)> {
        let from = from.map(|key| text::row_key(key.as_str()));
        let (rows, more) = self
            .tables
            .text_query(
                &self.schema.messages,
                room.as_str(),
                bucket,
                from.as_ref().map(String::as_str),
                max,
            )
            .await?;
        let postings = rows
            .into_iter()
            .filter_map(|row| {
                Some(Posting {
                    message: MessageKey::parse(row.row_key.strip_prefix(text::ROW_PREFIX)?)?,
                    bucket: bucket.to_owned(),
                    terms: text_terms(&row, bucket),
                    // Never stale: nothing to drop.
                    etag: None,
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

    /// Deletes the rows of `message` as it is (a purge, before the message row goes). A job
    /// of it still to do deletes the rest once the message is gone.
    pub async fn forget(&self, room: &RoomId, message: &Message) -> Result<()> {
        if self.text_rows {
            let key = text::row_key(message.key().as_str());
            return crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), &key).await;
        }
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

    /// The jobs of message `id` still to do, oldest change first.
    pub async fn jobs(&self, room: &RoomId, id: &str) -> Result<Vec<WordJob>> {
        let query = RangeQuery::prefix(room.as_str(), &words_jobs_prefix(id), 100);
        let (rows, _) = self.tables.query_up_to(&self.schema.messages, &query, 100).await?;
        rows.into_iter()
            .map(|row| {
                let clear = row
                    .str(JOB_CLEAR)
                    .unwrap_or("")
                    .split(' ')
                    .filter(|b| !b.is_empty())
                    .map(str::to_owned)
                    .collect();
                // A job written before jobs said so was always one of rows that did not fit.
                let rest = row.bool(JOB_REST).unwrap_or(true);
                let etag = row
                    .etag
                    .clone()
                    .ok_or_else(|| Error::Internal("a job row without an ETag".into()))?;
                Ok(WordJob {
                    row_key: row.row_key,
                    clear,
                    rest,
                    etag,
                })
            })
            .collect()
    }

    /// The rows of the buckets `job` emptied that are still there; read before the message
    /// is, so that [`WordStore::finish`] deletes none a later change wrote again.
    pub async fn held_rows(&self, room: &RoomId, message: &MessageKey, job: &WordJob) -> Result<Vec<HeldRow>> {
        let buckets: Vec<&String> = job.clear.iter().collect();
        let mut held = Vec::new();
        for chunk in buckets.chunks(AT_ONCE) {
            let rows =
                futures::future::try_join_all(chunk.iter().map(|bucket| self.held_row(room, message, bucket))).await?;
            held.extend(rows.into_iter().flatten());
        }
        Ok(held)
    }

    async fn held_row(&self, room: &RoomId, message: &MessageKey, bucket: &str) -> Result<Option<HeldRow>> {
        let row_key = word_key(bucket, message);
        let row = self.tables.get(&self.schema.messages, room.as_str(), &row_key).await?;
        Ok(row.and_then(|row| {
            Some(HeldRow {
                bucket: bucket.to_owned(),
                etag: row.etag?,
                row_key,
            })
        }))
    }

    /// Deletes `rows`, each unless it is gone already or was written again since it was read:
    /// in one transaction when none is, else one by one.
    async fn delete_held(&self, room: &RoomId, rows: &[HeldRow]) -> Result<()> {
        let table = &self.schema.messages;
        let ops: Vec<BatchOp> = rows
            .iter()
            .map(|row| BatchOp::Delete {
                partition_key: room.to_string(),
                row_key: row.row_key.clone(),
                if_match: IfMatch::Etag(row.etag.clone()),
            })
            .collect();
        match self.tables.transact(table, room.as_str(), &ops).await {
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => {}
            other => return other.map(drop).map_err(Into::into),
        }
        for row in rows {
            let deleted = self
                .tables
                .delete(table, room.as_str(), &row.row_key, &IfMatch::Etag(row.etag.clone()))
                .await;
            match deleted {
                Err(e) if !e.is(ErrorKind::PreconditionFailed) && !e.is(ErrorKind::NotFound) => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Ends `job`: deletes the `held` rows of buckets not in `kept` (the buckets the message
    /// has now, none when it is gone or the index is off), then the job row. Run again after
    /// a failure, it does the same.
    pub async fn finish(&self, room: &RoomId, job: WordJob, held: Vec<HeldRow>, kept: &BTreeSet<String>) -> Result<()> {
        let table = &self.schema.messages;
        let stale: Vec<HeldRow> = held.into_iter().filter(|row| !kept.contains(&row.bucket)).collect();
        for chunk in stale.chunks(MAX_BATCH_OPS) {
            self.delete_held(room, chunk).await?;
        }
        match self
            .tables
            .delete(table, room.as_str(), &job.row_key, &IfMatch::Etag(job.etag))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
