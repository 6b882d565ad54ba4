//! The row operations, one cached statement each: a plain `INSERT` whose primary-key conflict
//! is the AlreadyExists, an `UPDATE … WHERE etag = ?` whose zero rows is the precondition
//! failure (one more lookup tells it from a missing row, on that path only), a single upsert
//! statement for a replace. Only a merge reads the row first: its properties are merged in Rust,
//! inside the same transaction as the write.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, params};
use tabletalk_clock::{Clock as _, SystemClock};

use super::props;
use super::session::sql_error;
use crate::entity::format_datetime;
use crate::{Continuation, ETag, Entity, ErrorKind, IfMatch, Page, RangeQuery, Result, StoreError, UpdateMode, Value};

/// A write's version: a fresh ETag, unique across processes (the commit time plus random
/// bits), and that time as the row's timestamp stores it — formatted once for both. The
/// storage engine's own stamp, as Azure's `Timestamp` is the service's: the system clock.
fn stamp() -> (ETag, String) {
    let ts = format_datetime(&SystemClock.now());
    let etag = ETag(format!("W/\"datetime'{ts}'{:08x}\"", rand::random::<u32>()));
    (etag, ts)
}

/// An entity as a write stores it, made on the caller's thread: the properties are encoded
/// before the call is queued, because the writer thread is the one every write of the store
/// waits for, and should only bind and step. A merge keeps its properties to lay over the
/// row's, which only the writer can read.
pub(super) struct Row {
    pk: String,
    rk: String,
    props: Props,
}

enum Props {
    Whole(String),
    Merged(BTreeMap<String, Value>),
}

impl Row {
    /// The whole entity, as an insert or a replace writes it.
    pub(super) fn whole(entity: &Entity) -> Result<Row> {
        Row::of(entity, UpdateMode::Replace)
    }

    pub(super) fn of(entity: &Entity, mode: UpdateMode) -> Result<Row> {
        let props = match mode {
            UpdateMode::Replace => Props::Whole(props::encode(&entity.properties)?),
            UpdateMode::Merge => Props::Merged(entity.properties.clone()),
        };
        Ok(Row {
            pk: entity.partition_key.clone(),
            rk: entity.row_key.clone(),
            props,
        })
    }

    /// The text to store: a merge's laid over the row's properties `existing`, if any.
    fn props_over(&self, existing: Option<&str>) -> Result<Cow<'_, str>> {
        match (&self.props, existing) {
            (Props::Whole(props), _) => Ok(Cow::Borrowed(props)),
            (Props::Merged(changed), None) => props::encode(changed).map(Cow::Owned),
            (Props::Merged(changed), Some(existing)) => merge(existing, changed).map(Cow::Owned),
        }
    }
}

pub(super) fn decode_row(pk: String, rk: String, etag: String, ts: String, stored: String) -> Result<Entity> {
    let properties = props::decode(&stored)?;
    let timestamp = DateTime::parse_from_rfc3339(&ts).ok().map(|t| t.with_timezone(&Utc));
    Ok(Entity {
        partition_key: pk,
        row_key: rk,
        properties,
        etag: Some(ETag(etag)),
        timestamp,
    })
}

fn not_found() -> StoreError {
    StoreError::not_found("the specified resource does not exist")
}

fn precondition_failed() -> StoreError {
    StoreError::new(
        ErrorKind::PreconditionFailed,
        "the update condition specified in the request was not satisfied",
    )
}

