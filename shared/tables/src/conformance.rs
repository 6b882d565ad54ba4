//! The conformance suite every backend passes: plain async functions over [`Tables`], in the
//! style of object_store's `integration.rs`.
//!
//! The suite runs on both backends through the one backend matrix (`crate::backend_matrix!`),
//! as `conformance::embedded::<name>` and `conformance::azurite::<name>`. Every function
//! creates its own uniquely named tables through the fixture, so the suite runs in parallel
//! against one shared service.

use std::ops::Bound;
use std::sync::Arc;

use chrono::{TimeZone, Utc};

use super::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, TableName, Tables, UpdateMode, Value};

/// A store under test and a source of fresh table names.
pub struct Fixture {
    pub tables: Tables,
    pub prefix: String,
}

impl Fixture {
    pub fn new(tables: Tables) -> Fixture {
        let prefix = format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        Fixture { tables, prefix }
    }

    /// Creates a table unique to this fixture and test.
    pub async fn table(&self, name: &str) -> TableName {
        let table = TableName::parse(format!("{}{name}", self.prefix)).expect("valid test table name");
        self.tables.create_table(&table).await.expect("create table");
        table
    }
}

#[cfg(test)]
crate::backend_matrix!(
    embedded: embedded_fixture(),
    azurite: azurite_fixture();
    crud, statuses, if_match_any, merge_vs_replace, upsert, range_and_continuation,
    batch_applies_all, batch_atomicity, batch_limits, forbidden_keys, awkward_keys,
    property_types, oversize, concurrent_conditional_updates, missing_table, etag_changes
);

/// A fresh embedded store in its own temporary directory (under the test run's scratch
/// directory, which `tests/run` removes).
#[cfg(test)]
fn embedded_fixture() -> Fixture {
    let dir = std::env::temp_dir().join(format!("tt-conformance-{}", uuid::Uuid::new_v4().simple()));
    let store = crate::sqlite::SqliteTables::open(dir.join("tables.sqlite"), crate::sqlite::Durability::Normal)
        .expect("open store");
    Fixture::new(Tables::new(store))
}

/// Azurite, when the matrix's rule says it runs.
#[cfg(test)]
fn azurite_fixture() -> Option<Fixture> {
    let account = crate::matrix::azurite_account()?;
    let backend = crate::azure::AzureTables::from_connection_string(&account).expect("the Azurite account");
    Some(Fixture::new(Tables::new(backend)))
}

fn sample(pk: &str, rk: &str) -> Entity {
    Entity::new(pk, rk)
        .with("text", Value::String(format!("hello {rk}")))
        .with("count", Value::Int64(1))
}

fn kind(result: Result<impl std::fmt::Debug, StoreError>) -> ErrorKind {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.kind,
    }
}

async fn must_get(tables: &Tables, table: &TableName, pk: &str, rk: &str) -> Entity {
    tables
        .get(table, pk, rk)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("{pk}/{rk} missing"))
}

/// Insert, read, replace, delete.
pub async fn crud(f: Fixture) {
    let t = f.table("crud").await;
    let etag = f.tables.insert(&t, &sample("p", "r")).await.unwrap();
    let got = must_get(&f.tables, &t, "p", "r").await;
    assert_eq!(got.properties, sample("p", "r").properties);
    assert_eq!(got.etag.as_ref(), Some(&etag));
    assert!(got.timestamp.is_some());

    let changed = Entity::new("p", "r").with("text", Value::String("changed".into()));
    f.tables
        .update(&t, &changed, UpdateMode::Replace, &IfMatch::Etag(etag))
        .await
        .unwrap();
    assert_eq!(must_get(&f.tables, &t, "p", "r").await.properties, changed.properties);

    f.tables.delete(&t, "p", "r", &IfMatch::Any).await.unwrap();
    assert!(f.tables.get(&t, "p", "r").await.unwrap().is_none());
}

