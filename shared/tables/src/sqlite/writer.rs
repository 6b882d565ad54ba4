//! The writer thread: it alone holds the store's write connection, and it group-commits.
//!
//! Calls arrive on a channel. The thread takes the first, drains whatever else is already
//! queued (it never waits for more), and runs them all inside one `BEGIN IMMEDIATE`: a call
//! that fails gets its own error, leaves nothing behind, and the later calls of the group never
//! see its writes. Then one `COMMIT` — one fsync for the whole group — and only then each
//! caller hears its answer, so a result (an ETag) is never given out for a write that did not
//! commit. If the `COMMIT` fails, every call of the group that had succeeded gets the commit's
//! error and none of them applied.
//!
//! How a failing call leaves nothing ([`Undo`]): a call of several writes runs in its own
//! `SAVEPOINT` and rolls back to it. A call of one write statement needs none — a refused
//! statement (a key taken, an ETag that moved) writes nothing — and most calls are one (a
//! send's index row and read position; the message's transaction is the one call of several).
//! A savepoint is not free: every page a call changes is first copied to the savepoint's
//! journal, which cost a group commit more than the rest of its bookkeeping. Should such a call
//! fail any other way (an SQLite error half-way through a write, a panic past its statement),
//! nothing can undo it alone, so the whole group is rolled back and its calls are told nothing
//! of it applied.
//!
//! Every call keeps Azure's semantics: it is the same single statement sequence it would be
//! alone, serialised behind the calls queued before it, and an entity group transaction is one
//! call, so it is all-or-nothing through its savepoint.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::session::{Session, commit_error, sql_error};
use crate::{ErrorKind, Result, StoreError};

/// How long a deferred call waits for a commit other calls cause before it causes its own. A
/// deferred call's row lingers meanwhile, which its caller chose to accept; its caller's answer
/// waits as long.
pub(super) const DEFERRED_WAIT: Duration = Duration::from_millis(200);

/// The most calls one group commit takes. A longer queue is committed in several groups, so
/// the first caller's wait stays bounded.
const MAX_GROUP: usize = 256;

/// How a failing call's writes are undone (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Undo {
    /// At most one write statement: refused, it wrote nothing.
    Statement,
    /// Several writes: the call runs in a savepoint of its own.
    Savepoint,
}

/// How a call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ran {
    Done,
    /// Refused for the rows as they are or for its input (a key taken, an ETag moved, a row
    /// missing, a rule broken): a statement so refused wrote nothing.
    Refused,
    /// Anything else — an SQLite error, maybe half-way through a write (a corrupt page), or a
    /// panic: only a rollback is sure to undo it.
    Failed,
}

/// A write call waiting for the writer thread.
pub(super) trait Job: Send {
    /// How its writes are undone if it fails.
    fn undo(&self) -> Undo;
    /// Whether it waits for a commit other calls cause ([`DEFERRED_WAIT`]).
    fn deferred(&self) -> bool {
        false
    }
    /// Runs the call in the current transaction.
    fn run(&mut self, session: &mut Session) -> Ran;
    /// Answers the caller once the group's fate is known: its own failure if it failed, else
    /// `commit`'s outcome (with its own result on success).
    fn answer(self: Box<Self>, commit: &Result<()>);
}

/// A call and the channel its caller awaits.
pub(super) struct Call<T, F> {
    undo: Undo,
    deferred: bool,
    work: Option<F>,
    result: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Call<T, F> {
    pub(super) fn new(undo: Undo, work: F, reply: oneshot::Sender<Result<T>>) -> Call<T, F> {
        Call {
            undo,
            deferred: false,
            work: Some(work),
            result: None,
            reply,
        }
    }

    /// This call, waiting for a commit other calls cause ([`DEFERRED_WAIT`]).
    pub(super) fn deferred(self) -> Call<T, F> {
        Call { deferred: true, ..self }
    }
}

impl<T, F> Job for Call<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut Session) -> Result<T> + Send + 'static,
{
    fn undo(&self) -> Undo {
        self.undo
    }

