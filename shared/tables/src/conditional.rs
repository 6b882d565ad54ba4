//! The one conditional-write helper: read an entity, compute its new state from what was
//! read, write it back only if nothing changed meanwhile, and on a lost race re-read and
//! re-apply. Every read-modify-write of tabletalk goes through here, so the retry bound and the
//! meaning of each failure are decided once.
//!
//! A write that may have been applied (a timeout or a 5xx: [`StoreError::may_have_applied`]),
//! whose outcome is unknown ([`ErrorKind::Indeterminate`]), or a transaction that failed on
//! another of its operations, lost no race: its own error propagates as itself, and it is
//! never re-applied (that could apply it twice). After any other failed write the entity is
//! re-read to tell a lost race from a real failure:
//! - the ETag changed → someone else wrote; re-apply the intent to the new state and retry;
//! - the ETag is unchanged → it was no race; the write's own error propagates as itself;
//! - the entity is gone → `NotFound`;
//! - the re-read itself fails → `Conflict` (the caller may try again);
//! - [`MAX_ATTEMPTS`] writes all lost → `Conflict`.
//!
//! Between attempts it waits a short random time, so writers in different processes spread
//! out instead of colliding again.
//!
//! A write conditional on more than the one row it changes (a transaction over several rows,
//! a row that may not exist yet) says what each attempt came to, and [`retry_lost_races`]
//! runs it with the same bound and pauses.
//!
//! Three retries elsewhere are of another kind and stay with their callers: a send whose
//! message key another send took tries the next key (a new row each time, not the same intent
//! re-applied: `MAX_TICK_ATTEMPTS` in the service's send path); a stored message's index row,
//! an idempotent upsert, is written again after a failure (`INDEX_ROW_ATTEMPTS`); and the
//! change feed reads a room's counter again when a purge moved its floor during the read
//! (`FLOOR_RACE_ATTEMPTS`: a read, no write).

use super::{ETag, Entity, ErrorKind, IfMatch, StoreError, TableName, Tables, UpdateMode};

/// Write attempts per conditional write, shared by every caller: there is no per-operation
/// budget to raise. Sized for the hottest rows: a room's counter that several processes move,
/// and a thread root whose summary a burst of replies changes one at a time (a burst of
/// replies to one root is absorbed up to this many before one is answered "busy"). Attempts
/// after the first happen only on lost races, and the pause between them grows, so a large
/// bound costs nothing while rows are quiet.
pub const MAX_ATTEMPTS: usize = 32;

/// Why a conditional update did not land.
#[derive(Debug)]
pub enum ConditionalError<E> {
    /// The entity does not exist (or vanished during the update).
    NotFound,
    /// Every attempt lost a race, or the state after a failure could not be read.
    Conflict,
    /// A write failed for a reason other than a race.
    Store(StoreError),
    /// The caller's `apply` refused the current state.
    Rejected(E),
}

/// Reads `(partition_key, row_key)`, lets `apply` turn the current entity into the new one,
/// and writes it conditionally on the version read, re-reading and re-applying on lost races.
/// `apply` must compute from the entity it is given (never replay an earlier result), since it
/// runs again on every retry. Returns the entity as written, with its new ETag.
pub async fn update_conditionally<E>(
    tables: &Tables,
    table: &TableName,
    partition_key: &str,
    row_key: &str,
    mode: UpdateMode,
    apply: impl FnMut(Entity) -> Result<Entity, E>,
) -> Result<Entity, ConditionalError<E>> {
    let write = |next: Entity, seen: ETag| async move { tables.update(table, &next, mode, &IfMatch::Etag(seen)).await };
    update_conditionally_with(tables, table, partition_key, row_key, None, apply, write).await
}

/// `update_conditionally` for a caller that writes the entity itself: `write` must store
/// `next` conditionally on `seen` (typically in an entity group transaction with rows that
/// must commit with it) and return its new ETag. `known` is a copy of the entity the caller
/// believes current, saving the first read; a stale copy costs one lost race.
pub async fn update_conditionally_with<E, W>(
    tables: &Tables,
    table: &TableName,
    partition_key: &str,
    row_key: &str,
    known: Option<Entity>,
    apply: impl FnMut(Entity) -> Result<Entity, E>,
    write: impl FnMut(Entity, ETag) -> W,
) -> Result<Entity, ConditionalError<E>>
where
    W: Future<Output = Result<ETag, StoreError>>,
{
    let target = (tables, table, partition_key, row_key);
    conditionally(target, known, apply, write, None).await
}

