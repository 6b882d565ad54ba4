//! The read connections: a pool of sessions, each with its own connection, used on the
//! caller's thread. In WAL a reader sees the last commit and never waits for the writer, so a
//! read never queues behind a group commit's fsync; and since a read is a few microseconds of
//! SQLite work on cached pages, it runs where it is asked for instead of being handed to
//! another thread and back (two wake-ups and two context switches a read, which cost more CPU
//! than the read itself and most of a lone request's latency). A session keeps its cached
//! statements and its tables seen between reads.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::session::{Durability, Session, Shared, open_connection};
use crate::{Result, StoreError};

/// Idle sessions kept for the next reads. More are opened while more threads read at once
/// (one per thread at a time, since a read never awaits); those beyond this are closed after
/// their read.
const KEPT: usize = 8;

/// The store's read sessions.
pub(super) struct Readers {
    path: PathBuf,
    shared: Arc<Shared>,
    idle: Mutex<Vec<Session>>,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Readers {
    /// Opens `initial` sessions on the store at `path`, so a file that cannot be read fails
    /// the store's open rather than its first read.
    pub(super) fn open(path: &Path, shared: Arc<Shared>, initial: usize) -> Result<Readers> {
        let idle = (0..initial)
            .map(|_| Ok(Session::new(open_connection(path, Durability::Normal)?, shared.clone())))
            .collect::<Result<Vec<_>>>()?;
        Ok(Readers {
            path: path.to_path_buf(),
            shared,
            idle: Mutex::new(idle),
        })
    }

    /// Runs `work` on an idle session (a new one if none is idle), on this thread. A read that
    /// panicked is an error, and its session is not reused.
    pub(super) fn run<T>(&self, work: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut session = match idle {
            Some(session) => session,
            None => Session::new(open_connection(&self.path, Durability::Normal)?, self.shared.clone()),
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut session)))
            .map_err(|_| StoreError::internal("a sqlite read panicked"))?;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < KEPT {
            idle.push(session);
        }
        result
    }
}
