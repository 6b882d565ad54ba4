//! A backend wrapper that injects faults, for tests of failure paths: fail the Nth call, fail
//! a named operation (before it reaches the store, or after the store applied it — the
//! ambiguous answer of a timeout), or add latency (to every call, or to one operation). It adds this one behaviour to any backend (in the style of
//! object_store's `throttle.rs`) and is never used to make a test pass — only to make a real
//! store fail where and when a test needs it.
//!
//! It also records the calls it passes on, each with its **round** ([`FaultyTables::calls_made`]),
//! for tests that count how many sequential round trips an operation costs. A call's round is
//! one more than the highest round among the calls that had finished when it started (1 if none
//! had): calls issued together (a `join`) all start before any of them finishes and share a
//! round, and a chain of calls that run one after another counts each link, even beside a
//! longer call still in flight. A call starts when the wrapper is first polled for it (before
//! any latency it adds) and finishes when its answer is handed back; with a latency set
//! (`set_latency`), calls issued together are sure to overlap.

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    BatchOp, ETag, Entity, IfMatch, Page, RangeQuery, Result, StoreError, TableBackend, TableName, UpdateMode,
};

/// The operation names rules match on: the [`TableBackend`] method names.
pub const OPERATIONS: [&str; 10] = [
    "create_table",
    "delete_table",
    "get",
    "insert",
    "update",
    "upsert",
    "delete",
    "query",
    "transact",
    "text_query",
];

#[derive(Debug)]
enum Trigger {
    /// The call with this 1-based number (counting every call through the wrapper).
    Call(usize),
    /// Calls of this operation, optionally only on one table.
    Operation { name: &'static str, table: Option<String> },
}

/// What a rule does to a matching call.
#[derive(Debug, Clone)]
enum Effect {
    /// The call fails without reaching the backend.
    Fail(StoreError),
    /// The backend applies the call, and then the caller is told it failed.
    FailAfter(StoreError),
    /// The call waits this long before it reaches the backend.
    Delay(Duration),
    /// The caller is told the call failed at once, and the backend applies it this much later
    /// (a request still on its way when its connection was reset). Transactions only.
    FailThenApplyLater(StoreError, Duration),
}

#[derive(Debug)]
struct Rule {
    trigger: Trigger,
    /// How many more matching calls it applies to.
    remaining: usize,
    effect: Effect,
}

#[derive(Debug, Default)]
struct State {
    calls: AtomicUsize,
    rules: Mutex<Vec<Rule>>,
    latency: Mutex<Option<Duration>>,
    rounds: Mutex<Rounds>,
}

/// One call as the wrapper passed it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    /// Its round (see the module's doc): one more than the highest round finished before it
    /// started.
    pub round: usize,
    /// The [`TableBackend`] method.
    pub operation: &'static str,
    /// The table, lowercase (none for no table).
    pub table: String,
    /// Whether it has finished, and whether it failed (its answer or an injected fault).
    pub finished: bool,
    pub failed: bool,
}

#[derive(Debug, Default)]
struct Rounds {
    /// The highest round among the calls finished so far.
    finished: usize,
    log: Vec<RecordedCall>,
    /// Calls started and not yet finished, and the most there were at once.
    in_flight: usize,
    most_in_flight: usize,
}

/// A recorded call in flight: finishing it (or dropping it, for a call given up) marks it done.
struct InFlight<'a> {
    state: &'a State,
    index: usize,
    failed: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut rounds = self.state.rounds.lock().unwrap_or_else(|p| p.into_inner());
        let call = &mut rounds.log[self.index];
        call.finished = true;
        call.failed = self.failed;
        let round = call.round;
        rounds.finished = rounds.finished.max(round);
        rounds.in_flight = rounds.in_flight.saturating_sub(1);
    }
}

/// Wraps a backend and fails calls as told. Clones share their rules, so a test keeps one clone
/// to steer the store it handed to the code under test.
#[derive(Debug, Clone)]
pub struct FaultyTables {
    inner: Arc<dyn TableBackend>,
    state: Arc<State>,
}

impl FaultyTables {
    pub fn new(inner: impl TableBackend) -> FaultyTables {
        FaultyTables {
            inner: Arc::new(inner),
            state: Arc::default(),
        }
    }

    /// Fails the `n`th call from now (1 = the next call) with `error`.
    pub fn fail_nth_call(&self, n: usize, error: StoreError) {
        let call = self.calls() + n;
        self.push(Trigger::Call(call), 1, Effect::Fail(error));
    }