/// 409 on a duplicate insert, 404 on a missing entity, 412 on a stale ETag.
pub async fn statuses(f: Fixture) {
    let t = f.table("statuses").await;
    let first = f.tables.insert(&t, &sample("p", "r")).await.unwrap();
    assert_eq!(
        kind(f.tables.insert(&t, &sample("p", "r")).await),
        ErrorKind::AlreadyExists
    );

    let missing = sample("p", "missing");
    for mode in [UpdateMode::Replace, UpdateMode::Merge] {
        assert_eq!(
            kind(f.tables.update(&t, &missing, mode, &IfMatch::Any).await),
            ErrorKind::NotFound
        );
    }
    assert_eq!(
        kind(f.tables.delete(&t, "p", "missing", &IfMatch::Any).await),
        ErrorKind::NotFound
    );

    let second = f
        .tables
        .update(&t, &sample("p", "r"), UpdateMode::Merge, &IfMatch::Etag(first.clone()))
        .await
        .unwrap();
    assert_ne!(first, second);
    for mode in [UpdateMode::Replace, UpdateMode::Merge] {
        let stale = f
            .tables
            .update(&t, &sample("p", "r"), mode, &IfMatch::Etag(first.clone()))
            .await;
        assert_eq!(kind(stale), ErrorKind::PreconditionFailed);
    }
    let stale_delete = f.tables.delete(&t, "p", "r", &IfMatch::Etag(first)).await;
    assert_eq!(kind(stale_delete), ErrorKind::PreconditionFailed);
    f.tables.delete(&t, "p", "r", &IfMatch::Etag(second)).await.unwrap();
}

/// `If-Match: *` writes whatever version is there, but the entity must exist.
pub async fn if_match_any(f: Fixture) {
    let t = f.table("ifmatchany").await;
    f.tables.insert(&t, &sample("p", "r")).await.unwrap();
    let replaced = Entity::new("p", "r").with("other", Value::Bool(true));
    f.tables
        .update(&t, &replaced, UpdateMode::Replace, &IfMatch::Any)
        .await
        .unwrap();
    assert_eq!(must_get(&f.tables, &t, "p", "r").await.properties, replaced.properties);
    f.tables.delete(&t, "p", "r", &IfMatch::Any).await.unwrap();
    assert_eq!(
        kind(f.tables.delete(&t, "p", "r", &IfMatch::Any).await),
        ErrorKind::NotFound
    );
}

/// Merge keeps properties the write does not name; replace drops them.
pub async fn merge_vs_replace(f: Fixture) {
    let t = f.table("merge").await;
    f.tables.insert(&t, &sample("p", "m")).await.unwrap();
    f.tables.insert(&t, &sample("p", "r")).await.unwrap();
    let patch = |rk: &str| Entity::new("p", rk).with("extra", Value::Int64(7));
    f.tables
        .update(&t, &patch("m"), UpdateMode::Merge, &IfMatch::Any)
        .await
        .unwrap();
    f.tables
        .update(&t, &patch("r"), UpdateMode::Replace, &IfMatch::Any)
        .await
        .unwrap();
    let merged = must_get(&f.tables, &t, "p", "m").await;
    assert_eq!(merged.str("text"), Some("hello m"));
    assert_eq!(merged.i64("extra"), Some(7));
    let replaced = must_get(&f.tables, &t, "p", "r").await;
    assert_eq!(replaced.properties, patch("r").properties);
}

/// Upsert inserts when missing, and replaces or merges when present.
pub async fn upsert(f: Fixture) {
    let t = f.table("upsert").await;
    f.tables
        .upsert(&t, &sample("p", "r"), UpdateMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        must_get(&f.tables, &t, "p", "r").await.properties,
        sample("p", "r").properties
    );
    let patch = Entity::new("p", "r").with("extra", Value::Bool(false));
    f.tables.upsert(&t, &patch, UpdateMode::Merge).await.unwrap();
    let merged = must_get(&f.tables, &t, "p", "r").await;
    assert_eq!(merged.str("text"), Some("hello r"));
    assert_eq!(merged.bool("extra"), Some(false));
    f.tables.upsert(&t, &patch, UpdateMode::Replace).await.unwrap();
    assert_eq!(must_get(&f.tables, &t, "p", "r").await.properties, patch.properties);
}

