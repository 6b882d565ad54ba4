//! The text index: every way a text row is written or removed keeps it, in that write's
//! transaction; a query reads one partition's rows of one word in row-key order.

use std::ops::Bound;

use super::*;
use crate::text::{WORDS, row_key};
use crate::{ErrorKind, Tables, Value};

fn text_row(pk: &str, number: u64, words: &str) -> Entity {
    Entity::new(pk, row_key(&format!("{number:019}"))).with(WORDS, Value::String(words.to_owned()))
}

async fn open() -> (Tables, TableName, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tt-text-{}", uuid::Uuid::new_v4()));
    let path = dir.join("tables.sqlite");
    let tables = Tables::new(SqliteTables::open(&path, Durability::Full).unwrap());
    let table = TableName::parse("Texts").unwrap();
    tables.create_table(&table).await.unwrap();
    (tables, table, path)
}

/// The numbers of the rows of `pk` holding `word`, from `from` on, at most `max`.
async fn found(
    tables: &Tables,
    table: &TableName,
    pk: &str,
    word: &str,
    from: Bound<&str>,
    max: usize,
) -> (Vec<u64>, bool) {
    let (rows, more) = tables.text_query(table, pk, word, from, max).await.unwrap();
    let numbers = rows
        .iter()
        .map(|row| crate::text::number(&row.row_key).unwrap() as u64)
        .collect();
    (numbers, more)
}

/// The documents holding `word` of partition `pk` in the FTS5 table itself (a query's join
/// to the rows would hide a document left behind).
fn documents(path: &std::path::Path, pk: &str, word: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    let token = format!("\"{}\"", super::text::token("texts", pk, word));
    conn.query_row("SELECT count(*) FROM texts WHERE texts MATCH ?1", [token], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_word_finds_its_partitions_rows_in_key_order_from_a_key_on() {
    let (tables, table, _) = open().await;
    assert!(tables.indexes_text());
    // Written newest last, as messages are: descending numbers.
    for number in (1..=5).rev() {
        let words = if number % 2 == 1 { "odd all" } else { "even all" };
        tables.insert(&table, &text_row("room", number, words)).await.unwrap();
    }
    tables.insert(&table, &text_row("other", 3, "odd all")).await.unwrap();
    let other = TableName::parse("Elsewhere").unwrap();
    tables.create_table(&other).await.unwrap();
    tables.insert(&other, &text_row("room", 2, "odd")).await.unwrap();
    // A row that is not a text row is not indexed, whatever its properties.
    tables
        .insert(
            &table,
            &Entity::new("room", "w:odd 9").with(WORDS, Value::String("odd".into())),
        )
        .await
        .unwrap();

    assert_eq!(
        found(&tables, &table, "room", "odd", Bound::Unbounded, 10).await,
        (vec![1, 3, 5], false)
    );
    assert_eq!(
        found(&tables, &table, "room", "all", Bound::Unbounded, 2).await,
        (vec![1, 2], true)
    );
    let two = row_key("0000000000000000002");
    assert_eq!(
        found(&tables, &table, "room", "all", Bound::Included(&two), 2).await,
        (vec![2, 3], true)
    );
    assert_eq!(
        found(&tables, &table, "room", "all", Bound::Excluded(&two), 5).await,
        (vec![3, 4, 5], false)
    );
    assert_eq!(
        found(&tables, &table, "other", "odd", Bound::Unbounded, 10).await,
        (vec![3], false)
    );
    assert_eq!(
        found(&tables, &table, "room", "od", Bound::Unbounded, 10).await,
        (vec![], false)
    );
    assert_eq!(
        found(&tables, &other, "room", "odd", Bound::Unbounded, 10).await,
        (vec![2], false)
    );
    let bad = tables
        .text_query(&table, "room", "odd", Bound::Included("w:1"), 5)
        .await;
    assert!(bad.unwrap_err().is(ErrorKind::InvalidInput));
}

#[tokio::test]
async fn every_write_and_delete_keeps_the_index_and_a_failed_transaction_none() {
    let (tables, table, path) = open().await;
    tables.insert(&table, &text_row("a", 7, "one two")).await.unwrap();
    tables.insert(&table, &text_row("b", 7, "one")).await.unwrap();
    // Replaced, merged, upserted: the words are the row's words now.
    tables
        .update(&table, &text_row("a", 7, "three"), UpdateMode::Replace, &IfMatch::Any)
        .await
        .unwrap();
    assert_eq!(
        found(&tables, &table, "a", "one", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
    assert_eq!(
        found(&tables, &table, "a", "three", Bound::Unbounded, 9).await.0,
        vec![7]
    );
    assert_eq!(
        found(&tables, &table, "b", "one", Bound::Unbounded, 9).await.0,
        vec![7],
        "another partition's row of the same number keeps its words"
    );
    tables
        .update(
            &table,
            &Entity::new("a", row_key("0000000000000000007")).with("other", Value::Int64(1)),
            UpdateMode::Merge,
            &IfMatch::Any,
        )
        .await
        .unwrap();
    assert_eq!(
        found(&tables, &table, "a", "three", Bound::Unbounded, 9).await.0,
        vec![7],
        "a merge keeps the words"
    );
    tables
        .upsert(&table, &text_row("a", 7, "four"), UpdateMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        found(&tables, &table, "a", "three", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
    assert_eq!(
        found(&tables, &table, "a", "four", Bound::Unbounded, 9).await.0,
        vec![7]
    );
    // Deleted: gone, and the other partition's row of that number stays.
    tables
        .delete(&table, "a", &row_key("0000000000000000007"), &IfMatch::Any)
        .await
        .unwrap();
    assert_eq!(
        found(&tables, &table, "a", "four", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
    assert_eq!(documents(&path, "a", "four"), 0, "no document left of a deleted row");
    assert_eq!(documents(&path, "a", "one") + documents(&path, "a", "three"), 0);
    assert_eq!(found(&tables, &table, "b", "one", Bound::Unbounded, 9).await.0, vec![7]);
    assert_eq!(documents(&path, "b", "one"), 1);
    // A transaction that fails indexes none of its rows.
    let ops = [
        BatchOp::Insert(text_row("b", 8, "five")),
        BatchOp::Insert(text_row("b", 7, "clash")),
    ];
    assert!(tables.transact(&table, "b", &ops).await.is_err());
    assert_eq!(
        found(&tables, &table, "b", "five", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
    assert_eq!(
        found(&tables, &table, "b", "clash", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
    assert_eq!(documents(&path, "b", "five") + documents(&path, "b", "clash"), 0);
    tables.transact(&table, "b", &ops[..1]).await.unwrap();
    // Kept across a reopen; a deleted table's rows are gone from it.
    drop(tables);
    let tables = Tables::new(SqliteTables::open(&path, Durability::Full).unwrap());
    assert_eq!(
        found(&tables, &table, "b", "five", Bound::Unbounded, 9).await.0,
        vec![8]
    );
    tables.delete_table(&table).await.unwrap();
    assert_eq!(
        documents(&path, "b", "one") + documents(&path, "b", "five"),
        0,
        "none of a deleted table"
    );
    tables.create_table(&table).await.unwrap();
    assert_eq!(
        found(&tables, &table, "b", "one", Bound::Unbounded, 9).await.0,
        Vec::<u64>::new()
    );
}