    fn deferred(&self) -> bool {
        self.deferred
    }

    fn run(&mut self, session: &mut Session) -> Ran {
        let Some(work) = self.work.take() else {
            return Ran::Failed;
        };
        let result = catch_unwind(AssertUnwindSafe(|| work(session)))
            .unwrap_or_else(|_| Err(StoreError::internal("a sqlite call panicked")));
        let ran = match &result {
            Ok(_) => Ran::Done,
            Err(e) => match e.kind {
                ErrorKind::NotFound
                | ErrorKind::AlreadyExists
                | ErrorKind::PreconditionFailed
                | ErrorKind::InvalidInput => Ran::Refused,
                ErrorKind::Unavailable | ErrorKind::Internal | ErrorKind::Indeterminate => Ran::Failed,
            },
        };
        self.result = Some(result);
        ran
    }

    fn answer(self: Box<Self>, commit: &Result<()>) {
        let Call { result, reply, .. } = *self;
        let answer = match (result, commit) {
            (Some(Ok(value)), Ok(())) => Ok(value),
            // A refusal stands only when its group committed: one made against the write of an
            // earlier call of the same group (a key that call took, an ETag it moved) is stale
            // once that write is rolled back, so the caller hears the group's fate instead and
            // asks again.
            (Some(Err(own)), Err(group)) if refused_by_state(&own) => Err(group.clone()),
            (Some(Err(own)), _) => Err(own),
            (Some(Ok(_)), Err(e)) | (None, Err(e)) => Err(e.clone()),
            (None, Ok(())) => Err(StoreError::internal("a sqlite call was never run")),
        };
        // A caller that stopped waiting (its request was cancelled) needs no answer.
        let _ = reply.send(answer);
    }
}

/// Whether `error` refuses a call for the rows as they were (and not for its input, or for a
/// failure of the store).
fn refused_by_state(error: &StoreError) -> bool {
    matches!(
        error.kind,
        ErrorKind::NotFound | ErrorKind::AlreadyExists | ErrorKind::PreconditionFailed
    )
}