/// More than 1000 rows: pages of at most `$top`, each row once, in row-key order, across
/// continuations; range bounds honoured; other partitions excluded.
pub async fn range_and_continuation(f: Fixture) {
    let t = f.table("range").await;
    let total = 1234;
    let keys: Vec<String> = (0..total).map(|i| format!("{i:06}")).collect();
    for chunk in keys.chunks(100) {
        let ops: Vec<BatchOp> = chunk.iter().map(|k| BatchOp::Insert(sample("p", k))).collect();
        f.tables.transact(&t, "p", &ops).await.unwrap();
    }
    f.tables.insert(&t, &sample("other", "000001")).await.unwrap();

    let mut query = RangeQuery::partition("p", 1000);
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = f.tables.query(&t, &query).await.unwrap();
        assert!(page.entities.len() <= 1000);
        pages += 1;
        seen.extend(page.entities.into_iter().map(|e| {
            assert_eq!(e.partition_key, "p");
            e.row_key
        }));
        match page.continuation {
            Some(next) => query.continuation = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, keys, "every row once, in order");
    assert!(pages >= 2);

    let small = RangeQuery::partition("p", 7)
        .from(Bound::Excluded("000010".into()))
        .to(Bound::Included("000030".into()));
    let (rows, more) = f.tables.query_up_to(&t, &small, 100).await.unwrap();
    let expected: Vec<String> = (11..=30).map(|i| format!("{i:06}")).collect();
    assert_eq!(rows.iter().map(|e| e.row_key.clone()).collect::<Vec<_>>(), expected);
    assert!(!more);

    let (rows, more) = f
        .tables
        .query_up_to(&t, &RangeQuery::partition("p", 1000), 1001)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1001);
    assert!(more);

    let (rows, _) = f
        .tables
        .query_up_to(&t, &RangeQuery::prefix("p", "00012", 1000), 100)
        .await
        .unwrap();
    assert_eq!(rows.len(), 10);
}

/// A successful batch applies every operation and reports each new ETag.
pub async fn batch_applies_all(f: Fixture) {
    let t = f.table("batchok").await;
    let b = f.tables.insert(&t, &sample("p", "b")).await.unwrap();
    f.tables.insert(&t, &sample("p", "c")).await.unwrap();
    let ops = vec![
        BatchOp::Insert(sample("p", "a")),
        BatchOp::Update {
            entity: Entity::new("p", "b").with("extra", Value::Int64(2)),
            mode: UpdateMode::Merge,
            if_match: IfMatch::Etag(b),
        },
        BatchOp::Delete {
            partition_key: "p".into(),
            row_key: "c".into(),
            if_match: IfMatch::Any,
        },
        BatchOp::Upsert {
            entity: sample("p", "d"),
            mode: UpdateMode::Replace,
        },
    ];
    let etags = f.tables.transact(&t, "p", &ops).await.unwrap();
    assert_eq!(etags.len(), 4);
    assert!(etags[2].is_none());
    let a = must_get(&f.tables, &t, "p", "a").await;
    assert_eq!(a.etag, etags[0]);
    let b = must_get(&f.tables, &t, "p", "b").await;
    assert_eq!((b.str("text"), b.i64("extra")), (Some("hello b"), Some(2)));
    assert_eq!(b.etag, etags[1]);
    assert!(f.tables.get(&t, "p", "c").await.unwrap().is_none());
    assert_eq!(must_get(&f.tables, &t, "p", "d").await.etag, etags[3]);
}