    /// Fails the next `times` calls of `operation` (a [`TableBackend`] method name), on `table`
    /// only when one is given.
    pub fn fail_operation(&self, operation: &str, table: Option<&TableName>, times: usize, error: StoreError) {
        self.push(operation_trigger(operation, table), times, Effect::Fail(error));
    }

    /// Lets the next `times` calls of `operation` reach the backend and be applied, then
    /// answers each with `error`: a store that commits and then reports a timeout.
    pub fn fail_operation_after_applying(
        &self,
        operation: &str,
        table: Option<&TableName>,
        times: usize,
        error: StoreError,
    ) {
        self.push(operation_trigger(operation, table), times, Effect::FailAfter(error));
    }

    /// Answers the next `times` transactions on `table` with `error` at once and applies each
    /// `delay` later: a store that commits a request after its caller gave up on it.
    pub fn fail_transaction_and_apply_later(
        &self,
        table: Option<&TableName>,
        times: usize,
        error: StoreError,
        delay: Duration,
    ) {
        self.push(
            operation_trigger("transact", table),
            times,
            Effect::FailThenApplyLater(error, delay),
        );
    }

    /// Delays the next `times` calls of `operation` by `delay`, to hold one step of an
    /// operation open while a test runs another against it.
    pub fn delay_operation(&self, operation: &str, table: Option<&TableName>, times: usize, delay: Duration) {
        self.push(operation_trigger(operation, table), times, Effect::Delay(delay));
    }

    /// Delays every call by `latency` before it reaches the backend.
    pub fn set_latency(&self, latency: Option<Duration>) {
        *self.state.latency.lock().unwrap_or_else(|p| p.into_inner()) = latency;
    }

    /// Calls made through this wrapper so far.
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// Every call passed on since the last [`FaultyTables::forget_calls`], in the order they
    /// started, with their rounds.
    pub fn calls_made(&self) -> Vec<RecordedCall> {
        self.state.rounds.lock().unwrap_or_else(|p| p.into_inner()).log.clone()
    }

    /// The most calls that were in flight at once since the last [`FaultyTables::forget_calls`]
    /// (for tests that bound how hard one operation presses on the store).
    pub fn most_in_flight(&self) -> usize {
        self.state
            .rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .most_in_flight
    }

    /// Forgets the calls recorded so far: the next call starts round 1 again.
    pub fn forget_calls(&self) {
        *self.state.rounds.lock().unwrap_or_else(|p| p.into_inner()) = Rounds::default();
    }