/// The writer thread, kept alive: it runs [`run`] and, should that panic outside any one call
/// (in the loop itself, or while answering), opens a fresh session with `reopen` and runs it
/// again, so that one bad moment does not leave every later write failing while the process
/// looks healthy. The group under way when it panicked is lost whole — SQLite rolls back the
/// transaction of a connection that closes — unless its `COMMIT` had already returned; either
/// way its callers' answers are dropped, and they hear that the writer stopped before
/// answering ([`ErrorKind::Indeterminate`]). Returns when every handle to the store is gone.
pub(super) fn supervise(
    mut session: Session,
    calls: Receiver<Vec<Box<dyn Job>>>,
    reopen: impl Fn() -> Result<Session>,
) {
    loop {
        match catch_unwind(AssertUnwindSafe(|| run(session, &calls))) {
            Ok(()) => return,
            Err(_) => tracing::error!("the sqlite writer panicked; it starts again on a fresh connection"),
        }
        session = loop {
            match reopen() {
                Ok(session) => break session,
                Err(e) => {
                    tracing::error!(error = %e, "the sqlite writer cannot reopen the store; trying again in a second");
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            }
        };
    }
}

/// The writer thread's loop; returns when every handle to the store is gone, once everything
/// sent has been committed. Each message on `calls` is the calls one task step made
/// ([`super::together`]). Deferred calls alone start no commit: they wait, in their place in
/// the queue, for the next call that does, or for [`DEFERRED_WAIT`].
fn run(mut session: Session, calls: &Receiver<Vec<Box<dyn Job>>>) {
    let mut queue: VecDeque<Box<dyn Job>> = VecDeque::new();
    // When the deferred calls now queued began waiting (none queued: `None`).
    let mut waiting_since: Option<Instant> = None;
    loop {
        let received = match waiting_since {
            None => calls.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(since) => calls.recv_timeout(DEFERRED_WAIT.saturating_sub(since.elapsed())),
        };
        let (mut due, stopping) = match received {
            Ok(first) => (take(&mut queue, first), false),
            Err(RecvTimeoutError::Timeout) => (true, false),
            Err(RecvTimeoutError::Disconnected) => (true, true),
        };
        while queue.len() < MAX_GROUP {
            match calls.try_recv() {
                Ok(more) => due |= take(&mut queue, more),
                Err(_) => break,
            }
        }
        if due || queue.len() >= MAX_GROUP {
            while !queue.is_empty() {
                commit_group(&mut session, &mut queue);
            }
            waiting_since = None;
        } else if !queue.is_empty() {
            waiting_since.get_or_insert_with(Instant::now);
        }
        if stopping {
            return;
        }
    }
}

/// Queues `calls`; true when one of them starts a commit (is not deferred).
fn take(queue: &mut VecDeque<Box<dyn Job>>, calls: Vec<Box<dyn Job>>) -> bool {
    let due = calls.iter().any(|call| !call.deferred());
    queue.extend(calls);
    due
}

/// Runs the queued calls (up to [`MAX_GROUP`]) in one transaction and commits it. Takes them
/// from `queue` unless the transaction is lost half-way (an error that made SQLite roll it back); the calls
/// after that point stay queued for the next group.
fn commit_group(session: &mut Session, queue: &mut VecDeque<Box<dyn Job>>) {
    if let Err(e) = session.exec("BEGIN IMMEDIATE") {
        let e = Err(sql_error(e));
        for call in queue.drain(..) {
            call.answer(&e);
        }
        return;
    }
    let mut group: Vec<Box<dyn Job>> = Vec::with_capacity(queue.len().min(MAX_GROUP));
    while group.len() < MAX_GROUP
        && let Some(mut call) = queue.pop_front()
    {
        let kept = match call.undo() {
            Undo::Savepoint => {
                session.exec("SAVEPOINT call").is_ok() && {
                    if call.run(session) == Ran::Done {
                        session.exec("RELEASE call").is_ok()
                    } else {
                        session.forget_tables();
                        session
                            .exec("ROLLBACK TO call")
                            .and_then(|()| session.exec("RELEASE call"))
                            .is_ok()
                    }
                }
            }
            // A refused statement wrote nothing. A call refused after a write went through,
            // or failed otherwise, cannot be undone alone. The text index (`text.rs`) writes
            // the postings it holds in memory at the next savepoint, which a refused
            // statement may open: written first, they are not counted as the call's.
            Undo::Statement => {
                let flushed = group.is_empty()
                    || session
                        .exec("SAVEPOINT flush")
                        .and_then(|()| session.exec("RELEASE flush"))
                        .is_ok();
                let before = session.conn.total_changes();
                flushed
                    && match call.run(session) {
                        Ran::Done => true,
                        Ran::Refused => session.conn.total_changes() == before,
                        Ran::Failed => false,
                    }
            }
        };
        group.push(call);
        if !kept || session.conn.is_autocommit() {
            // The transaction is gone (or its savepoints are, or a call's write cannot be
            // undone alone): nothing of the group so far commits. The calls that had succeeded
            // are told so; the rest wait for the next group.
            if !session.conn.is_autocommit() {
                let _ = session.exec("ROLLBACK");
            }
            session.forget_tables();
            let lost = Err(StoreError::unavailable(
                "sqlite rolled back the group commit this call was part of; nothing of it applied",
            ));
            for call in group {
                call.answer(&lost);
            }
            return;
        }
    }
    let commit = session.exec("COMMIT").map_err(commit_error);
    match &commit {
        Ok(()) => {
            session.count_commit();
            session.announce_dropped_tables();
        }
        Err(_) => {
            if !session.conn.is_autocommit() {
                let _ = session.exec("ROLLBACK");
            }
            session.forget_tables();
        }
    }
    for call in group {
        call.answer(&commit);
    }
}
