//! The reader threads: each holds a read connection of its own. In WAL a reader sees the last
//! commit and never waits for the writer, so a read never queues behind a group commit's
//! fsync; and a thread per connection keeps its cached statements and its tables seen.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use super::session::Session;

/// A read call: it runs on a reader's session and answers its caller itself.
pub(super) type ReadJob = Box<dyn FnOnce(&mut Session) + Send>;

/// One reader thread's loop; returns when every handle to the store is gone. The readers
/// share one queue, so a read goes to whichever reader is free.
pub(super) fn run(mut session: Session, reads: Arc<Mutex<Receiver<ReadJob>>>) {
    loop {
        let next = reads.lock().unwrap_or_else(|p| p.into_inner()).recv();
        match next {
            Ok(read) => read(&mut session),
            Err(_) => return,
        }
    }
}
