//! The embedded store: Azure Table semantics on one SQLite file, the default backend when no
//! connection string is configured.
//!
//! Why SQLite: persistent, crash-safe through its write-ahead log, no server to start, and
//! safe for several processes on one file (file locks), so two tabletalk processes sharing a
//! data directory behave like two Functions instances sharing a storage account.
//!
//! Layout: one SQL table holds every entity, keyed (table, PartitionKey, RowKey) with its ETag,
//! timestamp and properties as typed JSON. Every write runs in a `BEGIN IMMEDIATE` transaction,
//! so an ETag comparison and the write it guards are atomic across processes; a batch is one
//! such transaction, which is what makes it all-or-nothing.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::entity::format_datetime;
use super::{
    BatchOp, Continuation, ETag, Entity, ErrorKind, IfMatch, Page, RangeQuery, Result, StoreError, TableBackend,
    TableName, UpdateMode, Value,
};

/// How long a writer waits for another process's write lock before giving up as Unavailable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Durability of a commit. `Full` fsyncs every commit (nothing acknowledged is lost, even on
/// power loss); `Normal` fsyncs at WAL checkpoints only (a process crash loses nothing, a power
/// loss may lose the last commits) and is several times faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Normal,
}

/// The embedded store. Cloning is cheap; clones share the connections.
#[derive(Debug, Clone)]
pub struct SqliteTables {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// One writer: SQLite serialises writers anyway, and a std mutex held inside
    /// `spawn_blocking` never blocks the async runtime.
    writer: Mutex<Connection>,
    /// Idle reader connections; WAL lets readers run beside the writer.
    readers: Mutex<Vec<Connection>>,
}

impl SqliteTables {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<SqliteTables> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::internal(format!("cannot create {}: {e}", dir.display())))?;
        }
        let writer = open_connection(&path, durability)?;
        writer
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS entities (
                     tbl TEXT NOT NULL, pk TEXT NOT NULL, rk TEXT NOT NULL,
                     etag TEXT NOT NULL, ts TEXT NOT NULL, props TEXT NOT NULL,
                     PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID;",
            )
            .map_err(sql_error)?;
        Ok(SqliteTables {
            inner: Arc::new(Inner {
                path,
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Runs `f` on the writer connection inside an immediate transaction, off the runtime.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let value = f(&tx)?;
            tx.commit().map_err(sql_error)?;
            Ok(value)
        })
        .await
        .map_err(|e| StoreError::internal(format!("sqlite task failed: {e}")))?
    }

    /// Runs `f` on a reader connection, off the runtime.
    async fn read<T: Send + 'static>(&self, f: impl FnOnce(&Connection) -> Result<T> + Send + 'static) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let idle = inner.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let conn = match idle {
                Some(conn) => conn,
                None => open_connection(&inner.path, Durability::Normal)?,
            };
            let value = f(&conn);
            inner.readers.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
            value
        })
        .await
        .map_err(|e| StoreError::internal(format!("sqlite task failed: {e}")))?
    }
}

fn open_connection(path: &Path, durability: Durability) -> Result<Connection> {
    let conn = Connection::open(path).map_err(sql_error)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_error)?;
    let synchronous = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};"
    ))
    .map_err(sql_error)?;
    Ok(conn)
}

fn sql_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::unavailable(format!("sqlite: {e}")),
        Some(ErrorCode::ConstraintViolation) => {
            StoreError::new(ErrorKind::AlreadyExists, "the specified entity already exists")
        }
        _ => StoreError::internal(format!("sqlite: {e}")),
    }
}

/// Table names are case-insensitive in Azure.
fn table_key(table: &TableName) -> String {
    table.as_str().to_ascii_lowercase()
}

/// A fresh ETag, unique across processes: the commit time plus random bits.
fn new_etag(now: DateTime<Utc>) -> ETag {
    ETag(format!(
        "W/\"datetime'{}'{:08x}\"",
        format_datetime(&now),
        rand::random::<u32>()
    ))
}

fn encode_props(entity: &Entity) -> Result<String> {
    serde_json::to_string(&entity.properties).map_err(|e| StoreError::internal(format!("encode: {e}")))
}

fn decode_row(tbl_pk_rk: (String, String), etag: String, ts: String, props: String) -> Result<Entity> {
    let properties =
        serde_json::from_str(&props).map_err(|e| StoreError::internal(format!("stored entity unreadable: {e}")))?;
    let timestamp = DateTime::parse_from_rfc3339(&ts).ok().map(|t| t.with_timezone(&Utc));
    Ok(Entity {
        partition_key: tbl_pk_rk.0,
        row_key: tbl_pk_rk.1,
        properties,
        etag: Some(ETag(etag)),
        timestamp,
    })
}

fn require_table(tx: &Connection, table: &str) -> Result<()> {
    let exists: Option<String> = tx
        .query_row("SELECT name FROM tables WHERE name = ?1", [table], |r| r.get(0))
        .optional()
        .map_err(sql_error)?;
    match exists {
        Some(_) => Ok(()),
        None => Err(StoreError::not_found(format!("table {table} does not exist"))),
    }
}

