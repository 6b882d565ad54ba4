//! Table storage with Azure Table semantics, behind one trait.
//!
//! [`TableBackend`] is what a backend implements: the Azure Table service ([`azure`]), the
//! embedded SQLite store ([`sqlite`]) and wrappers that add one behaviour to any backend
//! ([`faults`]). [`Tables`] is what the rest of tabletalk uses: it checks every rule Azure
//! enforces ([`rules`]) before a request reaches a backend, so every backend answers the same —
//! Azurite, for one, is laxer than Azure — and then delegates. [`conformance`] is the suite every
//! backend must pass.

pub mod azure;
pub mod conditional;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod entity;
pub mod error;
pub mod faults;
pub mod matrix;
pub mod rules;
pub mod sqlite;
pub mod text;

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;

pub use entity::{ETag, Entity, IfMatch, UpdateMode, Value};
pub use error::{ErrorKind, Result, StoreError};
pub use sqlite::{Together, together};

/// A table name that follows Azure's rule (`^[A-Za-z][A-Za-z0-9]{2,62}$`, not `tables`).
/// Once one exists it is valid; nothing downstream re-checks it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName(String);

impl TableName {
    pub fn parse(name: impl Into<String>) -> Result<TableName> {
        let name = name.into();
        rules::check_table_name(&name)?;
        Ok(TableName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a paged query resumes. Opaque: only the backend that issued it can interpret it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuation {
    pub next_partition_key: String,
    pub next_row_key: Option<String>,
}

/// A query over one partition's row keys, in ascending row-key order.
#[derive(Debug, Clone)]
pub struct RangeQuery {
    pub partition_key: String,
    pub from: Bound<String>,
    pub to: Bound<String>,
    /// Page size, 1..=1000 (Azure's `$top`).
    pub top: usize,
    pub continuation: Option<Continuation>,
}

impl RangeQuery {
    /// Every row of a partition, `top` per page.
    pub fn partition(partition_key: impl Into<String>, top: usize) -> RangeQuery {
        RangeQuery {
            partition_key: partition_key.into(),
            from: Bound::Unbounded,
            to: Bound::Unbounded,
            top,
            continuation: None,
        }
    }

    /// Rows whose key starts with `prefix`.
    pub fn prefix(partition_key: impl Into<String>, prefix: &str, top: usize) -> RangeQuery {
        RangeQuery {
            partition_key: partition_key.into(),
            from: Bound::Included(prefix.to_owned()),
            to: prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
            top,
            continuation: None,
        }
    }

    pub fn from(mut self, bound: Bound<String>) -> RangeQuery {
        self.from = bound;
        self
    }

    pub fn to(mut self, bound: Bound<String>) -> RangeQuery {
        self.to = bound;
        self
    }
}

/// The smallest string greater than every string starting with `prefix`.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = char::from_u32(last as u32 + 1) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// One page of a query. A page may be short or even empty and still carry a continuation
/// (Azure does this); the query is exhausted only when `continuation` is `None`.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub entities: Vec<Entity>,
    pub continuation: Option<Continuation>,
}

/// One operation of an entity group transaction.
#[derive(Debug, Clone)]
pub enum BatchOp {
    Insert(Entity),
    Update {
        entity: Entity,
        mode: UpdateMode,
        if_match: IfMatch,
    },
    Upsert {
        entity: Entity,
        mode: UpdateMode,
    },
    Delete {
        partition_key: String,
        row_key: String,
        if_match: IfMatch,
    },
}

impl BatchOp {
    pub fn keys(&self) -> (&str, &str) {
        match self {
            BatchOp::Insert(e) | BatchOp::Update { entity: e, .. } | BatchOp::Upsert { entity: e, .. } => {
                (&e.partition_key, &e.row_key)
            }
            BatchOp::Delete {
                partition_key, row_key, ..
            } => (partition_key, row_key),
        }
    }

    /// The operation's name, for fault injection and logs.
    pub fn name(&self) -> &'static str {
        match self {
            BatchOp::Insert(_) => "insert",
            BatchOp::Update { .. } => "update",
            BatchOp::Upsert { .. } => "upsert",
            BatchOp::Delete { .. } => "delete",
        }
    }
}

/// What a storage backend implements. Requests arrive already checked against Azure's rules by
/// [`Tables`]; a backend only has to store, compare ETags and page.
#[async_trait]
pub trait TableBackend: fmt::Debug + Send + Sync + 'static {
    /// Creates the table if it does not exist (idempotent).
    async fn create_table(&self, table: &TableName) -> Result<()>;
    /// Deletes the table and everything in it; `NotFound` if there is no such table.
    async fn delete_table(&self, table: &TableName) -> Result<()>;
    /// Reads one entity; `NotFound` if it does not exist.
    async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Entity>;
    /// Inserts; `AlreadyExists` if the keys are taken.
    async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag>;
    /// Replaces or merges an existing entity; `NotFound`, or `PreconditionFailed` on an ETag
    /// mismatch.
    async fn update(&self, table: &TableName, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag>;
    /// Inserts, or replaces/merges whatever is there.
    async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag>;
    /// Deletes; `NotFound`, or `PreconditionFailed` on an ETag mismatch.
    async fn delete(&self, table: &TableName, partition_key: &str, row_key: &str, if_match: &IfMatch) -> Result<()>;
    /// [`TableBackend::delete`] for a row whose lingering a while is harmless (a published
    /// event's outbox row): a backend that pays per commit may hold it for the next commit
    /// other work causes, so it costs none of its own. Answers once it is durable, like any
    /// write. Azure has nothing to save and deletes at once.
    async fn delete_deferred(
        &self,
        table: &TableName,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        self.delete(table, partition_key, row_key, if_match).await
    }
    /// One page of a row-key range inside one partition.
    async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page>;
    /// Applies all operations or none. Returns each operation's new ETag (`None` for deletes).
    /// A failure carries the failing operation's index.
    async fn transact(&self, table: &TableName, partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>>;
    /// Whether this backend indexes [`text`] rows by their words as it writes them.
    fn indexes_text(&self) -> bool {
        false
    }
    /// Up to `max` text rows of the partition holding `word`, in row-key order from `from`
    /// (a text row's key), and whether there are more. Only for a backend that
    /// [`indexes_text`](TableBackend::indexes_text).
    async fn text_query(
        &self,
        _table: &TableName,
        _partition_key: &str,
        _word: &str,
        _from: Bound<&str>,
        _max: usize,
    ) -> Result<(Vec<Entity>, bool)> {
        Err(StoreError::internal("this backend keeps no text index"))
    }
}

/// Table storage as tabletalk uses it: Azure's rules checked here, once, for every backend.
/// Cloning is cheap (one `Arc`).
#[derive(Debug, Clone)]
pub struct Tables {
    backend: Arc<dyn TableBackend>,
}

impl Tables {
    pub fn new(backend: impl TableBackend) -> Tables {
        Tables {
            backend: Arc::new(backend),
        }
    }

    pub fn from_arc(backend: Arc<dyn TableBackend>) -> Tables {
        Tables { backend }
    }

    pub async fn create_table(&self, table: &TableName) -> Result<()> {
        self.backend.create_table(table).await
    }

    pub async fn delete_table(&self, table: &TableName) -> Result<()> {
        self.backend.delete_table(table).await
    }

    /// Reads one entity; `None` if it does not exist.
    pub async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Option<Entity>> {
        rules::check_keys(partition_key, row_key)?;
        match self.backend.get(table, partition_key, row_key).await {
            Ok(entity) => Ok(Some(entity)),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag> {
        rules::check_entity(entity)?;
        self.backend.insert(table, entity).await
    }

    pub async fn update(
        &self,
        table: &TableName,
        entity: &Entity,
        mode: UpdateMode,
        if_match: &IfMatch,
    ) -> Result<ETag> {
        rules::check_entity(entity)?;
        self.backend.update(table, entity, mode, if_match).await
    }

    pub async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
        rules::check_entity(entity)?;
        self.backend.upsert(table, entity, mode).await
    }

    pub async fn delete(
        &self,
        table: &TableName,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        rules::check_keys(partition_key, row_key)?;
        self.backend.delete(table, partition_key, row_key, if_match).await
    }

    /// See [`TableBackend::delete_deferred`].
    pub async fn delete_deferred(
        &self,
        table: &TableName,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        rules::check_keys(partition_key, row_key)?;
        self.backend
            .delete_deferred(table, partition_key, row_key, if_match)
            .await
    }

    /// See [`TableBackend::indexes_text`].
    pub fn indexes_text(&self) -> bool {
        self.backend.indexes_text()
    }

    /// See [`TableBackend::text_query`]; `max` is at most 1,000, as a range read's page.
    pub async fn text_query(
        &self,
        table: &TableName,
        partition_key: &str,
        word: &str,
        from: Bound<&str>,
        max: usize,
    ) -> Result<(Vec<Entity>, bool)> {
        if let Bound::Included(key) | Bound::Excluded(key) = from
            && text::number(key).is_none()
        {
            return Err(StoreError::invalid(format!("{key:?} is not a text row's key")));
        }
        rules::check_keys(partition_key, text::ROW_PREFIX)?;
        self.backend
            .text_query(table, partition_key, word, from, max.min(1000))
            .await
    }

    pub async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page> {
        rules::check_query(query)?;
        self.backend.query(table, query).await
    }

    /// Reads up to `limit` entities of a range, following continuations (Azure may return
    /// short pages). Returns the entities and whether the range holds more.
    pub async fn query_up_to(
        &self,
        table: &TableName,
        query: &RangeQuery,
        limit: usize,
    ) -> Result<(Vec<Entity>, bool)> {
        let mut query = query.clone();
        let mut entities = Vec::new();
        loop {
            query.top = (limit + 1 - entities.len()).clamp(1, rules::MAX_PAGE_SIZE);
            let page = self.query(table, &query).await?;
            entities.extend(page.entities);
            if entities.len() > limit {
                entities.truncate(limit);
                return Ok((entities, true));
            }
            match page.continuation {
                Some(next) => query.continuation = Some(next),
                None => return Ok((entities, false)),
            }
        }
    }

    /// Deletes every row of a range, in entity group transactions of up to 100 rows (one page
    /// read, one batch written, until the range is empty). Rows deleted by someone else
    /// meanwhile are fine; rows added meanwhile inside the range are deleted too.
    pub async fn delete_range(&self, table: &TableName, query: &RangeQuery) -> Result<()> {
        loop {
            let (rows, _) = self.query_up_to(table, query, rules::MAX_BATCH_OPS).await?;
            if rows.is_empty() {
                return Ok(());
            }
            let ops: Vec<BatchOp> = rows
                .into_iter()
                .map(|row| BatchOp::Delete {
                    partition_key: row.partition_key,
                    row_key: row.row_key,
                    if_match: IfMatch::Any,
                })
                .collect();
            match self.transact(table, &query.partition_key, &ops).await {
                Ok(_) => {}
                // One of these rows went meanwhile: read the range again.
                Err(e) if e.is(ErrorKind::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Applies all operations or none (an entity group transaction).
    pub async fn transact(&self, table: &TableName, partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>> {
        rules::check_batch(partition_key, ops)?;
        self.backend.transact(table, partition_key, ops).await
    }
}
