//! What a housekeeping run reports, and its windows. The run is `crate::service::housekeeping`.

use chrono::Duration;

/// How long a client id protects against a repeated send.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::hours(24);
/// How long a housekeeping row may wait for its room to be created.
pub const REGISTRATION_GRACE: Duration = Duration::hours(1);

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub rooms: usize,
    /// Rooms whose housekeeping failed this time (logged; retried next run).
    pub rooms_failed: usize,
    pub messages_purged: usize,
    pub idempotency_records_expired: usize,
}
