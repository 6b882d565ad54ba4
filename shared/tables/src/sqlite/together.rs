//! Write calls a task makes in one step reach the writer thread together.
//!
//! A send writes its index row, its message transaction and its sender's read position at
//! once (`tokio::join!`), as three calls. Sent one by one, the writer thread may wake on the
//! first and commit it alone — one fsync for it, another for the other two — so a lone send
//! paid two or three fsyncs, and every call cost the writer a wake-up. Inside [`together`],
//! the calls a task makes while it is polled are held on this thread and sent as one message
//! when the poll ends: the writer finds them queued at once and commits them in one group.
//!
//! Nothing waits for this: a call's caller awaits its answer, which cannot come before the
//! writer has the call, and the poll that made it ends before the task can be woken again.
//! What a call does wait for is the rest of its step: work done synchronously after it in the
//! same poll delays its commit. Outside [`together`] — another task, including one spawned
//! from inside, and background work — a call is sent at once. Reads are not held: they run
//! on the caller's thread.
//!
//! The one rule: never block a poll inside [`together`] on a write made in it (a nested
//! `block_on`, `block_in_place`): the write is held until that poll ends, so it never would.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::task::{Context, Poll};

use super::writer::Job;

/// The writer's channel: each message is the calls one task step made.
pub(super) type Calls = Sender<Vec<Box<dyn Job>>>;

thread_local! {
    /// How many [`together`] polls this thread is inside (they may nest).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The calls held until the outermost poll ends, by store (its `id`).
    static HELD: RefCell<Vec<(u64, Calls, Vec<Box<dyn Job>>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `future` so that the embedded store's write calls it makes in one poll are sent to
/// the writer thread together (see the module doc). Harmless on any other backend.
pub fn together<F: Future>(future: F) -> Together<F> {
    Together { future }
}

pin_project_lite::pin_project! {
    /// The future [`together`] returns.
    pub struct Together<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Together<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _step = Step::enter();
        self.project().future.poll(cx)
    }
}

/// One poll inside [`together`]; sends what it held when the outermost one ends, even by a
/// panic.
struct Step;

impl Step {
    fn enter() -> Step {
        DEPTH.with(|depth| depth.set(depth.get() + 1));
        Step
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        let outermost = DEPTH.with(|depth| {
            depth.set(depth.get() - 1);
            depth.get() == 0
        });
        if outermost {
            // Empty (and nothing held) if the thread's locals are being torn down.
            let held = HELD
                .try_with(|held| std::mem::take(&mut *held.borrow_mut()))
                .unwrap_or_default();
            for (_, channel, calls) in held {
                // A writer that has stopped drops the calls, and their callers hear so.
                let _ = channel.send(calls);
            }
        }
    }
}

/// Sends `call` to store `store`'s writer, or holds it until the step ends inside
/// [`together`]. An error means the writer has stopped.
pub(super) fn send(store: u64, channel: &Calls, call: Box<dyn Job>) -> Result<(), ()> {
    if DEPTH.try_with(Cell::get).unwrap_or(0) == 0 {
        return channel.send(vec![call]).map_err(drop);
    }
    let mut call = Some(call);
    let _ = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        let call = call.take().expect("taken once");
        match held.iter_mut().find(|(id, _, _)| *id == store) {
            Some((_, _, calls)) => calls.push(call),
            None => held.push((store, channel.clone(), vec![call])),
        }
    });
    match call {
        // The thread's locals are being torn down: no step will end to send it.
        Some(call) => channel.send(vec![call]).map_err(drop),
        None => Ok(()),
    }
}
