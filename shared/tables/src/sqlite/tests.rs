//! The embedded store's own tests (the conformance suite runs through the backend matrix, `crate::conformance`): the group commit's promises —
//! each call of a group gets its own answer, a failing `COMMIT` applies none of its group,
//! reads never wait for the writer, and a process killed mid-load leaves no call half-applied.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::*;
use crate::{ErrorKind, Tables, Value};

/// What the tests watch and steer inside a store: write calls made, `COMMIT`s tried,
/// and a commit to fail (through SQLite's commit hook, which turns that `COMMIT` into a
/// rollback and an error, as a failed fsync or a full disk would).
#[derive(Debug, Default)]
pub(super) struct Probe {
    sent: AtomicUsize,
    commits: AtomicUsize,
    /// The commit this many commits from now fails (0: none).
    fail_commit_in: AtomicUsize,
}

impl Probe {
    pub(super) fn install(conn: &mut Connection) -> Arc<Probe> {
        let probe = Arc::new(Probe::default());
        let hook = probe.clone();
        conn.commit_hook(Some(move || {
            hook.commits.fetch_add(1, SeqCst);
            hook.fail_commit_in.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) == Ok(1)
        }))
        .expect("install the commit hook");
        probe
    }

    pub(super) fn sent(&self) {
        self.sent.fetch_add(1, SeqCst);
    }
}

fn temp_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tt-sqlite-{}", uuid::Uuid::new_v4()))
}

async fn store_with_table(name: &str) -> (SqliteTables, Tables, TableName) {
    let store = SqliteTables::open(temp_dir().join("tables.sqlite"), Durability::Full).expect("open store");
    let tables = Tables::new(store.clone());
    let table = TableName::parse(name).unwrap();
    tables.create_table(&table).await.unwrap();
    (store, tables, table)
}

fn row(pk: &str, rk: &str) -> Entity {
    Entity::new(pk, rk).with("v", Value::Int64(1))
}

/// Blocks the writer thread inside a call of its own (which writes one row, so its commit is a
/// real one) until the returned sender sends or is dropped. Returns once the writer is blocked:
/// every call sent after that waits in the queue, and they all go into the next group.
async fn hold_writer(store: &SqliteTables, table: &TableName) -> std::sync::mpsc::Sender<()> {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = oneshot::channel();
    let before = store.inner.probe.sent.load(SeqCst);
    let (this, table) = (store.clone(), table_key(table));
    let gate = rows::Row::of(&row("gate", "gate"), UpdateMode::Replace).unwrap();
    tokio::spawn(async move {
        this.write(move |s| {
            rows::upsert(&s.conn, &table, &gate)?;
            let _ = started.send(());
            let _ = held.recv();
            Ok(())
        })
        .await
    });
    running.await.expect("the writer runs the gate");
    while store.inner.probe.sent.load(SeqCst) == before {
        tokio::task::yield_now().await;
    }
    release
}

type Outcome = std::result::Result<(), (ErrorKind, Option<usize>)>;

/// Calls sent to a held writer one after another, in a known order.
struct Queued {
    store: SqliteTables,
    tables: Tables,
    table: TableName,
    calls: Vec<JoinHandle<Outcome>>,
}

impl Queued {
    fn new(store: &SqliteTables, tables: &Tables, table: &TableName) -> Queued {
        Queued {
            store: store.clone(),
            tables: tables.clone(),
            table: table.clone(),
            calls: Vec::new(),
        }
    }

    /// Starts `call` and returns once it waits in the writer's queue.
    async fn call<T, Fut>(&mut self, call: impl FnOnce(Tables, TableName) -> Fut)
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let before = self.store.inner.probe.sent.load(SeqCst);
        let fut = call(self.tables.clone(), self.table.clone());
        self.calls.push(tokio::spawn(async move {
            fut.await.map(drop).map_err(|e| (e.kind, e.batch_index))
        }));
        while self.store.inner.probe.sent.load(SeqCst) == before {
            tokio::task::yield_now().await;
        }
    }

    async fn answers(self) -> Vec<Outcome> {
        let mut answers = Vec::new();
        for call in self.calls {
            answers.push(call.await.expect("call task"));
        }
        answers
    }
}

