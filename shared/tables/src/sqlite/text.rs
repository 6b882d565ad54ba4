//! The text index ([`crate::text`]): an FTS5 table kept by triggers on `entities`, so a text
//! row is indexed in the transaction that writes it, whichever call writes or deletes it.
//!
//! FTS5 is used for its writes: it gathers a transaction's postings in memory and writes them
//! as one segment, where an index of rows would land each posting on a B-tree page of its own
//! (`docs/decisions/0015-search.md` measures both). Its document is a text row's number, its
//! tokens one per word, each naming its table and partition too (the hex of the three), so a
//! partition's rows holding a word are one token's postings. The rowid is `i64::MAX` minus the
//! row's number: text rows of newer messages have smaller numbers, and FTS5 appends cheaply
//! only in ascending rowid order; a query reads in descending rowid order, which is row-key
//! order. Rows of two partitions may share a number: the document of a number holds the
//! tokens of every text row with it (`text_rows` lists them), which is harmless as every token
//! names its partition.

use std::ops::Bound;

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, params};

use super::rows::decode_row;
use super::session::sql_error;
use crate::text::{ROW_PREFIX, WORDS, number};
use crate::{Entity, Result};

/// Segments of a level FTS5 merges into one as it writes (its default is 4): each posting is
/// written again once per level, so a wider merge writes each fewer times, for a few more
/// segments a query looks in.
const AUTOMERGE: usize = 16;

/// The tables, the functions' uses and the triggers; run on every open (each `IF NOT EXISTS`).
pub(super) fn schema() -> String {
    // In SQL rather than through `number`, so that a tool without this module's functions
    // (the `sqlite3` shell) can still write every other row.
    let is_text_row = |row: &str| {
        format!(
            "{row}.rk GLOB '{ROW_PREFIX}{digits}' AND substr({row}.rk, {start}) <= '{max}'",
            digits = "[0-9]".repeat(19),
            start = ROW_PREFIX.len() + 1,
            max = i64::MAX,
        )
    };
    // The words of a row as stored (`props.rs`: each property is `{"t": type, "v": value}`).
    let words = |row: &str| format!("json_extract({row}.props, '$.{WORDS}.v')");
    // The rowid of a text row's key `rk` (see [`rowid`]).
    let rowid = |rk: &str| {
        format!(
            "({max} - CAST(substr({rk}, {start}) AS INTEGER))",
            max = i64::MAX,
            start = ROW_PREFIX.len() + 1
        )
    };
    // Whether a row of another partition or table has the number of `row`.
    let shared = |row: &str| {
        format!("EXISTS (SELECT 1 FROM text_rows WHERE rk = {row}.rk AND (tbl <> {row}.tbl OR pk <> {row}.pk))")
    };
    // The document of the number of `row`, written again from every text row with it, when
    // `when` holds.
    let rewrite = |row: &str, when: &str| {
        format!(
            "DELETE FROM texts WHERE rowid = {row_rowid} AND {when};
             INSERT INTO texts (rowid, tokens)
                 SELECT {r_rowid}, group_concat(text_tokens(e.tbl, e.pk, {words}), ' ')
                 FROM text_rows r JOIN entities e ON e.tbl = r.tbl AND e.pk = r.pk AND e.rk = r.rk
                 WHERE r.rk = {row}.rk AND {when} GROUP BY r.rk;",
            words = words("e"),
            row_rowid = rowid(&format!("{row}.rk")),
            r_rowid = rowid("r.rk"),
        )
    };
    format!(
        "CREATE TABLE IF NOT EXISTS text_rows (
             rk TEXT NOT NULL, tbl TEXT NOT NULL, pk TEXT NOT NULL,
             PRIMARY KEY (rk, tbl, pk)) WITHOUT ROWID;
         CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(
             tokens, content = '', contentless_delete = 1, detail = none, tokenize = 'ascii');
         INSERT INTO texts (texts, rank) VALUES ('automerge', {AUTOMERGE});
         CREATE TRIGGER IF NOT EXISTS text_row_inserted AFTER INSERT ON entities WHEN {is_new} BEGIN
             INSERT OR IGNORE INTO text_rows (rk, tbl, pk) VALUES (new.rk, new.tbl, new.pk);
             INSERT INTO texts (rowid, tokens)
                 SELECT {new_rowid}, text_tokens(new.tbl, new.pk, {new_words}) WHERE NOT {shared_new};
             {rewrite_shared}
         END;
         CREATE TRIGGER IF NOT EXISTS text_row_updated AFTER UPDATE OF props ON entities WHEN {is_new} BEGIN
             {rewrite_new}
         END;
         CREATE TRIGGER IF NOT EXISTS text_row_deleted AFTER DELETE ON entities WHEN {is_old} BEGIN
             DELETE FROM text_rows WHERE rk = old.rk AND tbl = old.tbl AND pk = old.pk;
             {rewrite_old}
         END;",
        is_new = is_text_row("new"),
        is_old = is_text_row("old"),
        new_words = words("new"),
        new_rowid = rowid("new.rk"),
        shared_new = shared("new"),
        // A new row alone with its number (nearly always) is a document of its own.
        rewrite_shared = rewrite("new", &shared("new")),
        rewrite_new = rewrite("new", "1"),
        rewrite_old = rewrite("old", "1"),
    )
}

