//! The one place tabletalk reads the time. Every layer takes a [`Clock`] (the service's
//! components, the store's surfaces, the notification consumer, the live hub) and production
//! gives them [`SystemClock`]; a service test moves a [`ManualClock`], and an end-to-end test
//! the file clock of the adapters crate, so no test sleeps for time to pass.
//!
//! Only what another system checks against its own clock reads [`SystemClock`] directly,
//! whatever clock the process was given: the date of a request to Azure Storage, the expiry
//! of a token Azure Web PubSub or a push service verifies, and the storage engine's own row
//! stamp (Azure Table Storage's `Timestamp`, which the embedded store mirrors).

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// The time, as a component sees it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The system's time as a `std::time::SystemTime`, for HTTP dates.
    pub fn system_time(self) -> std::time::SystemTime {
        self.now().into()
    }
}

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

    /// A clock standing at the system's time now.
    pub fn starting_now() -> ManualClock {
        ManualClock::at(SystemClock.now())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_move_with_it() {
        let clock = ManualClock::at(DateTime::UNIX_EPOCH);
        let clone = clock.clone();
        assert_eq!(clock.now(), DateTime::UNIX_EPOCH);
        clone.advance(Duration::seconds(5));
        assert_eq!(clock.now(), DateTime::UNIX_EPOCH + Duration::seconds(5));
    }
}
