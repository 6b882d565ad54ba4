//! The embedded store: Azure Table semantics on one SQLite file, the default backend when no
//! connection string is configured.
//!
//! Why SQLite: persistent, crash-safe through its write-ahead log, no server to start, and
//! safe for several processes on one file (file locks), so two tabletalk processes sharing a
//! data directory behave like two Functions instances sharing a storage account.
//!
//! Layout: one SQL table holds every entity, keyed (table, PartitionKey, RowKey) with its ETag,
//! timestamp and properties as typed JSON.
//!
//! Threads: one writer thread owns the write connection ([`writer`]); a write call is sent to
//! it on a channel and its caller awaits the answer. The writer group-commits whatever is queued
//! — each call undone alone if it fails, inside one `BEGIN IMMEDIATE`, one `COMMIT`, one fsync — so an
//! ETag comparison and the write it guards are atomic across processes, a batch is
//! all-or-nothing, and many independent calls share one fsync without waiting for each other.
//! The calls a task makes in one step inside [`together`] are sent as one message, so they
//! share a group for sure (a lone send's writes: one fsync, not two).
//! Reads run on the caller's thread, on a pool of connections of their own ([`readers`]), which
//! in WAL never wait for the writer. Every statement is prepared once per connection
//! ([`session`]).

mod props;
mod readers;
mod rows;
mod session;
mod text;
mod together;
mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_tests;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use async_trait::async_trait;
use tokio::sync::oneshot;

use rows::Row;
pub use session::Durability;
use session::{Session, Shared, open_connection, sql_error};
pub use together::{Together, together};
use writer::Undo;

use super::{
    BatchOp, ETag, Entity, ErrorKind, IfMatch, Page, RangeQuery, Result, StoreError, TableBackend, TableName,
    UpdateMode,
};

/// Stores opened by this process, for their ids.
static STORES: AtomicU64 = AtomicU64::new(0);

/// Read connections opened with the store (more are opened while more threads read at once).
const READERS: usize = 4;

/// The embedded store. Cloning is cheap; clones share the threads. The threads stop when the
/// last clone is dropped, after answering every call already sent.
#[derive(Debug, Clone)]
pub struct SqliteTables {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Tells this store's held calls from another's ([`together`]).
    id: u64,
    writes: together::Calls,
    reads: readers::Readers,
    shared: Arc<Shared>,
    #[cfg(test)]
    probe: Arc<tests::Probe>,
}

impl SqliteTables {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<SqliteTables> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::internal(format!("cannot create {}: {e}", dir.display())))?;
        }
        #[cfg_attr(not(test), allow(unused_mut))]
        let mut conn = open_writer(&path, durability)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS entities (
                 tbl TEXT NOT NULL, pk TEXT NOT NULL, rk TEXT NOT NULL,
                 etag TEXT NOT NULL, ts TEXT NOT NULL, props TEXT NOT NULL,
                 PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID;",
        )
        .map_err(sql_error)?;
        conn.execute_batch(&text::schema()).map_err(sql_error)?;
        #[cfg(test)]
        let probe = tests::Probe::install(&mut conn);
        let shared = Arc::new(Shared::default());

        let (writes, calls) = mpsc::channel();
        let session = Session::new(conn, shared.clone());
        let reopen = {
            let (path, shared) = (path.clone(), shared.clone());
            move || Ok(Session::new(open_writer(&path, durability)?, shared.clone()))
        };
        spawn("sqlite-writer", move || writer::supervise(session, calls, reopen))?;

        let reads = readers::Readers::open(&path, shared.clone(), READERS)?;
        Ok(SqliteTables {
            inner: Arc::new(Inner {
                id: STORES.fetch_add(1, Ordering::Relaxed),
                writes,
                reads,
                shared,
                #[cfg(test)]
                probe,
            }),
        })
    }

    /// Group commits this store has made (one fsync each with `Durability::Full`): how many
    /// transactions a piece of work cost, for tests and benchmarks.
    pub fn group_commits(&self) -> u64 {
        self.inner.shared.commits.load(Ordering::Relaxed)
    }

    /// Runs `work` on the writer thread, in the next group commit; answers once it committed
    /// (or failed). `work` makes at most one write statement ([`Undo::Statement`]).
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Session) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.write_undone_by(Undo::Statement, work).await
    }

    /// [`SqliteTables::write`] for `work` whose failure `undo` undoes.
    async fn write_undone_by<T: Send + 'static>(
        &self,
        undo: Undo,
        work: impl FnOnce(&mut Session) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        self.send_and_wait(Box::new(writer::Call::new(undo, work, reply)), answer)
            .await
    }

    /// Sends `call` to the writer thread and waits for its `answer`.
    async fn send_and_wait<T>(&self, call: Box<dyn writer::Job>, answer: oneshot::Receiver<Result<T>>) -> Result<T> {
        let sent = together::send(self.inner.id, &self.inner.writes, call);
        #[cfg(test)]
        self.inner.probe.sent();
        sent.map_err(|()| StoreError::internal("the sqlite writer has stopped"))?;
        // Dropped unanswered: the writer panicked, maybe after the call's group committed.
        answer.await.map_err(|_| {
            StoreError::new(
                ErrorKind::Indeterminate,
                "the sqlite writer stopped before answering; the write may have applied",
            )
        })?
    }

    /// Runs `work` on a read connection, on this thread (see [`readers`] for why).
    fn read<T>(&self, work: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        self.inner.reads.run(work)
    }
}