/// Registers the function the triggers call, on the connection that writes, before [`schema`].
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("text_tokens", 3, flags, |ctx| {
        let (table, pk) = (ctx.get::<String>(0)?, ctx.get::<String>(1)?);
        // Words that are not text (no row the store writes) are none.
        let words = ctx.get_raw(2).as_str().unwrap_or_default();
        Ok(words
            .split_whitespace()
            .map(|word| token(&table, &pk, word))
            .collect::<Vec<_>>()
            .join(" "))
    })
}

/// The rowid of text row number `number`: descending as numbers ascend.
fn rowid(number: i64) -> i64 {
    i64::MAX - number
}

/// A word's token in a partition: the hex of table, partition and word (none of which holds a
/// control character), one token to the `ascii` tokenizer.
pub(super) fn token(table: &str, pk: &str, word: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut token = String::with_capacity(2 * (table.len() + pk.len() + word.len() + 2));
    for byte in [table.as_bytes(), pk.as_bytes(), word.as_bytes()].join(&0x1f) {
        token.push(char::from(HEX[usize::from(byte >> 4)]));
        token.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    token
}

/// Up to `max` text rows of partition `pk` holding `word`, in row-key order from `from`, and
/// whether there are more.
pub(super) fn query(
    conn: &Connection,
    table: &str,
    pk: &str,
    word: &str,
    from: Bound<&str>,
    max: usize,
) -> Result<(Vec<Entity>, bool)> {
    let start = |key: &str| number(key).map(rowid).unwrap_or(-1);
    let highest = match from {
        Bound::Unbounded => i64::MAX,
        Bound::Included(key) => start(key),
        Bound::Excluded(key) => start(key) - 1,
    };
    let sql = format!(
        "SELECT e.pk, e.rk, e.etag, e.ts, e.props FROM texts t CROSS JOIN entities e
         WHERE texts MATCH ?1 AND t.rowid <= ?2
           AND e.tbl = ?3 AND e.pk = ?4 AND e.rk = printf('{ROW_PREFIX}%019d', 9223372036854775807 - t.rowid)
         ORDER BY t.rowid DESC LIMIT ?5"
    );
    let mut rows: Vec<Entity> = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            let found = s.query_map(
                params![
                    format!("\"{}\"", token(table, pk, word)),
                    highest,
                    table,
                    pk,
                    max as i64 + 1
                ],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )?;
            found.collect::<rusqlite::Result<Vec<(String, String, String, String, String)>>>()
        })
        .map_err(sql_error)?
        .into_iter()
        .map(|(pk, rk, etag, ts, props)| decode_row(pk, rk, etag, ts, props))
        .collect::<Result<_>>()?;
    let more = rows.len() > max;
    rows.truncate(max);
    Ok((rows, more))
}