/// One entity, or `None`.
pub(super) fn get(conn: &Connection, table: &str, pk: &str, rk: &str) -> Result<Option<Entity>> {
    let row: Option<(String, String, String)> = conn
        .prepare_cached("SELECT etag, ts, props FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3")
        .and_then(|mut s| {
            s.query_row(params![table, pk, rk], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(sql_error)?;
    row.map(|(etag, ts, props)| decode_row(pk.to_owned(), rk.to_owned(), etag, ts, props))
        .transpose()
}

/// The ETag and properties of a row, for a merge.
fn current(conn: &Connection, table: &str, pk: &str, rk: &str) -> Result<Option<(String, String)>> {
    conn.prepare_cached("SELECT etag, props FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3")
        .and_then(|mut s| {
            s.query_row(params![table, pk, rk], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(sql_error)
}

/// Why a conditional write matched no row: the row is missing, or its ETag is another.
fn no_match(conn: &Connection, table: &str, pk: &str, rk: &str) -> StoreError {
    let exists = conn
        .prepare_cached("SELECT 1 FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3")
        .and_then(|mut s| s.query_row(params![table, pk, rk], |_| Ok(())).optional());
    match exists {
        Ok(Some(())) => precondition_failed(),
        Ok(None) => not_found(),
        Err(e) => sql_error(e),
    }
}

/// `changed` merged over the stored properties `existing`.
fn merge(existing: &str, changed: &BTreeMap<String, Value>) -> Result<String> {
    let mut merged = props::decode(existing)?;
    merged.extend(changed.iter().map(|(name, value)| (name.clone(), value.clone())));
    props::encode(&merged)
}

pub(super) fn insert(conn: &Connection, table: &str, row: &Row) -> Result<ETag> {
    let props = row.props_over(None)?;
    let (etag, ts) = stamp();
    conn.prepare_cached("INSERT INTO entities (tbl, pk, rk, etag, ts, props) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        .and_then(|mut s| s.execute(params![table, row.pk, row.rk, etag.0, ts, props]))
        .map_err(sql_error)?;
    Ok(etag)
}

/// Writes `props` over the row if its ETag is `expected` (any ETag for `None`); `None` when no
/// row matched.
fn overwrite(conn: &Connection, table: &str, row: &Row, props: &str, expected: Option<&str>) -> Result<Option<ETag>> {
    let (etag, ts) = stamp();
    let (pk, rk) = (&row.pk, &row.rk);
    let changed = match expected {
        Some(expected) => conn
            .prepare_cached(
                "UPDATE entities SET etag = ?4, ts = ?5, props = ?6
                 WHERE tbl = ?1 AND pk = ?2 AND rk = ?3 AND etag = ?7",
            )
            .and_then(|mut s| s.execute(params![table, pk, rk, etag.0, ts, props, expected])),
        None => conn
            .prepare_cached("UPDATE entities SET etag = ?4, ts = ?5, props = ?6 WHERE tbl = ?1 AND pk = ?2 AND rk = ?3")
            .and_then(|mut s| s.execute(params![table, pk, rk, etag.0, ts, props])),
    }
    .map_err(sql_error)?;
    Ok((changed > 0).then_some(etag))
}

pub(super) fn update(conn: &Connection, table: &str, row: &Row, if_match: &IfMatch) -> Result<ETag> {
    let (pk, rk) = (&row.pk, &row.rk);
    let expected = match if_match {
        IfMatch::Etag(etag) => Some(etag.0.as_str()),
        IfMatch::Any => None,
    };
    let existing = match &row.props {
        Props::Whole(_) => None,
        Props::Merged(_) => {
            let (etag, existing) = current(conn, table, pk, rk)?.ok_or_else(not_found)?;
            if expected.is_some_and(|expected| expected != etag) {
                return Err(precondition_failed());
            }
            Some(existing)
        }
    };
    let props = row.props_over(existing.as_deref())?;
    overwrite(conn, table, row, &props, expected)?.ok_or_else(|| no_match(conn, table, pk, rk))
}

pub(super) fn upsert(conn: &Connection, table: &str, row: &Row) -> Result<ETag> {
    match &row.props {
        Props::Whole(props) => {
            let (etag, ts) = stamp();
            conn.prepare_cached(
                "INSERT INTO entities (tbl, pk, rk, etag, ts, props) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (tbl, pk, rk) DO UPDATE SET etag = ?4, ts = ?5, props = ?6",
            )
            .and_then(|mut s| s.execute(params![table, row.pk, row.rk, etag.0, ts, props]))
            .map_err(sql_error)?;
            Ok(etag)
        }
        Props::Merged(_) => match current(conn, table, &row.pk, &row.rk)? {
            // The write lock is held since BEGIN IMMEDIATE: the row read is the row written over.
            Some((etag, existing)) => overwrite(conn, table, row, &row.props_over(Some(&existing))?, Some(&etag))?
                .ok_or_else(|| StoreError::internal("a row changed under the write lock")),
            None => insert(conn, table, row),
        },
    }
}

pub(super) fn delete(conn: &Connection, table: &str, pk: &str, rk: &str, if_match: &IfMatch) -> Result<()> {
    let deleted = match if_match {
        IfMatch::Etag(etag) => conn
            .prepare_cached("DELETE FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3 AND etag = ?4")
            .and_then(|mut s| s.execute(params![table, pk, rk, etag.0])),
        IfMatch::Any => conn
            .prepare_cached("DELETE FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk = ?3")
            .and_then(|mut s| s.execute(params![table, pk, rk])),
    }
    .map_err(sql_error)?;
    if deleted > 0 {
        Ok(())
    } else {
        Err(no_match(conn, table, pk, rk))
    }
}

/// One page of a row-key range. A continuation from this backend is the first row key of the
/// next page. The statement's text depends only on which bounds are set (the page size is a
/// parameter), so nine statements cover every query.
pub(super) fn query(conn: &Connection, table: &str, query: &RangeQuery) -> Result<Page> {
    let from = match &query.continuation {
        Some(Continuation {
            next_row_key: Some(rk), ..
        }) => Bound::Included(rk.clone()),
        Some(_) => return Ok(Page::default()),
        None => query.from.clone(),
    };
    let mut sql = String::from("SELECT rk, etag, ts, props FROM entities WHERE tbl = ?1 AND pk = ?2");
    let mut args: Vec<SqlValue> = vec![
        SqlValue::Text(table.to_owned()),
        SqlValue::Text(query.partition_key.clone()),
    ];
    for (bound, inclusive, exclusive) in [(&from, ">=", ">"), (&query.to, "<=", "<")] {
        let (op, key) = match bound {
            Bound::Included(k) => (inclusive, k),
            Bound::Excluded(k) => (exclusive, k),
            Bound::Unbounded => continue,
        };
        args.push(SqlValue::Text(key.clone()));
        sql.push_str(&format!(" AND rk {op} ?{}", args.len()));
    }
    args.push(SqlValue::Integer(query.top as i64 + 1));
    sql.push_str(&format!(" ORDER BY rk LIMIT ?{}", args.len()));
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
        entities.push(decode_row(query.partition_key.clone(), rk, etag, ts, props)?);
    }
    Ok(Page { entities, continuation })
}

pub(super) fn create_table(conn: &Connection, table: &str) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO tables (name) VALUES (?1)")
        .and_then(|mut s| s.execute([table]))
        .map_err(sql_error)?;
    Ok(())
}

pub(super) fn delete_table(conn: &Connection, table: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM entities WHERE tbl = ?1")
        .and_then(|mut s| s.execute([table]))
        .map_err(sql_error)?;
    conn.prepare_cached("DELETE FROM tables WHERE name = ?1")
        .and_then(|mut s| s.execute([table]))
        .map_err(sql_error)?;
    Ok(())
}
