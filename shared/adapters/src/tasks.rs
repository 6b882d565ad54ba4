//! The owner of a process's background work. Whatever a request or a timer starts to run on
//! after it (publishing an event, a delivery run, a live signal, a preview, an erasure, the
//! housekeeping loop) is spawned through a [`Supervisor`], so a server told to stop can let
//! that work finish, tell its loops to end, and only then exit: nothing it acknowledged is
//! left half done for want of a few milliseconds.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Every background task of one process. Cloning is cheap and clones share the tasks.
#[derive(Debug, Clone)]
pub struct Supervisor {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Default for Supervisor {
    fn default() -> Supervisor {
        Supervisor {
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
        }
    }
}

impl Supervisor {
    /// Work that ends by itself (a publish, a signal, a delivery run): a stopping process waits
    /// for it.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn(task);
    }

    /// Work that runs until it is told to stop (a loop, a worker, a long job that keeps its
    /// progress as it goes): a stopping process drops it at its next wait. What it had not
    /// kept is taken up again from the store by the next process, as after a crash.
    pub fn spawn_until_stopped(&self, task: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Tells the loops to stop and waits up to `grace` for every task. True when all ended.
    pub async fn shut_down(&self, grace: Duration) -> bool {
        self.stop.cancel();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait()).await.is_ok()
    }

    /// Tasks still running.
    pub fn running(&self) -> usize {
        self.tracker.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn shutting_down_waits_for_work_and_stops_loops() {
        let tasks = Supervisor::default();
        let finished = Arc::new(AtomicBool::new(false));
        let done = finished.clone();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            done.store(true, Ordering::SeqCst);
        });
        tasks.spawn_until_stopped(std::future::pending());
        assert_eq!(tasks.running(), 2);
        assert!(tasks.shut_down(Duration::from_secs(5)).await, "every task ended");
        assert!(finished.load(Ordering::SeqCst), "the work ran to its end");
        assert_eq!(tasks.running(), 0);
    }

    #[tokio::test]
    async fn work_that_outlasts_the_grace_is_reported() {
        let tasks = Supervisor::default();
        tasks.spawn(std::future::pending());
        assert!(!tasks.shut_down(Duration::from_millis(20)).await);
    }
}
