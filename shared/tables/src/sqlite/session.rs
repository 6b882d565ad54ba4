//! One SQLite connection as the store's threads hold it: opened with the store's pragmas, with
//! its statements cached and the tables it has seen exist remembered, so a call pays neither a
//! prepare nor a table check after the first.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OptionalExtension};

use crate::{ErrorKind, Result, StoreError};

/// How long a writer waits for another process's write lock before giving up as Unavailable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Distinct statements a connection keeps prepared: the row statements, the transaction and
/// savepoint statements and the query shapes (one per combination of bounds) come to about 30.
const STATEMENT_CACHE: usize = 64;

/// Durability of a commit. `Full` fsyncs every commit (nothing acknowledged is lost, even on
/// power loss); `Normal` fsyncs at WAL checkpoints only (a process crash loses nothing, a power
/// loss may lose the last commits) and is several times faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Normal,
}

/// What every connection of one store shares.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Bumped after a commit that deleted a table, before its caller is answered: every
    /// connection then forgets the tables it had seen, so no call that starts after a
    /// `delete_table` answered trusts a stale "exists". (A table deleted by another process is
    /// noticed only by a fresh connection; tabletalk deletes tables in tests only.)
    pub(super) dropped_tables: AtomicU64,
    /// Group commits made (see [`super::SqliteTables::group_commits`]).
    pub(super) commits: AtomicU64,
}

/// A connection and what it remembers.
pub(super) struct Session {
    pub(super) conn: Connection,
    /// Tables this connection has seen exist, valid while `generation` is the store's
    /// `dropped_tables`.
    known: HashSet<String>,
    generation: u64,
    /// A call of the open transaction deleted a table.
    dropped_pending: bool,
    shared: Arc<Shared>,
}

impl Session {
    pub(super) fn new(conn: Connection, shared: Arc<Shared>) -> Session {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let generation = shared.dropped_tables.load(Ordering::Acquire);
        Session {
            conn,
            known: HashSet::new(),
            generation,
            dropped_pending: false,
            shared,
        }
    }

    /// `NotFound` unless `table` exists; asks SQLite once per connection and table.
    pub(super) fn require_table(&mut self, table: &str) -> Result<()> {
        let generation = self.shared.dropped_tables.load(Ordering::Acquire);
        if generation != self.generation {
            self.known.clear();
            self.generation = generation;
        }
        if self.known.contains(table) {
            return Ok(());
        }
        let exists = self
            .conn
            .prepare_cached("SELECT 1 FROM tables WHERE name = ?1")
            .and_then(|mut s| s.query_row([table], |_| Ok(())).optional())
            .map_err(sql_error)?
            .is_some();
        if !exists {
            return Err(StoreError::not_found(format!("table {table} does not exist")));
        }
        self.known.insert(table.to_owned());
        Ok(())
    }

    /// Forgets every table seen: after a rollback, a table created by a call that did not
    /// commit must not stay "seen".
    pub(super) fn forget_tables(&mut self) {
        self.known.clear();
    }

    /// Forgets one table, for the call that deletes it; the other connections are told after
    /// the commit ([`Session::announce_dropped_tables`]).
    pub(super) fn forget_table(&mut self, table: &str) {
        self.known.remove(table);
        self.dropped_pending = true;
    }

    /// After a commit: if it deleted a table, every connection forgets the tables it had seen.
    /// (After a rollback there is nothing to tell: a spurious announcement would only cost
    /// each connection one table check.)
    pub(super) fn announce_dropped_tables(&mut self) {
        if std::mem::take(&mut self.dropped_pending) {
            self.shared.dropped_tables.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Counts a group commit that succeeded.
    pub(super) fn count_commit(&self) {
        self.shared.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs one cached statement that takes no parameters and returns no rows (BEGIN, COMMIT,
    /// savepoints).
    pub(super) fn exec(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([])?;
        Ok(())
    }
}

pub(super) fn open_connection(path: &Path, durability: Durability) -> Result<Connection> {
    let conn = Connection::open(path).map_err(sql_error)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_error)?;
    let synchronous = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    // Temporary storage in memory: a group commit's savepoints keep a sub-journal, which
    // SQLite otherwise spills to a file in the temp directory past 64 KiB — a file created,
    // written and deleted by every big group.
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; PRAGMA temp_store = MEMORY;"
    ))
    .map_err(sql_error)?;
    // The query planner's stability guarantee: plans never depend on bound values. Without
    // it SQLite marks a range query's parameters as plan-relevant (a truth-probability
    // heuristic of the planner, and `LIMIT ?`), and a cached statement so marked is prepared
    // again every time its bindings are cleared — on every return to the cache, so every
    // range read paid a full prepare. One table with one key has one plan anyway.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(sql_error)?;
    Ok(conn)
}

pub(super) fn sql_error(e: rusqlite::Error) -> StoreError {
    if is_primary_key_conflict(&e) {
        return StoreError::new(ErrorKind::AlreadyExists, "the specified entity already exists");
    }
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::unavailable(format!("sqlite: {e}")),
        _ => StoreError::internal(format!("sqlite: {e}")),
    }
}

/// A failed `COMMIT`. Never a conflict of the caller's: the write lock was held since `BEGIN
/// IMMEDIATE`. It may be an I/O error on the WAL's fsync, after which the commit frame may be on
/// disk all the same, so it is reported as a failure that may have applied (Internal), or as
/// Unavailable for a busy or locked file.
pub(super) fn commit_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::unavailable(format!("sqlite commit: {e}"))
        }
        _ => StoreError::internal(format!("sqlite commit: {e}")),
    }
}

/// True when an `INSERT` met a row with the same keys.
pub(super) fn is_primary_key_conflict(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
}