/// The writer's work of deleting one row, conditional on `if_match`.
fn deletion(
    table: &TableName,
    partition_key: &str,
    row_key: &str,
    if_match: &IfMatch,
) -> impl FnOnce(&mut Session) -> Result<()> + Send + 'static {
    let (table, pk, rk, if_match) = (
        table_key(table),
        partition_key.to_owned(),
        row_key.to_owned(),
        if_match.clone(),
    );
    move |s: &mut Session| {
        s.require_table(&table)?;
        rows::delete(&s.conn, &table, &pk, &rk, &if_match)
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map(drop)
        .map_err(|e| StoreError::internal(format!("cannot start {name}: {e}")))
}

/// The writer's connection: with the functions the text index's triggers call.
fn open_writer(path: &Path, durability: Durability) -> Result<rusqlite::Connection> {
    let conn = open_connection(path, durability)?;
    text::register(&conn).map_err(sql_error)?;
    Ok(conn)
}

/// Table names are case-insensitive in Azure.
fn table_key(table: &TableName) -> String {
    table.as_str().to_ascii_lowercase()
}

#[async_trait]
impl TableBackend for SqliteTables {
    async fn create_table(&self, table: &TableName) -> Result<()> {
        let table = table_key(table);
        self.write(move |s| rows::create_table(&s.conn, &table)).await
    }

    async fn delete_table(&self, table: &TableName) -> Result<()> {
        let table = table_key(table);
        self.write_undone_by(Undo::Savepoint, move |s| {
            s.require_table(&table)?;
            s.forget_table(&table);
            rows::delete_table(&s.conn, &table)
        })
        .await
    }

    async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Entity> {
        let table = table_key(table);
        self.read(|s| match rows::get(&s.conn, &table, partition_key, row_key)? {
            Some(entity) => Ok(entity),
            None => {
                s.require_table(&table)?;
                Err(StoreError::not_found("the specified resource does not exist"))
            }
        })
    }

    async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag> {
        let (table, row) = (table_key(table), Row::whole(entity)?);
        self.write(move |s| {
            s.require_table(&table)?;
            rows::insert(&s.conn, &table, &row)
        })
        .await
    }

    async fn update(&self, table: &TableName, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag> {
        let (table, row, if_match) = (table_key(table), Row::of(entity, mode)?, if_match.clone());
        self.write(move |s| {
            s.require_table(&table)?;
            rows::update(&s.conn, &table, &row, &if_match)
        })
        .await
    }

    async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
        let (table, row) = (table_key(table), Row::of(entity, mode)?);
        self.write(move |s| {
            s.require_table(&table)?;
            rows::upsert(&s.conn, &table, &row)
        })
        .await
    }

    async fn delete(&self, table: &TableName, partition_key: &str, row_key: &str, if_match: &IfMatch) -> Result<()> {
        self.write(deletion(table, partition_key, row_key, if_match)).await
    }

    /// Rides in the next group commit another write causes, or waits
    /// [`writer::DEFERRED_WAIT`] for one: no fsync of its own.
    async fn delete_deferred(
        &self,
        table: &TableName,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        let work = deletion(table, partition_key, row_key, if_match);
        let call = writer::Call::new(Undo::Statement, work, reply).deferred();
        self.send_and_wait(Box::new(call), answer).await
    }

    async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page> {
        let table = table_key(table);
        self.read(|s| {
            s.require_table(&table)?;
            rows::query(&s.conn, &table, query)
        })
    }

    fn indexes_text(&self) -> bool {
        true
    }

    async fn text_query(
        &self,
        table: &TableName,
        partition_key: &str,
        word: &str,
        from: Bound<&str>,
        max: usize,
    ) -> Result<(Vec<Entity>, bool)> {
        let table = table_key(table);
        self.read(|s| {
            s.require_table(&table)?;
            text::query(&s.conn, &table, partition_key, word, from, max)
        })
    }

    async fn transact(&self, table: &TableName, _partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>> {
        let table = table_key(table);
        let ops = (ops.iter().enumerate())
            .map(|(index, op)| RowOp::of(op).map_err(|e| e.at_batch_index(index)))
            .collect::<Result<Vec<_>>>()?;
        // Several operations are one savepoint: any error rolls every one of them back.
        let undo = match ops.len() {
            0 | 1 => Undo::Statement,
            _ => Undo::Savepoint,
        };
        self.write_undone_by(undo, move |s| {
            s.require_table(&table)?;
            let conn = &s.conn;
            ops.iter()
                .enumerate()
                .map(|(index, op)| {
                    let result = match op {
                        RowOp::Insert(row) => rows::insert(conn, &table, row).map(Some),
                        RowOp::Update(row, if_match) => rows::update(conn, &table, row, if_match).map(Some),
                        RowOp::Upsert(row) => rows::upsert(conn, &table, row).map(Some),
                        RowOp::Delete(pk, rk, if_match) => rows::delete(conn, &table, pk, rk, if_match).map(|()| None),
                    };
                    result.map_err(|e| e.at_batch_index(index))
                })
                .collect()
        })
        .await
    }
}

/// A batch operation as the writer runs it, its rows encoded on the caller's thread.
enum RowOp {
    Insert(Row),
    Update(Row, IfMatch),
    Upsert(Row),
    Delete(String, String, IfMatch),
}

impl RowOp {
    fn of(op: &BatchOp) -> Result<RowOp> {
        Ok(match op {
            BatchOp::Insert(entity) => RowOp::Insert(Row::whole(entity)?),
            BatchOp::Update { entity, mode, if_match } => RowOp::Update(Row::of(entity, *mode)?, if_match.clone()),
            BatchOp::Upsert { entity, mode } => RowOp::Upsert(Row::of(entity, *mode)?),
            BatchOp::Delete {
                partition_key,
                row_key,
                if_match,
            } => RowOp::Delete(partition_key.clone(), row_key.clone(), if_match.clone()),
        })
    }
}