fn current(tx: &Connection, table: &str, pk: &str, rk: &str) -> Result<Option<(String, String)>> {
    tx.query_row(
        "SELECT etag, props FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3",
        params![table, pk, rk],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(sql_error)
}

fn check_condition(found: &Option<(String, String)>, if_match: &IfMatch) -> Result<()> {
    match (found, if_match) {
        (None, _) => Err(StoreError::not_found("the specified resource does not exist")),
        (Some((etag, _)), IfMatch::Etag(expected)) if etag != &expected.0 => Err(StoreError::new(
            ErrorKind::PreconditionFailed,
            "the update condition specified in the request was not satisfied",
        )),
        _ => Ok(()),
    }
}

fn write_row(tx: &Connection, table: &str, entity: &Entity, props: &str) -> Result<ETag> {
    let now = Utc::now();
    let etag = new_etag(now);
    tx.execute(
        "INSERT INTO entities (tbl, pk, rk, etag, ts, props) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (tbl, pk, rk) DO UPDATE SET etag = ?4, ts = ?5, props = ?6",
        params![
            table,
            entity.partition_key,
            entity.row_key,
            etag.0,
            format_datetime(&now),
            props
        ],
    )
    .map_err(sql_error)?;
    Ok(etag)
}

/// The properties to store for a replace or merge over `existing`.
fn merged_props(entity: &Entity, mode: UpdateMode, existing: Option<&str>) -> Result<String> {
    match (mode, existing) {
        (UpdateMode::Merge, Some(existing)) => {
            let mut props: std::collections::BTreeMap<String, Value> = serde_json::from_str(existing)
                .map_err(|e| StoreError::internal(format!("stored entity unreadable: {e}")))?;
            props.extend(entity.properties.clone());
            serde_json::to_string(&props).map_err(|e| StoreError::internal(format!("encode: {e}")))
        }
        _ => encode_props(entity),
    }
}

fn apply_insert(tx: &Connection, table: &str, entity: &Entity) -> Result<ETag> {
    if current(tx, table, &entity.partition_key, &entity.row_key)?.is_some() {
        return Err(StoreError::new(
            ErrorKind::AlreadyExists,
            "the specified entity already exists",
        ));
    }
    write_row(tx, table, entity, &encode_props(entity)?)
}

fn apply_update(tx: &Connection, table: &str, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag> {
    let found = current(tx, table, &entity.partition_key, &entity.row_key)?;
    check_condition(&found, if_match)?;
    let props = merged_props(entity, mode, found.as_ref().map(|(_, p)| p.as_str()))?;
    write_row(tx, table, entity, &props)
}

fn apply_upsert(tx: &Connection, table: &str, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
    let found = current(tx, table, &entity.partition_key, &entity.row_key)?;
    let props = merged_props(entity, mode, found.as_ref().map(|(_, p)| p.as_str()))?;
    write_row(tx, table, entity, &props)
}

fn apply_delete(tx: &Connection, table: &str, pk: &str, rk: &str, if_match: &IfMatch) -> Result<()> {
    check_condition(&current(tx, table, pk, rk)?, if_match)?;
    tx.execute(
        "DELETE FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3",
        params![table, pk, rk],
    )
    .map_err(sql_error)?;
    Ok(())
}

#[async_trait]
impl TableBackend for SqliteTables {
    async fn create_table(&self, table: &TableName) -> Result<()> {
        let table = table_key(table);
        self.write(move |tx| {
            tx.execute("INSERT OR IGNORE INTO tables (name) VALUES (?1)", [&table])
                .map_err(sql_error)?;
            Ok(())
        })
        .await
    }

    async fn delete_table(&self, table: &TableName) -> Result<()> {
        let table = table_key(table);
        self.write(move |tx| {
            require_table(tx, &table)?;
            tx.execute("DELETE FROM entities WHERE tbl = ?1", [&table])
                .map_err(sql_error)?;
            tx.execute("DELETE FROM tables WHERE name = ?1", [&table])
                .map_err(sql_error)?;
            Ok(())
        })
        .await
    }

    async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Entity> {
        let (table, pk, rk) = (table_key(table), partition_key.to_owned(), row_key.to_owned());
        self.read(move |conn| {
            let row: Option<(String, String, String)> = conn
                .query_row(
                    "SELECT etag, ts, props FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3",
                    params![table, pk, rk],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(sql_error)?;
            match row {
                Some((etag, ts, props)) => decode_row((pk, rk), etag, ts, props),
                None => {
                    require_table(conn, &table)?;
                    Err(StoreError::not_found("the specified resource does not exist"))
                }
            }
        })
        .await
    }

    async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag> {
        let (table, entity) = (table_key(table), entity.clone());
        self.write(move |tx| {
            require_table(tx, &table)?;
            apply_insert(tx, &table, &entity)
        })
        .await
    }

    async fn update(&self, table: &TableName, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag> {
        let (table, entity, if_match) = (table_key(table), entity.clone(), if_match.clone());
        self.write(move |tx| {
            require_table(tx, &table)?;
            apply_update(tx, &table, &entity, mode, &if_match)
        })
        .await
    }

    async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
        let (table, entity) = (table_key(table), entity.clone());
        self.write(move |tx| {
            require_table(tx, &table)?;
            apply_upsert(tx, &table, &entity, mode)
        })
        .await
    }

    async fn delete(&self, table: &TableName, partition_key: &str, row_key: &str, if_match: &IfMatch) -> Result<()> {
        let (table, pk, rk, if_match) = (
            table_key(table),
            partition_key.to_owned(),
            row_key.to_owned(),
            if_match.clone(),
        );
        self.write(move |tx| {
            require_table(tx, &table)?;
            apply_delete(tx, &table, &pk, &rk, &if_match)
        })
        .await
    }

    async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page> {
        let (table, query) = (table_key(table), query.clone());
        self.read(move |conn| {
            require_table(conn, &table)?;
            // A continuation from this backend is the first row key of the next page.
            let from = match &query.continuation {
                Some(Continuation {
                    next_row_key: Some(rk), ..
                }) => Bound::Included(rk.clone()),
                Some(_) => return Ok(Page::default()),
                None => query.from.clone(),
            };
            let mut sql = String::from("SELECT rk, etag, ts, props FROM entities WHERE tbl = ?1 AND pk = ?2");
            let mut args: Vec<String> = vec![table, query.partition_key.clone()];
            for (bound, inclusive, exclusive) in [(&from, ">=", ">"), (&query.to, "<=", "<")] {
                let (op, key) = match bound {
                    Bound::Included(k) => (inclusive, k),
                    Bound::Excluded(k) => (exclusive, k),
                    Bound::Unbounded => continue,
                };
                args.push(key.clone());
                sql.push_str(&format!(" AND rk {op} ?{}", args.len()));
            }
            sql.push_str(&format!(" ORDER BY rk LIMIT {}", query.top + 1));
            let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                    Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(sql_error)?;
            let mut entities = Vec::with_capacity(query.top);
            let mut continuation = None;
            for row in rows {
                let (rk, etag, ts, props) = row.map_err(sql_error)?;
                if entities.len() == query.top {
                    continuation = Some(Continuation {
                        next_partition_key: query.partition_key.clone(),
                        next_row_key: Some(rk),
                    });
                    break;
                }
                entities.push(decode_row((query.partition_key.clone(), rk), etag, ts, props)?);
            }
            Ok(Page { entities, continuation })
        })
        .await
    }

    async fn transact(&self, table: &TableName, _partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>> {
        let (table, ops) = (table_key(table), ops.to_vec());
        // Any error returned from the closure drops the transaction uncommitted: all or nothing.
        self.write(move |tx| {
            require_table(tx, &table)?;
            ops.iter()
                .enumerate()
                .map(|(index, op)| {
                    let result = match op {
                        BatchOp::Insert(e) => apply_insert(tx, &table, e).map(Some),
                        BatchOp::Update { entity, mode, if_match } => {
                            apply_update(tx, &table, entity, *mode, if_match).map(Some)
                        }
                        BatchOp::Upsert { entity, mode } => apply_upsert(tx, &table, entity, *mode).map(Some),
                        BatchOp::Delete {
                            partition_key,
                            row_key,
                            if_match,
                        } => apply_delete(tx, &table, partition_key, row_key, if_match).map(|()| None),
                    };
                    result.map_err(|e| e.at_batch_index(index))
                })
                .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tables;
    use crate::conformance::Fixture;

    /// A fresh store in its own temporary directory. The directory is left for the OS to clean:
    /// tests run in parallel and each needs its file until the end.
    async fn fixture() -> Option<Fixture> {
        let dir = std::env::temp_dir().join(format!("tt-sqlite-{}", uuid::Uuid::new_v4()));
        let store = SqliteTables::open(dir.join("tables.sqlite"), Durability::Normal).expect("open store");
        Some(Fixture::new(Tables::new(store)))
    }

    crate::conformance_tests!(fixture().await);

    #[tokio::test]
    async fn survives_reopen() {
        let dir = std::env::temp_dir().join(format!("tt-sqlite-{}", uuid::Uuid::new_v4()));
        let path = dir.join("tables.sqlite");
        let table = TableName::parse("Kept").unwrap();
        {
            let tables = Tables::new(SqliteTables::open(&path, Durability::Full).unwrap());
            tables.create_table(&table).await.unwrap();
            tables
                .insert(&table, &Entity::new("p", "r").with("v", Value::Int64(5)))
                .await
                .unwrap();
        }
        let tables = Tables::new(SqliteTables::open(&path, Durability::Full).unwrap());
        let kept = tables.get(&table, "p", "r").await.unwrap().unwrap();
        assert_eq!(kept.i64("v"), Some(5));
        let _ = std::fs::remove_dir_all(dir);
    }
}