#[tokio::test]
async fn survives_reopen() {
    let dir = temp_dir();
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

/// One task step that makes a write call, runs `meanwhile` without yielding, and makes
/// another; then awaits both.
async fn two_calls_in_one_step(tables: &Tables, table: &TableName, pk: &str, meanwhile: impl FnOnce()) {
    let (one, two) = (row(pk, "first"), row(pk, "second"));
    let mut first = std::pin::pin!(tables.insert(table, &one));
    // Polled once, the first call is made (and, outside `together`, sent).
    std::future::poll_fn(|cx| {
        let _ = first.as_mut().poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
    meanwhile();
    let (first, second) = tokio::join!(first, tables.insert(table, &two));
    first.unwrap();
    second.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_in_one_step_inside_together_commit_in_one_group() {
    let (store, tables, t) = store_with_table("Together").await;

    let before = store.group_commits();
    let pause = || std::thread::sleep(Duration::from_millis(50));
    together(two_calls_in_one_step(&tables, &t, "held", pause)).await;
    assert_eq!(
        store.group_commits() - before,
        1,
        "the step's two calls commit together"
    );

    // Outside `together` the first call is sent at once, and committed alone while the step
    // goes on.
    let before = store.group_commits();
    let until_committed = || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.group_commits() == before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    two_calls_in_one_step(&tables, &t, "sent", until_committed).await;
    assert_eq!(store.group_commits() - before, 2);
}

/// A deferred delete causes no commit of its own: it rides in the next commit another write
/// causes, and alone it is committed after the wait all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_delete_rides_in_the_next_group_commit() {
    let (store, tables, t) = store_with_table("Deferred").await;
    for key in ["a", "b", "c"] {
        tables.insert(&t, &row("p", key)).await.unwrap();
    }

    let before = store.group_commits();
    let deferred = tokio::spawn({
        let tables = tables.clone();
        let t = t.clone();
        async move { tables.delete_deferred(&t, "p", "a", &IfMatch::Any).await }
    });
    // Queued, not committed: the writer waits for other work.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        store.group_commits(),
        before,
        "a deferred delete alone starts no commit"
    );
    assert!(!deferred.is_finished());
    tables.insert(&t, &row("p", "d")).await.unwrap();
    deferred.await.unwrap().unwrap();
    assert_eq!(
        store.group_commits() - before,
        1,
        "the delete rode in the insert's commit"
    );
    assert!(tables.get(&t, "p", "a").await.unwrap().is_none());

    // Alone, it is committed once the wait is over, and answers only then.
    let started = std::time::Instant::now();
    tables.delete_deferred(&t, "p", "b", &IfMatch::Any).await.unwrap();
    assert!(
        started.elapsed() >= writer::DEFERRED_WAIT / 2,
        "{:?}",
        started.elapsed()
    );
    assert!(tables.get(&t, "p", "b").await.unwrap().is_none());

    // A refused one answers as a delete does, and refuses nothing else.
    let e = row("p", "e");
    let missing = tables.delete_deferred(&t, "p", "zz", &IfMatch::Any);
    let (missing, inserted) = tokio::join!(missing, tables.insert(&t, &e));
    assert!(missing.unwrap_err().is(ErrorKind::NotFound));
    inserted.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_held_for_two_stores_each_reach_their_own_writer() {
    let (one_store, one, t1) = store_with_table("One").await;
    let (_, other, t2) = store_with_table("Other").await;
    let (a, b, c) = (row("p", "a"), row("p", "b"), row("p", "c"));
    let before = one_store.group_commits();
    together(async {
        let (a, b, c) = tokio::join!(
            one.insert(&t1, &a),
            other.insert(&t2, &b),
            // A nested step holds its calls for the outermost one.
            together(one.insert(&t1, &c))
        );
        (a.unwrap(), b.unwrap(), c.unwrap())
    })
    .await;
    assert_eq!(one_store.group_commits() - before, 1, "a and c commit together");
    assert!(one.get(&t1, "p", "a").await.unwrap().is_some());
    assert!(one.get(&t1, "p", "c").await.unwrap().is_some());
    assert!(other.get(&t2, "p", "b").await.unwrap().is_some());
    assert!(other.get(&t2, "p", "a").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_queued_together_commit_once_and_each_gets_its_own_answer() {
    let (store, tables, t) = store_with_table("Group").await;
    tables.insert(&t, &row("p", "dup")).await.unwrap();
    let stale = tables.insert(&t, &row("p", "stale")).await.unwrap();
    tables.upsert(&t, &row("p", "stale"), UpdateMode::Merge).await.unwrap();
    let cond = tables.insert(&t, &row("p", "cond")).await.unwrap();
    let commits_before = store.inner.probe.commits.load(SeqCst);

    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "new0")).await })
        .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "dup")).await })
        .await;
    let etag = stale.clone();
    q.call(|tb, t| async move {
        tb.update(&t, &row("p", "stale"), UpdateMode::Replace, &IfMatch::Etag(etag))
            .await
    })
    .await;
    q.call(|tb, t| async move {
        tb.transact(
            &t,
            "p",
            &[BatchOp::Insert(row("p", "b1")), BatchOp::Insert(row("p", "b2"))],
        )
        .await
    })
    .await;
    q.call(|tb, t| async move {
        tb.transact(
            &t,
            "p",
            &[BatchOp::Insert(row("p", "b3")), BatchOp::Insert(row("p", "dup"))],
        )
        .await
    })
    .await;
    let etag = cond.clone();
    q.call(|tb, t| async move {
        let next = row("p", "cond").with("by", Value::String("first".into()));
        tb.update(&t, &next, UpdateMode::Replace, &IfMatch::Etag(etag)).await
    })
    .await;
    // The same condition again: the call before it, earlier in the same group, changed the ETag.
    let etag = cond.clone();
    q.call(|tb, t| async move {
        let next = row("p", "cond").with("by", Value::String("second".into()));
        tb.update(&t, &next, UpdateMode::Replace, &IfMatch::Etag(etag)).await
    })
    .await;
    q.call(|tb, t| async move { tb.delete(&t, "p", "missing", &IfMatch::Any).await })
        .await;
    // A merge over a row inserted earlier in the same group.
    q.call(|tb, t| async move {
        let more = Entity::new("p", "new0").with("w", Value::Int64(2));
        tb.upsert(&t, &more, UpdateMode::Merge).await
    })
    .await;
    for i in 0..20 {
        // Pairs of inserts of one key: the first of each pair wins.
        q.call(move |tb, t| async move { tb.insert(&t, &row("many", &format!("k{}", i / 2))).await })
            .await;
    }
    drop(gate);
    let answers = q.answers().await;

    use ErrorKind::*;
    let mut expected: Vec<Outcome> = vec![
        Ok(()),
        Err((AlreadyExists, None)),
        Err((PreconditionFailed, None)),
        Ok(()),
        Err((AlreadyExists, Some(1))),
        Ok(()),
        Err((PreconditionFailed, None)),
        Err((NotFound, None)),
        Ok(()),
    ];
    for i in 0..20 {
        expected.push(if i % 2 == 0 { Ok(()) } else { Err((AlreadyExists, None)) });
    }
    assert_eq!(answers, expected);
    assert_eq!(
        store.inner.probe.commits.load(SeqCst) - commits_before,
        2,
        "the gate's commit, then one for all {} calls",
        answers.len()
    );

    let get = |rk: &'static str| {
        let (tables, t) = (tables.clone(), t.clone());
        async move { tables.get(&t, "p", rk).await.unwrap() }
    };
    let new0 = get("new0").await.expect("new0 committed");
    assert_eq!((new0.i64("v"), new0.i64("w")), (Some(1), Some(2)));
    assert!(get("b1").await.is_some() && get("b2").await.is_some());
    assert!(get("b3").await.is_none(), "the failed batch left nothing");
    assert_eq!(get("stale").await.unwrap().properties, row("p", "stale").properties);
    assert_eq!(
        get("cond").await.unwrap().properties.get("by"),
        Some(&Value::String("first".into()))
    );
    let (many, _) = tables
        .query_up_to(&t, &RangeQuery::partition("many", 100), 100)
        .await
        .unwrap();
    assert_eq!(many.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_commit_fails_every_call_of_its_group_and_applies_none() {
    let (store, tables, t) = store_with_table("Doomed").await;
    tables.insert(&t, &row("p", "dup")).await.unwrap();
    let cond = tables.insert(&t, &row("p", "cond")).await.unwrap();

    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "a")).await }).await;
    q.call(|tb, t| async move {
        tb.transact(
            &t,
            "p",
            &[BatchOp::Insert(row("p", "b")), BatchOp::Insert(row("p", "c"))],
        )
        .await
    })
    .await;
    let etag = cond.clone();
    q.call(|tb, t| async move {
        let next = row("p", "cond").with("changed", Value::Bool(true));
        tb.update(&t, &next, UpdateMode::Replace, &IfMatch::Etag(etag)).await
    })
    .await;
    q.call(|tb, t| async move { tb.delete(&t, "p", "dup", &IfMatch::Any).await })
        .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "dup")).await })
        .await;
    // The gate's own commit is the next one; the group's is the one after.
    store.inner.probe.fail_commit_in.store(2, SeqCst);
    drop(gate);
    let answers = q.answers().await;

    let commit_failed = Err((ErrorKind::Internal, None));
    assert_eq!(
        answers,
        vec![
            commit_failed.clone(),
            commit_failed.clone(),
            commit_failed.clone(),
            commit_failed.clone(),
            // It succeeded only through the delete before it, in the same transaction, and
            // then failed with the commit like the rest.
            commit_failed,
        ]
    );
    for rk in ["a", "b", "c"] {
        assert!(tables.get(&t, "p", rk).await.unwrap().is_none(), "{rk} not applied");
    }
    assert!(
        tables.get(&t, "p", "dup").await.unwrap().is_some(),
        "the delete not applied"
    );
    let kept = tables.get(&t, "p", "cond").await.unwrap().unwrap();
    assert_eq!(kept.etag, Some(cond.clone()), "the update not applied");

    // The writer goes on: the same calls succeed now.
    tables
        .update(&t, &row("p", "cond"), UpdateMode::Replace, &IfMatch::Etag(cond))
        .await
        .unwrap();
    tables.insert(&t, &row("p", "a")).await.unwrap();
}