/// A failing operation fails the whole batch, names its index, and leaves nothing behind.
pub async fn batch_atomicity(f: Fixture) {
    let t = f.table("batchfail").await;
    let stale = f.tables.insert(&t, &sample("p", "b")).await.unwrap();
    f.tables
        .update(&t, &sample("p", "b"), UpdateMode::Merge, &IfMatch::Any)
        .await
        .unwrap();
    f.tables.insert(&t, &sample("p", "c")).await.unwrap();
    f.tables.insert(&t, &sample("p", "dup")).await.unwrap();
    let before = must_get(&f.tables, &t, "p", "b").await;

    let stale_at_1 = vec![
        BatchOp::Insert(sample("p", "a")),
        BatchOp::Update {
            entity: Entity::new("p", "b").with("text", Value::String("lost".into())),
            mode: UpdateMode::Replace,
            if_match: IfMatch::Etag(stale),
        },
        BatchOp::Delete {
            partition_key: "p".into(),
            row_key: "c".into(),
            if_match: IfMatch::Any,
        },
    ];
    let err = f.tables.transact(&t, "p", &stale_at_1).await.unwrap_err();
    assert_eq!(
        (err.kind, err.batch_index),
        (ErrorKind::PreconditionFailed, Some(1)),
        "{err}"
    );

    let duplicate_at_2 = vec![
        BatchOp::Insert(sample("p", "a")),
        BatchOp::Delete {
            partition_key: "p".into(),
            row_key: "c".into(),
            if_match: IfMatch::Any,
        },
        BatchOp::Insert(sample("p", "dup")),
    ];
    let err = f.tables.transact(&t, "p", &duplicate_at_2).await.unwrap_err();
    assert_eq!(
        (err.kind, err.batch_index),
        (ErrorKind::AlreadyExists, Some(2)),
        "{err}"
    );

    let missing_at_0 = vec![
        BatchOp::Delete {
            partition_key: "p".into(),
            row_key: "nothing".into(),
            if_match: IfMatch::Any,
        },
        BatchOp::Insert(sample("p", "a")),
    ];
    let err = f.tables.transact(&t, "p", &missing_at_0).await.unwrap_err();
    assert_eq!((err.kind, err.batch_index), (ErrorKind::NotFound, Some(0)), "{err}");

    assert!(
        f.tables.get(&t, "p", "a").await.unwrap().is_none(),
        "insert rolled back"
    );
    assert!(
        f.tables.get(&t, "p", "c").await.unwrap().is_some(),
        "delete rolled back"
    );
    assert_eq!(must_get(&f.tables, &t, "p", "b").await, before, "update rolled back");
}

/// Batches Azure refuses are refused here too, before anything is written.
pub async fn batch_limits(f: Fixture) {
    let t = f.table("batchlimits").await;
    let too_many: Vec<BatchOp> = (0..101)
        .map(|i| BatchOp::Insert(sample("p", &format!("{i:03}"))))
        .collect();
    let err = f.tables.transact(&t, "p", &too_many).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("100"), "{err}");

    let two_partitions = vec![BatchOp::Insert(sample("p", "a")), BatchOp::Insert(sample("q", "b"))];
    let err = f.tables.transact(&t, "p", &two_partitions).await.unwrap_err();
    assert_eq!((err.kind, err.batch_index), (ErrorKind::InvalidInput, Some(1)));

    let twice = vec![
        BatchOp::Insert(sample("p", "a")),
        BatchOp::Delete {
            partition_key: "p".into(),
            row_key: "a".into(),
            if_match: IfMatch::Any,
        },
    ];
    let err = f.tables.transact(&t, "p", &twice).await.unwrap_err();
    assert_eq!((err.kind, err.batch_index), (ErrorKind::InvalidInput, Some(1)));

    assert_eq!(kind(f.tables.transact(&t, "p", &[]).await), ErrorKind::InvalidInput);

    let big = "x".repeat(32 * 1024);
    let over_4mib: Vec<BatchOp> = (0..70)
        .map(|i| BatchOp::Insert(Entity::new("p", format!("{i:03}")).with("s", Value::String(big.clone()))))
        .collect();
    assert_eq!(
        kind(f.tables.transact(&t, "p", &over_4mib).await),
        ErrorKind::InvalidInput
    );

    let (rows, _) = f
        .tables
        .query_up_to(&t, &RangeQuery::partition("p", 1000), 1000)
        .await
        .unwrap();
    assert!(rows.is_empty(), "a refused batch wrote {} rows", rows.len());
}

