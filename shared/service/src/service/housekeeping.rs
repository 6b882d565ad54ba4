//! Housekeeping, what the timer does: republish notification events still pending in the
//! outbox, purge messages older than their room's retention, raise the room's retention floor,
//! and expire idempotency records and the limits' repeat-text records and members' buckets
//! past their windows; list rooms from before visibility in the directory; and take over
//! erasures whose process stopped running them; delete uploads never attached after a day,
//! and the objects of purged messages; and remove scheduled messages finished a week ago
//! (found by their expiry rows, never by a scan); and try once more the link previews a
//! stopped process left unfetched, and forget cached previews past their window.
//!
//! Rooms are found through the `Housekeeping` table (one row per room), so a run costs in rooms,
//! in expired messages and in the idempotency records kept (at most a day's worth), never in
//! the messages stored. A purge works in small batches and stops after a bounded amount of work
//! per room per run; the next run goes on.
//!
//! Purging a batch of messages deletes their files first (objects, then upload rows; a failure
//! stops the batch before its rows go, so no file outlives every row that names it), then each
//! message's index row and companion rows (reactions, votes), then,
//! in one entity group transaction, its message row, its feed row and its thread row together
//! with the counter's new floor: a reader can never see a purged change vanish without the
//! floor telling it so (its cursor below the floor answers RESET).

use super::Chat;
use crate::error::Result;
use crate::ids::RoomId;
use crate::limits::REPEAT_WINDOW;
use crate::store::purge::{MAX_BATCHES_PER_ROOM, RoomStanding};
use chrono::{DateTime, Duration, Utc};

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
    /// Erasures taken over from a process that stopped running them (`service::erasure`).
    pub erasures_resumed: usize,
    /// Repeat-text records past their window and members' buckets idle for ten minutes.
    pub limit_records_expired: usize,
    /// Uploads never attached, a day after their link was handed out (`service::attachments`).
    pub uploads_expired: usize,
    /// Scheduled messages finished more than `scheduled::FINISHED_KEPT` ago.
    pub scheduled_expired: usize,
    /// Link preview jobs left by a process that stopped, tried once more (`service::previews`).
    pub preview_jobs_retried: usize,
    /// Link previews cached longer than `previews::CACHE_FOR`, forgotten.
    pub link_previews_expired: usize,
    /// Connections left open by a self-hosted process that stopped, closed (`service::presence`).
    pub connections_swept: usize,
}

impl Chat {
    /// One housekeeping run over every room.
    pub async fn housekeeping(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut report = Report::default();
        // An erasure whose process died is taken over here; its work runs in the background.
        match self.eraser.resume_erasures(now).await {
            Ok(resumed) => report.erasures_resumed = resumed,
            Err(e) => tracing::warn!(error = %e, "resuming erasures failed; trying again next run"),
        }
        match self.files.expire_unattached_uploads(now).await {
            Ok(expired) => report.uploads_expired = expired,
            Err(e) => tracing::warn!(error = %e, "expiring unattached uploads failed; trying again next run"),
        }
        match self
            .wiring
            .store
            .scheduled
            .expire_scheduled(now - crate::scheduled::FINISHED_KEPT)
            .await
        {
            Ok(expired) => report.scheduled_expired = expired,
            Err(e) => tracing::warn!(error = %e, "expiring scheduled messages failed; trying again next run"),
        }
        match self.previewer.retry_preview_jobs(now).await {
            Ok(tried) => report.preview_jobs_retried = tried,
            Err(e) => tracing::warn!(error = %e, "retrying link previews failed; trying again next run"),
        }
        match self.previewer.expire_link_cache(now).await {
            Ok(expired) => report.link_previews_expired = expired,
            Err(e) => tracing::warn!(error = %e, "expiring cached link previews failed; trying again next run"),
        }
        match self.presence_keeper.sweep_stopped_hubs(now).await {
            Ok(swept) => report.connections_swept = swept,
            Err(e) => tracing::warn!(error = %e, "sweeping stopped live hubs failed; trying again next run"),
        }
        for (room, registered) in self.wiring.store.purge.registered_rooms().await? {
            let registered = registered.unwrap_or(now);
            // One room's trouble (a busy counter, an unreadable row) never stops the others;
            // the next run tries it again.
            if let Err(e) = self.keep_room(&room, registered, now, &mut report).await {
                report.rooms_failed += 1;
                tracing::warn!(%room, error = %e, "housekeeping of a room failed");
            }
        }
        Ok(report)
    }

    async fn keep_room(
        &self,
        room: &RoomId,
        registered: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut Report,
    ) -> Result<()> {
        let retention = match self.wiring.store.purge.room_standing(room).await? {
            RoomStanding::Missing if now - registered < REGISTRATION_GRACE => return Ok(()),
            RoomStanding::Missing => return Ok(self.wiring.store.purge.unregister_room(room).await?),
            RoomStanding::BeingDeleted => return Ok(()),
            RoomStanding::Kept { retention_seconds } => retention_seconds,
        };
        report.rooms += 1;
        // Rooms from before visibility are public, as they were joinable by id: listed once.
        self.wiring.store.rooms.list_room_from_before_visibility(room).await?;
        if let Some(seconds) = retention {
            let cutoff = now - Duration::seconds(i64::from(seconds));
            for _ in 0..MAX_BATCHES_PER_ROOM {
                let messages = self.wiring.store.purge.expired_messages(room, cutoff).await?;
                if messages.is_empty() {
                    break;
                }
                // Their files before their rows: once the rows are gone nothing names the files
                // any more, so a failure in between must leave the rows (the next run tries
                // the batch again), never the files.
                let files: Vec<_> = messages.iter().flat_map(|m| m.attachments.iter().cloned()).collect();
                self.files.purge_attachments(room, &files).await?;
                report.messages_purged += self.wiring.store.purge.purge_messages(room, &messages).await?;
            }
        }
        report.idempotency_records_expired += self
            .wiring
            .store
            .purge
            .expire_idempotency(room, now - IDEMPOTENCY_WINDOW)
            .await?;
        // A member's bucket is full again two minutes after it was last drawn from (its burst
        // at its rate): one idle for ten says nothing a missing one does not.
        let buckets_before = now - Duration::minutes(10);
        report.limit_records_expired += self
            .wiring
            .store
            .limits
            .expire_limit_rows(room, now - REPEAT_WINDOW, buckets_before)
            .await?;
        Ok(())
    }
}