/// When [`update_conditionally_reading_along`] reads the entity alongside a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAlong {
    /// With every write: for a row other writers are known to be moving now.
    Always,
    /// Only with the writes after a lost race: the first write of a row this writer alone
    /// moved lately costs no read, and a loss shows the row is contended.
    AfterALoss,
}

/// [`update_conditionally_with`] that reads the entity alongside its writes (as `along`
/// says), in the same round trip: a write that loses a race then has the winner's entity at
/// hand and tries again without reading it, so a lost race costs one more round trip instead
/// of two. For a hot row that other processes write too (a room's counter), at the price of
/// one more request per write read along. When the read along was answered before the
/// winner's write (it shows the version this write was conditional on), the entity is read
/// again as [`update_conditionally_with`] does.
pub async fn update_conditionally_reading_along<E, W>(
    tables: &Tables,
    table: &TableName,
    partition_key: &str,
    row_key: &str,
    known: Option<Entity>,
    along: ReadAlong,
    apply: impl FnMut(Entity) -> Result<Entity, E>,
    write: impl FnMut(Entity, ETag) -> W,
) -> Result<Entity, ConditionalError<E>>
where
    W: Future<Output = Result<ETag, StoreError>>,
{
    let target = (tables, table, partition_key, row_key);
    conditionally(target, known, apply, write, Some(along)).await
}

async fn conditionally<E, W>(
    (tables, table, partition_key, row_key): (&Tables, &TableName, &str, &str),
    known: Option<Entity>,
    mut apply: impl FnMut(Entity) -> Result<Entity, E>,
    mut write: impl FnMut(Entity, ETag) -> W,
    reading: Option<ReadAlong>,
) -> Result<Entity, ConditionalError<E>>
where
    W: Future<Output = Result<ETag, StoreError>>,
{
    let mut current = match known {
        Some(entity) => entity,
        None => tables
            .get(table, partition_key, row_key)
            .await
            .map_err(ConditionalError::Store)?
            .ok_or(ConditionalError::NotFound)?,
    };
    for attempt in 1..=MAX_ATTEMPTS {
        let seen = current.etag.clone().ok_or_else(|| {
            ConditionalError::Store(StoreError::internal("the store returned an entity without an ETag"))
        })?;
        let mut next = apply(current).map_err(ConditionalError::Rejected)?;
        next.partition_key = partition_key.to_owned();
        next.row_key = row_key.to_owned();
        let written = write(next.clone(), seen.clone());
        let read_along = match reading {
            Some(ReadAlong::Always) => true,
            Some(ReadAlong::AfterALoss) => attempt > 1,
            None => false,
        };
        let (written, along) = match read_along {
            true => {
                // The read first, so it is always the first of the two calls to start.
                let (along, written) = tokio::join!(tables.get(table, partition_key, row_key), written);
                (written, Some(along))
            }
            false => (written.await, None),
        };
        let write_error = match written {
            Ok(etag) => {
                next.etag = Some(etag);
                return Ok(next);
            }
            // A transaction that failed on another of its operations lost no race on this one;
            // a write that may have landed (or whose outcome is unknown) must not be applied
            // again, and a look at the entity could not tell a race from its own success.
            Err(e)
                if e.batch_index.is_some_and(|i| i > 0) || e.is(ErrorKind::Indeterminate) || e.may_have_applied() =>
            {
                return Err(ConditionalError::Store(e));
            }
            Err(e) => e,
        };
        let reread = match along {
            Some(Ok(Some(row))) if row.etag.as_ref() != Some(&seen) => Ok(Some(row)),
            Some(Ok(None)) => Ok(None),
            _ => tables.get(table, partition_key, row_key).await,
        };
        match reread {
            Ok(None) => return Err(ConditionalError::NotFound),
            Ok(Some(reread)) if reread.etag.as_ref() == Some(&seen) => {
                return Err(ConditionalError::Store(write_error));
            }
            Ok(Some(reread)) => {
                tracing::debug!(table = %table, attempt, error = %write_error, "conditional write lost a race; re-applying");
                current = reread;
                // A hot row read along is retried on the winner's copy after a short pause
                // that does not grow: the pause only spreads colliding writers, and growing it
                // would put a writer that lost a few times behind everyone for good.
                backoff(if reading.is_some() { 1 } else { attempt }).await;
            }
            Err(read_error) => {
                tracing::warn!(table = %table, %write_error, %read_error, "re-read after a failed conditional write failed");
                return Err(ConditionalError::Conflict);
            }
        }
    }
    Err(ConditionalError::Conflict)
}