/// Keys with `/ \ # ?` or control characters are refused with a message naming the rule.
pub async fn forbidden_keys(f: Fixture) {
    let t = f.table("forbidden").await;
    for bad in [
        "a/b",
        "a\\b",
        "a#b",
        "a?b",
        "tab\there",
        "nl\n",
        "del\u{7f}",
        "c1\u{9f}",
    ] {
        for (pk, rk) in [("p", bad), (bad, "r")] {
            let err = f.tables.insert(&t, &sample(pk, rk)).await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidInput);
            assert!(err.message.contains("must not contain"), "unclear message: {err}");
            assert_eq!(kind(f.tables.get(&t, pk, rk).await), ErrorKind::InvalidInput);
        }
        let batch = vec![BatchOp::Insert(sample("p", bad))];
        assert_eq!(kind(f.tables.transact(&t, "p", &batch).await), ErrorKind::InvalidInput);
    }
    let long = "k".repeat(513);
    assert_eq!(
        kind(f.tables.insert(&t, &sample("p", &long)).await),
        ErrorKind::InvalidInput
    );
}

/// Quotes, spaces, percent signs and non-ASCII work in keys, through every operation.
pub async fn awkward_keys(f: Fixture) {
    let t = f.table("awkward").await;
    let keys = [
        "o'brien",
        "it''s",
        "with space",
        "naïve 日本 🎉",
        "100%",
        "a+b&c=d",
        "(x)",
        "'",
    ];
    for pk in ["p'q r", "ü"] {
        for rk in keys {
            let etag = f.tables.insert(&t, &sample(pk, rk)).await.unwrap();
            let got = must_get(&f.tables, &t, pk, rk).await;
            assert_eq!((got.partition_key.as_str(), got.row_key.as_str()), (pk, rk));
            f.tables
                .update(&t, &sample(pk, rk), UpdateMode::Merge, &IfMatch::Etag(etag))
                .await
                .unwrap();
        }
        let (rows, _) = f
            .tables
            .query_up_to(&t, &RangeQuery::partition(pk, 1000), 100)
            .await
            .unwrap();
        let mut expected: Vec<&str> = keys.to_vec();
        expected.sort();
        assert_eq!(rows.iter().map(|e| e.row_key.as_str()).collect::<Vec<_>>(), expected);
        let deletes: Vec<BatchOp> = keys
            .iter()
            .map(|rk| BatchOp::Delete {
                partition_key: pk.into(),
                row_key: (*rk).into(),
                if_match: IfMatch::Any,
            })
            .collect();
        f.tables.transact(&t, pk, &deletes).await.unwrap();
        assert!(f.tables.get(&t, pk, "o'brien").await.unwrap().is_none());
    }
}

/// Every property type reads back as written.
pub async fn property_types(f: Fixture) {
    let t = f.table("types").await;
    let at = Utc.with_ymd_and_hms(2026, 11, 30, 12, 34, 56).unwrap() + chrono::Duration::microseconds(123_456);
    let entity = Entity::new("p", "r")
        .with("s", Value::String("text ü 日本 \"quoted\" 'single'".into()))
        .with("empty", Value::String(String::new()))
        .with("big", Value::Int64(i64::MAX))
        .with("small", Value::Int64(i64::MIN))
        .with("zero", Value::Int64(0))
        .with("whole", Value::Double(1.0))
        .with("frac", Value::Double(-0.25))
        .with("huge", Value::Double(1.5e300))
        .with("yes", Value::Bool(true))
        .with("no", Value::Bool(false))
        .with("at", Value::datetime(at))
        .with(
            "old",
            Value::datetime(Utc.with_ymd_and_hms(1601, 1, 1, 0, 0, 0).unwrap()),
        )
        .with("bytes", Value::Binary((0..=255).collect()));
    f.tables.insert(&t, &entity).await.unwrap();
    let got = must_get(&f.tables, &t, "p", "r").await;
    assert_eq!(got.properties, entity.properties);
    assert_eq!(got.datetime("at"), Some(at));

    let batch = vec![BatchOp::Insert(Entity {
        row_key: "b".into(),
        ..entity.clone()
    })];
    f.tables.transact(&t, "p", &batch).await.unwrap();
    assert_eq!(must_get(&f.tables, &t, "p", "b").await.properties, entity.properties);
}