/// A call refused for the rows as they were hears its group's fate when the group's commit
/// fails, since the rows it was refused for may have been an earlier call's writes that never
/// landed (here the key "fresh", taken only by the insert before it): answered "exists", its
/// caller would trust a row that is not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_a_failing_group_is_answered_with_the_groups_fate() {
    let (store, tables, t) = store_with_table("OwnError").await;
    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "fresh")).await })
        .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "fresh")).await })
        .await;
    store.inner.probe.fail_commit_in.store(2, SeqCst);
    drop(gate);
    assert_eq!(
        q.answers().await,
        // Before: the second was answered AlreadyExists, for a row that was never written.
        vec![Err((ErrorKind::Internal, None)), Err((ErrorKind::Internal, None))]
    );
    assert!(tables.get(&t, "p", "fresh").await.unwrap().is_none());
    // Asked again, the insert lands.
    tables.insert(&t, &row("p", "fresh")).await.unwrap();
}

/// A panic on the writer thread outside any call (here while a call is answered) does not stop
/// the writer: the call's caller hears that the write may have applied, and the writes after it
/// are served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_goes_on_after_a_panic_outside_any_call() {
    struct PanicsWhenAnswered;
    impl writer::Job for PanicsWhenAnswered {
        fn undo(&self) -> Undo {
            Undo::Statement
        }
        fn run(&mut self, _: &mut Session) -> writer::Ran {
            writer::Ran::Done
        }
        fn answer(self: Box<Self>, _: &Result<()>) {
            panic!("a panic while answering");
        }
    }
    let (store, tables, t) = store_with_table("Panics").await;
    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "with the panic")).await })
        .await;
    together::send(store.inner.id, &store.inner.writes, Box::new(PanicsWhenAnswered))
        .expect("the writer takes the call");
    drop(gate);
    let answers = q.answers().await;
    assert!(
        matches!(answers[..], [Err((ErrorKind::Indeterminate, None))] | [Ok(())]),
        "{answers:?}"
    );
    tables
        .insert(&t, &row("p", "after"))
        .await
        .expect("the writer serves writes again");
    assert!(tables.get(&t, "p", "after").await.unwrap().is_some());
}