/// What one attempt of a [`retry_lost_races`] write came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// The write landed, or the state read made it unnecessary: the answer.
    Done(T),
    /// A row the attempt read changed before its write: read again and try again.
    LostRace,
}

/// Runs `attempt` — a read of the rows a write depends on, then that write conditional on
/// them — again after each lost race, with the same bound and pauses as the single-row
/// functions above. For the writes those cannot express: a transaction conditional on
/// several rows (a report and its group), on a row it does not change (a reply and its root),
/// or a row that may not exist yet (a first presence row). `attempt` reads afresh each time.
/// `Ok(None)` when every attempt lost; its own errors propagate as themselves, unretried.
pub async fn retry_lost_races<T, E, F, A>(mut attempt: A) -> Result<Option<T>, E>
where
    A: FnMut() -> F,
    F: Future<Output = Result<Attempt<T>, E>>,
{
    for n in 1..=MAX_ATTEMPTS {
        match attempt().await? {
            Attempt::Done(answer) => return Ok(Some(answer)),
            Attempt::LostRace if n < MAX_ATTEMPTS => backoff(n).await,
            Attempt::LostRace => {}
        }
    }
    Ok(None)
}

/// A short random pause after a lost race, growing with the attempt, so writers in different
/// processes that collided do not collide again in lockstep.
async fn backoff(attempt: usize) {
    let ceiling_ms = 1u64 << attempt.min(5);
    let pause = rand::random_range(0..=ceiling_ms);
    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
}

impl<E> ConditionalError<E> {
    /// True when the failure was a store error of `kind`.
    pub fn is_store(&self, kind: ErrorKind) -> bool {
        matches!(self, ConditionalError::Store(e) if e.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::faults::FaultyTables;
    use crate::sqlite::{Durability, SqliteTables};
    use crate::{TableName, Value};

    struct Setup {
        tables: Tables,
        faults: FaultyTables,
        table: TableName,
        _dir: tempdir::Dir,
    }

    mod tempdir {
        /// A scratch directory removed on drop.
        pub struct Dir(pub std::path::PathBuf);
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    async fn setup() -> Setup {
        let dir = std::env::temp_dir().join(format!("tt-cond-{}", uuid::Uuid::new_v4()));
        let store = SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap();
        let faults = FaultyTables::new(store);
        let tables = Tables::new(faults.clone());
        let table = TableName::parse("Things").unwrap();
        tables.create_table(&table).await.unwrap();
        tables
            .insert(&table, &Entity::new("p", "r").with("votes", Value::Int64(0)))
            .await
            .unwrap();
        Setup {
            tables,
            faults,
            table,
            _dir: tempdir::Dir(dir),
        }
    }

    /// A concurrent writer's real write, made from inside a synchronous `apply`.
    fn write_concurrently(tables: &Tables, table: &TableName, votes: i64) {
        let (tables, table) = (tables.clone(), table.clone());
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async move {
                let other = Entity::new("p", "r").with("votes", Value::Int64(votes));
                tables.upsert(&table, &other, UpdateMode::Replace).await.unwrap();
            })
        });
    }