/// Oversize properties and entities are refused and nothing is stored.
pub async fn oversize(f: Fixture) {
    let t = f.table("oversize").await;
    let at_limit = Entity::new("p", "ok").with("s", Value::String("x".repeat(32 * 1024)));
    f.tables.insert(&t, &at_limit).await.unwrap();
    let cases = [
        Entity::new("p", "s").with("s", Value::String("x".repeat(32 * 1024 + 1))),
        Entity::new("p", "u").with("s", Value::String("é".repeat(32 * 1024 + 1))),
        Entity::new("p", "b").with("b", Value::Binary(vec![1; 64 * 1024 + 1])),
        (0..20).fold(Entity::new("p", "e"), |e, i| {
            e.with(&format!("p{i}"), Value::String("x".repeat(30 * 1024)))
        }),
        (0..253).fold(Entity::new("p", "n"), |e, i| {
            e.with(&format!("p{i}"), Value::Bool(true))
        }),
        Entity::new("p", "bad").with("not-an-identifier", Value::Bool(true)),
        Entity::new("p", "nan").with("f", Value::Double(f64::NAN)),
    ];
    for entity in cases {
        let err = f.tables.insert(&t, &entity).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{}: {err}", entity.row_key);
        assert!(f.tables.get(&t, "p", &entity.row_key).await.unwrap().is_none());
    }
}

/// N writers race with the same ETag on one entity, round after round: exactly one wins each
/// round and the others see 412.
pub async fn concurrent_conditional_updates(f: Fixture) {
    let t = f.table("race").await;
    f.tables
        .insert(&t, &sample("p", "r").with("round", Value::Int64(0)))
        .await
        .unwrap();
    let writers = 8;
    for round in 1..=5i64 {
        let current = must_get(&f.tables, &t, "p", "r").await;
        let etag = current.etag.clone().unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(writers));
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (tables, table, etag, barrier) = (f.tables.clone(), t.clone(), etag.clone(), barrier.clone());
                tokio::spawn(async move {
                    let entity = sample("p", "r")
                        .with("round", Value::Int64(round))
                        .with("writer", Value::Int64(w as i64));
                    barrier.wait().await;
                    tables
                        .update(&table, &entity, UpdateMode::Replace, &IfMatch::Etag(etag))
                        .await
                })
            })
            .collect();
        let mut winners = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(_) => winners += 1,
                Err(e) => assert_eq!(e.kind, ErrorKind::PreconditionFailed, "{e}"),
            }
        }
        assert_eq!(winners, 1, "round {round}");
        assert_eq!(must_get(&f.tables, &t, "p", "r").await.i64("round"), Some(round));
    }
}

/// Writing to a table that was never created is a 404, not a silent create.
pub async fn missing_table(f: Fixture) {
    let t = TableName::parse(format!("{}never", f.prefix)).unwrap();
    assert_eq!(kind(f.tables.insert(&t, &sample("p", "r")).await), ErrorKind::NotFound);
    let batch = vec![BatchOp::Insert(sample("p", "r"))];
    assert_eq!(kind(f.tables.transact(&t, "p", &batch).await), ErrorKind::NotFound);
}

/// Every write gives the entity a new ETag, and reads report the current one.
pub async fn etag_changes(f: Fixture) {
    let t = f.table("etags").await;
    let mut seen: Vec<ETag> = vec![f.tables.insert(&t, &sample("p", "r")).await.unwrap()];
    for _ in 0..3 {
        let etag = f.tables.upsert(&t, &sample("p", "r"), UpdateMode::Merge).await.unwrap();
        assert!(!seen.contains(&etag));
        seen.push(etag);
    }
    assert_eq!(must_get(&f.tables, &t, "p", "r").await.etag.as_ref(), seen.last());
}