    /// Records a call starting now.
    fn begin(&self, operation: &'static str, table: Option<&TableName>) -> InFlight<'_> {
        let mut rounds = self.state.rounds.lock().unwrap_or_else(|p| p.into_inner());
        let round = rounds.finished + 1;
        rounds.log.push(RecordedCall {
            round,
            operation,
            table: table.map(|t| t.as_str().to_ascii_lowercase()).unwrap_or_default(),
            finished: false,
            failed: false,
        });
        rounds.in_flight += 1;
        rounds.most_in_flight = rounds.most_in_flight.max(rounds.in_flight);
        InFlight {
            state: &self.state,
            index: rounds.log.len() - 1,
            failed: false,
        }
    }

    /// Drops every rule that has not fired yet.
    pub fn clear(&self) {
        self.state.rules.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn push(&self, trigger: Trigger, remaining: usize, effect: Effect) {
        self.state.rules.lock().unwrap_or_else(|p| p.into_inner()).push(Rule {
            trigger,
            remaining,
            effect,
        });
    }

    /// Counts the call, sleeps, and returns the effect a rule prescribes for it, if any.
    async fn enter(&self, operation: &'static str, table: Option<&TableName>) -> Option<Effect> {
        let call = self.state.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let latency = *self.state.latency.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        let table = table.map(|t| t.as_str().to_ascii_lowercase());
        let effect = {
            let mut rules = self.state.rules.lock().unwrap_or_else(|p| p.into_inner());
            let hit = rules.iter_mut().position(|rule| {
                rule.remaining > 0
                    && match &rule.trigger {
                        Trigger::Call(n) => *n == call,
                        Trigger::Operation { name, table: only } => {
                            *name == operation && (only.is_none() || *only == table)
                        }
                    }
            });
            hit.map(|index| {
                let rule = &mut rules[index];
                rule.remaining -= 1;
                let effect = rule.effect.clone();
                if rule.remaining == 0 {
                    rules.remove(index);
                }
                effect
            })
        };
        tracing::debug!(operation, call, ?effect, "injected fault");
        match effect {
            Some(Effect::Delay(delay)) => {
                tokio::time::sleep(delay).await;
                None
            }
            other => other,
        }
    }

    /// Runs `call` against the backend under the rules for `operation`.
    async fn run<T>(
        &self,
        operation: &'static str,
        table: Option<&TableName>,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let mut in_flight = self.begin(operation, table);
        let effect = self.enter(operation, table).await;
        let answer = apply(effect, call).await;
        in_flight.failed = answer.is_err();
        answer
    }
}

/// `call` under `effect`.
async fn apply<T>(effect: Option<Effect>, call: impl Future<Output = Result<T>>) -> Result<T> {
    match effect {
        Some(Effect::Fail(error)) => Err(error),
        Some(Effect::FailAfter(error)) => {
            let _applied = call.await;
            Err(error)
        }
        Some(Effect::FailThenApplyLater(..)) => panic!("only transactions can be applied later"),
        Some(Effect::Delay(_)) | None => call.await,
    }
}

fn operation_trigger(operation: &str, table: Option<&TableName>) -> Trigger {
    let name = OPERATIONS
        .into_iter()
        .find(|op| *op == operation)
        .unwrap_or_else(|| panic!("unknown operation {operation}"));
    let table = table.map(|t| t.as_str().to_ascii_lowercase());
    Trigger::Operation { name, table }
}

#[async_trait]
impl TableBackend for FaultyTables {
    async fn create_table(&self, table: &TableName) -> Result<()> {
        self.run("create_table", Some(table), self.inner.create_table(table))
            .await
    }

    async fn delete_table(&self, table: &TableName) -> Result<()> {
        self.run("delete_table", Some(table), self.inner.delete_table(table))
            .await
    }

    async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Entity> {
        self.run("get", Some(table), self.inner.get(table, partition_key, row_key))
            .await
    }

    async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag> {
        self.run("insert", Some(table), self.inner.insert(table, entity)).await
    }

    async fn update(&self, table: &TableName, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag> {
        self.run("update", Some(table), self.inner.update(table, entity, mode, if_match))
            .await
    }

    async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
        self.run("upsert", Some(table), self.inner.upsert(table, entity, mode))
            .await
    }

    async fn delete(&self, table: &TableName, partition_key: &str, row_key: &str, if_match: &IfMatch) -> Result<()> {
        self.run(
            "delete",
            Some(table),
            self.inner.delete(table, partition_key, row_key, if_match),
        )
        .await
    }

    async fn delete_deferred(
        &self,
        table: &TableName,
        partition_key: &str,
        row_key: &str,
        if_match: &IfMatch,
    ) -> Result<()> {
        self.run(
            "delete",
            Some(table),
            self.inner.delete_deferred(table, partition_key, row_key, if_match),
        )
        .await
    }

    async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page> {
        self.run("query", Some(table), self.inner.query(table, query)).await
    }

    async fn transact(&self, table: &TableName, partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>> {
        let mut in_flight = self.begin("transact", Some(table));
        let answer = self.transact_under_rules(table, partition_key, ops).await;
        in_flight.failed = answer.is_err();
        answer
    }

    fn indexes_text(&self) -> bool {
        self.inner.indexes_text()
    }

    async fn text_query(
        &self,
        table: &TableName,
        partition_key: &str,
        word: &str,
        from: Bound<&str>,
        max: usize,
    ) -> Result<(Vec<Entity>, bool)> {
        let call = self.inner.text_query(table, partition_key, word, from, max);
        self.run("text_query", Some(table), call).await
    }
}

impl FaultyTables {
    async fn transact_under_rules(
        &self,
        table: &TableName,
        partition_key: &str,
        ops: &[BatchOp],
    ) -> Result<Vec<Option<ETag>>> {
        match self.enter("transact", Some(table)).await {
            Some(Effect::FailThenApplyLater(error, delay)) => {
                let (inner, table, partition_key, ops) = (
                    self.inner.clone(),
                    table.clone(),
                    partition_key.to_owned(),
                    ops.to_vec(),
                );
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _applied = inner.transact(&table, &partition_key, &ops).await;
                });
                Err(error)
            }
            effect => apply(effect, self.inner.transact(table, partition_key, ops)).await,
        }
    }
}
