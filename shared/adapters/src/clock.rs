//! The clock, as the adapters and the layers above name it: the one clock of
//! `tabletalk-clock`, and the file clock an end-to-end test moves. A test that drives the real
//! binary writes the time into a file that [`FileClock`] reads on every call, so two server
//! processes given the same file share one clock (`TABLETALK_TEST_CLOCK_FILE`, honoured only
//! with the published development secret: see the service's `config`).

use std::path::PathBuf;

use chrono::{DateTime, Utc};
pub use tabletalk_clock::{Clock, ManualClock, SystemClock};

/// Test only: the time is the Unix milliseconds written in a file, read on every call (a few
/// microseconds; only tests pay it). A file that cannot be read or parsed yields the system
/// time, with a warning: a test that wrote no file sees the time pass as usual.
#[derive(Debug, Clone)]
pub struct FileClock(PathBuf);

impl FileClock {
    pub fn new(path: impl Into<PathBuf>) -> FileClock {
        FileClock(path.into())
    }
}

impl Clock for FileClock {
    fn now(&self) -> DateTime<Utc> {
        let read = std::fs::read_to_string(&self.0).ok();
        match read.and_then(|text| text.trim().parse::<i64>().ok()) {
            Some(millis) => DateTime::from_timestamp_millis(millis).unwrap_or_else(|| SystemClock.now()),
            None => {
                tracing::warn!(path = %self.0.display(), "the test clock file holds no time; using the system clock");
                SystemClock.now()
            }
        }
    }
}
