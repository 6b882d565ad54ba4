//! Where the limits read the time. Production reads the system clock. Tests must move time
//! without sleeping: a service test advances a [`ManualClock`]; an end-to-end test, which
//! drives the real binary, writes the time into a file that [`FileClock`] reads on every call,
//! so two server processes given the same file share one clock (`TABLETALK_TEST_CLOCK_FILE`,
//! honoured only with the published development secret: see the service's `config`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// The time, as the limits see it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until a test moves it. Clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn at(now: DateTime<Utc>) -> ManualClock {
        ManualClock(Arc::new(Mutex::new(now)))
    }

    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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
            Some(millis) => DateTime::from_timestamp_millis(millis).unwrap_or_else(Utc::now),
            None => {
                tracing::warn!(path = %self.0.display(), "the test clock file holds no time; using the system clock");
                Utc::now()
            }
        }
    }
}