/// A call without a savepoint of its own that fails after its write went through (as a panic
/// past its statement would), refused or otherwise, cannot be undone alone: its whole group
/// rolls back, and the calls of the group before it hear that nothing applied; the calls after
/// it commit in the next group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_failing_after_its_write_without_a_savepoint_rolls_its_group_back() {
    for failure in [
        StoreError::internal("failed past its write"),
        StoreError::new(ErrorKind::PreconditionFailed, "refused past its write"),
    ] {
        a_call_failing_after_its_write_rolls_its_group_back(failure).await;
    }
}

async fn a_call_failing_after_its_write_rolls_its_group_back(failure: StoreError) {
    let (store, tables, t) = store_with_table("Unundone").await;
    let own = failure.kind;
    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "before")).await })
        .await;
    let (this, table) = (store.clone(), table_key(&t));
    let written = rows::Row::whole(&row("p", "culprit")).unwrap();
    q.call(move |_, _| async move {
        this.write(move |s| {
            rows::insert(&s.conn, &table, &written)?;
            Err::<(), _>(failure)
        })
        .await
    })
    .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "after")).await })
        .await;
    drop(gate);
    // A refusal in a group that did not commit is answered with the group's fate.
    let culprit = match own {
        ErrorKind::PreconditionFailed => ErrorKind::Unavailable,
        own => own,
    };
    assert_eq!(
        q.answers().await,
        vec![Err((ErrorKind::Unavailable, None)), Err((culprit, None)), Ok(())]
    );
    for (rk, stored) in [("before", false), ("culprit", false), ("after", true)] {
        assert_eq!(tables.get(&t, "p", rk).await.unwrap().is_some(), stored, "{rk}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_answered_while_the_writer_is_held() {
    let (store, tables, t) = store_with_table("Readers").await;
    tables.insert(&t, &row("p", "r")).await.unwrap();
    let gate = hold_writer(&store, &t).await;
    let reads = async {
        for _ in 0..(2 * READERS) {
            assert!(tables.get(&t, "p", "r").await.unwrap().is_some());
            let page = tables.query(&t, &RangeQuery::partition("p", 10)).await.unwrap();
            assert_eq!(page.entities.len(), 1);
        }
    };
    // A guard against a hang, not a timing assertion: through the writer these reads would
    // wait for the gate forever.
    tokio::time::timeout(Duration::from_secs(60), reads)
        .await
        .expect("reads answered while the writer is held");
    drop(gate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls_each_get_their_own_answer() {
    let (_store, tables, t) = store_with_table("Crowd").await;
    let mut tasks = Vec::new();
    for i in 0..100usize {
        let (tables, t) = (tables.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            // Two callers per key: exactly one insert wins, and its ETag is the stored one.
            let single = tables.insert(&t, &row("single", &format!("k{}", i / 2))).await;
            // Every third batch collides with a row of its neighbour's batch (the same key),
            // so of the two one commits whole and the other not at all.
            let shared = format!("s{}", i / 6);
            let batch = if i % 3 == 0 {
                vec![
                    BatchOp::Insert(row("batch", &format!("b{i}"))),
                    BatchOp::Insert(row("batch", &shared)),
                ]
            } else {
                vec![BatchOp::Insert(row("batch", &format!("b{i}")))]
            };
            let batched = tables.transact(&t, "batch", &batch).await;
            (i, single, batched.map(|_| batch.len()))
        }));
    }
    let mut winners: BTreeMap<String, ETag> = BTreeMap::new();
    let mut batches = BTreeMap::new();
    for task in tasks {
        let (i, single, batched) = task.await.unwrap();
        match single {
            Ok(etag) => assert!(
                winners.insert(format!("k{}", i / 2), etag).is_none(),
                "two winners for k{}",
                i / 2
            ),
            Err(e) => assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}"),
        }
        batches.insert(i, batched);
    }
    assert_eq!(winners.len(), 50);
    for (rk, etag) in &winners {
        assert_eq!(
            tables.get(&t, "single", rk).await.unwrap().unwrap().etag.as_ref(),
            Some(etag)
        );
    }
    for (i, batched) in batches {
        let stored = tables.get(&t, "batch", &format!("b{i}")).await.unwrap().is_some();
        match batched {
            Ok(_) => assert!(stored, "b{i} answered committed"),
            Err(e) => {
                assert_eq!((e.kind, e.batch_index), (ErrorKind::AlreadyExists, Some(1)), "{e}");
                assert!(!stored, "b{i} answered failed, yet its first row is stored");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_table_is_missing_on_every_connection() {
    let (_store, tables, t) = store_with_table("Dropped").await;
    tables.insert(&t, &row("p", "r")).await.unwrap();
    for _ in 0..(2 * READERS) {
        tables.query(&t, &RangeQuery::partition("p", 10)).await.unwrap();
    }
    tables.delete_table(&t).await.unwrap();
    for _ in 0..(2 * READERS) {
        let err = tables.query(&t, &RangeQuery::partition("p", 10)).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    }
    let err = tables.insert(&t, &row("p", "s")).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
    tables.create_table(&t).await.unwrap();
    assert!(
        tables.get(&t, "p", "r").await.unwrap().is_none(),
        "the old rows went with the table"
    );
}

/// Set in the child process of the crash test: the store it loads until it is killed.
const CRASH_CHILD: &str = "TT_SQLITE_CRASH_CHILD";
const CRASH_WRITERS: usize = 16;

/// The child's load: each writer commits, again and again, one entity group transaction that
/// moves its counter to `i` (conditional on the counter's ETag) and adds the two rows of step
/// `i`, and prints each commit it was answered.
async fn crash_load(path: &str) {
    let tables = Tables::new(SqliteTables::open(path, Durability::Full).unwrap());
    let t = TableName::parse("Crash").unwrap();
    tables.create_table(&t).await.unwrap();
    let mut writers = Vec::new();
    for w in 0..CRASH_WRITERS {
        let (tables, t) = (tables.clone(), t.clone());
        writers.push(tokio::spawn(async move {
            let pk = format!("w{w}");
            let mut etag = tables
                .insert(&t, &Entity::new(&pk, "counter").with("n", Value::Int64(0)))
                .await
                .unwrap();
            for i in 1..=5000i64 {
                let ops = [
                    BatchOp::Update {
                        entity: Entity::new(&pk, "counter").with("n", Value::Int64(i)),
                        mode: UpdateMode::Replace,
                        if_match: IfMatch::Etag(etag.clone()),
                    },
                    BatchOp::Insert(row(&pk, &format!("r{i:05}a"))),
                    BatchOp::Insert(row(&pk, &format!("r{i:05}b"))),
                ];
                let etags = tables.transact(&t, &pk, &ops).await.unwrap();
                etag = etags[0].clone().unwrap();
                println!("committed {w} {i}");
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_mid_load_leaves_every_transaction_whole() {
    if let Ok(path) = std::env::var(CRASH_CHILD) {
        return crash_load(&path).await;
    }
    let path = temp_dir().join("tables.sqlite");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sqlite::tests::a_process_killed_mid_load_leaves_every_transaction_whole",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CRASH_CHILD, &path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the child");
    let mut acknowledged = [0i64; CRASH_WRITERS];
    let mut commits = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Some(rest) = line.strip_prefix("committed ") else {
            continue;
        };
        let (w, i) = rest.split_once(' ').unwrap();
        acknowledged[w.parse::<usize>().unwrap()] = i.parse().unwrap();
        commits += 1;
        if commits == 400 {
            break;
        }
    }
    assert_eq!(commits, 400, "the child stopped before it was killed");
    child.kill().unwrap();
    child.wait().unwrap();

    let tables = Tables::new(SqliteTables::open(&path, Durability::Full).unwrap());
    let t = TableName::parse("Crash").unwrap();
    for (w, acknowledged) in acknowledged.iter().enumerate() {
        let pk = format!("w{w}");
        let (stored, _) = tables
            .query_up_to(&t, &RangeQuery::partition(&pk, 1000), 20_000)
            .await
            .unwrap();
        let n = stored
            .iter()
            .find(|e| e.row_key == "counter")
            .and_then(|e| e.i64("n"))
            .expect("the counter");
        assert!(
            n >= *acknowledged,
            "writer {w}: step {acknowledged} was acknowledged, {n} stored"
        );
        let keys: BTreeSet<String> = stored.into_iter().map(|e| e.row_key).collect();
        let mut expected: BTreeSet<String> = (1..=n)
            .flat_map(|i| [format!("r{i:05}a"), format!("r{i:05}b")])
            .collect();
        expected.insert("counter".into());
        assert_eq!(keys, expected, "writer {w}: every step whole, none beyond the counter");
    }
}

/// A range read's cached statement is reused as it is, whatever the bounds and page size: it is
/// never prepared again (SQLite would, on every call, for a statement whose plan it let depend
/// on the bound values).
#[tokio::test]
async fn a_range_read_reuses_its_prepared_statement() {
    let (store, tables, t) = store_with_table("Ranges").await;
    for rk in ["a1", "a2", "b1", "b2", "c1"] {
        tables.insert(&t, &row("p", rk)).await.unwrap();
    }
    let reprepared = store
        .read(|s| {
            let table = table_key(&t);
            for (prefix, top) in [("a", 1), ("b", 5), ("c", 2), ("a", 10)] {
                let page = rows::query(&s.conn, &table, &RangeQuery::prefix("p", prefix, top))?;
                assert!(!page.entities.is_empty(), "rows under {prefix}");
            }
            let sql = "SELECT rk, etag, ts, props FROM entities WHERE tbl = ?1 AND pk = ?2 AND rk >= ?3 AND rk < ?4 ORDER BY rk LIMIT ?5";
            let statement = s.conn.prepare_cached(sql).map_err(session::sql_error)?;
            Ok(statement.get_status(rusqlite::StatementStatus::RePrepare))
        })
        .unwrap();
    assert_eq!(reprepared, 0);
}

/// A text row's write leaves the text index's postings in memory, which it writes at the
/// next savepoint — a refused statement's own, on a table with triggers. That write is not the
/// refused call's: the group goes on and commits every call that succeeded.
#[tokio::test]
async fn a_refusal_after_a_text_rows_write_in_one_group_loses_no_call() {
    use crate::text::{WORDS, row_key};
    let (store, tables, t) = store_with_table("TextGroup").await;
    tables.insert(&t, &row("p", "dup")).await.unwrap();
    let text = |number: &str, words: &str| Entity::new("p", row_key(number)).with(WORDS, Value::String(words.into()));
    tables.insert(&t, &text("0000000000000000009", "old")).await.unwrap();

    let gate = hold_writer(&store, &t).await;
    let mut q = Queued::new(&store, &tables, &t);
    let (one, two) = (text("0000000000000000008", "one"), text("0000000000000000007", "two"));
    q.call(|tb, t| async move { tb.insert(&t, &one).await }).await;
    q.call(|tb, t| async move {
        tb.transact(&t, "p", &[BatchOp::Insert(two), BatchOp::Insert(row("p", "x"))])
            .await
    })
    .await;
    q.call(|tb, t| async move { tb.delete(&t, "p", &row_key("0000000000000000009"), &IfMatch::Any).await })
        .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "dup")).await })
        .await;
    q.call(|tb, t| async move { tb.insert(&t, &row("p", "after")).await })
        .await;
    drop(gate);
    let answers = q.answers().await;
    assert_eq!(
        answers,
        vec![Ok(()), Ok(()), Ok(()), Err((ErrorKind::AlreadyExists, None)), Ok(())],
        "only the refused call fails"
    );
    for (word, found) in [("one", 1), ("two", 1), ("old", 0)] {
        let (rows, _) = tables
            .text_query(&t, "p", word, std::ops::Bound::Unbounded, 9)
            .await
            .unwrap();
        assert_eq!(rows.len(), found, "{word}");
    }
    assert!(tables.get(&t, "p", "after").await.unwrap().is_some());
}