    fn add_vote(entity: Entity) -> Entity {
        let votes = entity.i64("votes").unwrap_or(0);
        entity.with("votes", Value::Int64(votes + 1))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn lost_race_re_reads_and_re_applies() {
        let s = setup().await;
        let calls = AtomicUsize::new(0);
        let written = update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                write_concurrently(&s.tables, &s.table, 10);
            }
            Ok(add_vote(e))
        })
        .await
        .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(
            written.i64("votes"),
            Some(11),
            "the concurrent write is kept and ours re-applied"
        );
        let stored = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        assert_eq!(stored.i64("votes"), Some(11));
        assert_eq!(stored.etag, written.etag);
    }

    /// The write as `update_conditionally` would make it, for the `_with` variants.
    fn plain_write<'a>(
        tables: &'a Tables,
        table: &'a TableName,
    ) -> impl FnMut(Entity, ETag) -> std::pin::Pin<Box<dyn Future<Output = Result<ETag, StoreError>> + Send + 'a>> {
        move |next, seen| {
            Box::pin(async move {
                tables
                    .update(table, &next, UpdateMode::Replace, &IfMatch::Etag(seen))
                    .await
            })
        }
    }

    /// Reading along with the write, a race lost to a write made before it costs one more
    /// round trip (the write again), not two (a re-read, then the write).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_race_lost_while_reading_along_costs_one_more_round_trip() {
        let s = setup().await;
        let stale = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        write_concurrently(&s.tables, &s.table, 10);
        s.faults.set_latency(Some(std::time::Duration::from_millis(10)));
        s.faults.forget_calls();
        let write = plain_write(&s.tables, &s.table);
        let written = update_conditionally_reading_along::<(), _>(
            &s.tables,
            &s.table,
            "p",
            "r",
            Some(stale),
            ReadAlong::Always,
            |e| Ok(add_vote(e)),
            write,
        )
        .await
        .unwrap();
        assert_eq!(
            written.i64("votes"),
            Some(11),
            "the other write is kept and ours re-applied"
        );
        let calls = s.faults.calls_made();
        let rounds: Vec<(usize, &str, bool)> = calls.iter().map(|c| (c.round, c.operation, c.failed)).collect();
        assert_eq!(
            rounds,
            vec![
                (1, "get", false),
                (1, "update", true),
                (2, "get", false),
                (2, "update", false)
            ],
            "{calls:#?}"
        );
    }

    /// Reading along only after a loss, a write on a current copy reads nothing, and a write
    /// on a stale one costs the re-read the loss needs, then reads along with its retry.
    #[tokio::test(flavor = "multi_thread")]
    async fn reading_along_after_a_loss_reads_only_once_a_race_is_lost() {
        let s = setup().await;
        let current = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        s.faults.set_latency(Some(std::time::Duration::from_millis(10)));
        s.faults.forget_calls();
        let write = plain_write(&s.tables, &s.table);
        let written = update_conditionally_reading_along::<(), _>(
            &s.tables,
            &s.table,
            "p",
            "r",
            Some(current),
            ReadAlong::AfterALoss,
            |e| Ok(add_vote(e)),
            write,
        )
        .await
        .unwrap();
        let calls = s.faults.calls_made();
        let rounds: Vec<(usize, &str, bool)> = calls.iter().map(|c| (c.round, c.operation, c.failed)).collect();
        assert_eq!(rounds, vec![(1, "update", false)], "{calls:#?}");
        s.faults.set_latency(None);
        write_concurrently(&s.tables, &s.table, 10);
        s.faults.set_latency(Some(std::time::Duration::from_millis(10)));
        s.faults.forget_calls();
        let write = plain_write(&s.tables, &s.table);
        update_conditionally_reading_along::<(), _>(
            &s.tables,
            &s.table,
            "p",
            "r",
            Some(written),
            ReadAlong::AfterALoss,
            |e| Ok(add_vote(e)),
            write,
        )
        .await
        .unwrap();
        let calls = s.faults.calls_made();
        let rounds: Vec<(usize, &str, bool)> = calls.iter().map(|c| (c.round, c.operation, c.failed)).collect();
        assert_eq!(
            rounds,
            vec![
                (1, "update", true),
                (2, "get", false),
                (3, "get", false),
                (3, "update", false)
            ],
            "{calls:#?}"
        );
    }

    /// A write that fails for its own reason while the read along shows the row unchanged is
    /// answered with its own error after the re-read that tells so, as without reading along.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_failure_while_reading_along_propagates_its_own_error() {
        let s = setup().await;
        s.faults
            .fail_operation("update", None, 1, StoreError::unavailable("injected outage"));
        let write = plain_write(&s.tables, &s.table);
        let result = update_conditionally_reading_along::<(), _>(
            &s.tables,
            &s.table,
            "p",
            "r",
            None,
            ReadAlong::Always,
            |e| Ok(add_vote(e)),
            write,
        )
        .await;
        match result {
            Err(ConditionalError::Store(e)) => assert_eq!(e.message, "injected outage"),
            other => panic!("expected the write's own error, got {other:?}"),
        }
        let stored = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        assert_eq!(stored.i64("votes"), Some(0), "nothing was written");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn spent_bound_is_a_conflict() {
        let s = setup().await;
        let calls = AtomicUsize::new(0);
        let result = update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| {
            let n = calls.fetch_add(1, Ordering::SeqCst) as i64;
            write_concurrently(&s.tables, &s.table, 100 + n);
            Ok(add_vote(e))
        })
        .await;
        assert!(matches!(result, Err(ConditionalError::Conflict)), "{result:?}");
        assert_eq!(calls.load(Ordering::SeqCst), MAX_ATTEMPTS);
        let stored = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        let last = 100 + MAX_ATTEMPTS as i64 - 1;
        assert_eq!(stored.i64("votes"), Some(last), "only the concurrent writes landed");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn failure_without_a_race_propagates_its_own_error() {
        let s = setup().await;
        s.faults
            .fail_operation("update", None, 1, StoreError::unavailable("injected outage"));
        let calls = AtomicUsize::new(0);
        let result = update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(add_vote(e))
        })
        .await;
        match result {
            Err(ConditionalError::Store(e)) => assert_eq!(
                (e.kind, e.message.as_str()),
                (ErrorKind::Unavailable, "injected outage")
            ),
            other => panic!("expected the write's own error, got {other:?}"),
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "no retry");
    }

    /// A timeout may have applied the write: it is reported as itself, neither re-applied nor
    /// looked into (a changed ETag could be its own).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_write_that_may_have_been_applied_is_reported_as_itself() {
        let s = setup().await;
        s.faults
            .fail_operation_after_applying("update", None, 1, StoreError::unavailable("timed out"));
        let before = s.faults.calls();
        let result =
            update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| Ok(add_vote(e))).await;
        assert!(
            matches!(&result, Err(ConditionalError::Store(e)) if e.kind == ErrorKind::Unavailable),
            "{result:?}"
        );
        assert_eq!(s.faults.calls() - before, 2, "the read and the write, no re-read");
        let stored = s.tables.get(&s.table, "p", "r").await.unwrap().unwrap();
        assert_eq!(stored.i64("votes"), Some(1), "applied once");
    }

    /// A write the single-row functions cannot express retries lost races with their bound,
    /// reads afresh each time, and reports its own errors unretried.
    #[tokio::test(start_paused = true)]
    async fn lost_races_of_a_composite_write_are_retried_up_to_the_one_bound() {
        let tries = AtomicUsize::new(0);
        let tries = &tries;
        let landed = retry_lost_races::<_, (), _, _>(move || async move {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0..=4 => Ok(Attempt::LostRace),
                n => Ok(Attempt::Done(n)),
            }
        })
        .await;
        assert_eq!(landed, Ok(Some(5)), "the sixth try lands");
        tries.store(0, Ordering::SeqCst);
        let lost = retry_lost_races::<(), (), _, _>(move || async move {
            tries.fetch_add(1, Ordering::SeqCst);
            Ok(Attempt::LostRace)
        })
        .await;
        assert_eq!(lost, Ok(None));
        assert_eq!(tries.load(Ordering::SeqCst), MAX_ATTEMPTS);
        tries.store(0, Ordering::SeqCst);
        let failed = retry_lost_races::<(), _, _, _>(move || async move {
            tries.fetch_add(1, Ordering::SeqCst);
            Err("outage")
        })
        .await;
        assert_eq!(failed, Err("outage"));
        assert_eq!(tries.load(Ordering::SeqCst), 1, "an error of its own is not retried");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn vanished_entity_is_not_found() {
        let s = setup().await;
        let result = update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| {
            let (tables, table) = (s.tables.clone(), s.table.clone());
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(async move { tables.delete(&table, "p", "r", &IfMatch::Any).await.unwrap() })
            });
            Ok(add_vote(e))
        })
        .await;
        assert!(matches!(result, Err(ConditionalError::NotFound)), "{result:?}");
        let missing =
            update_conditionally::<()>(&s.tables, &s.table, "p", "nothing", UpdateMode::Replace, |e| Ok(e)).await;
        assert!(matches!(missing, Err(ConditionalError::NotFound)));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn failed_re_read_is_a_conflict() {
        let s = setup().await;
        s.faults.fail_operation(
            "update",
            None,
            1,
            StoreError::new(ErrorKind::PreconditionFailed, "someone wrote"),
        );
        // The helper's first get succeeds; the re-read after the failed write fails.
        s.faults.fail_nth_call(3, StoreError::unavailable("re-read lost"));
        let result =
            update_conditionally::<()>(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |e| Ok(add_vote(e))).await;
        assert!(matches!(result, Err(ConditionalError::Conflict)), "{result:?}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn rejection_by_apply_writes_nothing() {
        let s = setup().await;
        let before = s.faults.calls();
        let result = update_conditionally(&s.tables, &s.table, "p", "r", UpdateMode::Replace, |_| {
            Err("closed poll")
        })
        .await;
        assert!(matches!(result, Err(ConditionalError::Rejected("closed poll"))));
        assert_eq!(s.faults.calls() - before, 1, "only the read");
    }
}
