//! Reports: a member reports a message; moderators (ManageMessages) read the open reports
//! grouped by message and resolve a group, by dismissing it or by deleting the message through
//! the normal delete path. Every resolution is in the moderation log.
//!
//! `report_message` is the one door for report writes, so whatever admits writes (a per-user
//! rate limit) stands in front of its `store.add_report` and nowhere else.
//!
//! A deleted message leaves its reports resolved whoever deleted it and however: the delete
//! path (`Editing::delete_message_for`) closes them; and since a crash, the retention purge or a
//! path that bypasses it could leave a group open, the queue closes any group whose message
//! it finds deleted or gone before answering.

use super::changes::Editing;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::MessageKey;
use crate::limits::Write;
use crate::messages::Message;
use crate::messages::operations::{Operation, authorize};
use crate::moderation::{ModerationAction, ModerationEntry, checked_reason};
use crate::permissions::Permission;
use crate::reports::{
    MAX_LISTED_GROUPS, MAX_LISTED_REPORTS, NewReport, Report, ReportGroup, ReportQueue, Resolution, ResolveAction,
    ResolveReports, checked_report_reason, queue_order,
};
use crate::store::reports::{OpenGroup, Reported};
use crate::store::stored_time;
use futures::future::try_join_all;

/// Open groups read to find the most reported (the queue shows [`MAX_LISTED_GROUPS`]).
const MAX_OPEN_GROUPS_READ: usize = 10_000;

/// A report's answer: the report as stored, and whether this call made it.
#[derive(Debug, Clone)]
pub struct Filed {
    pub report: Report,
    pub created: bool,
}

impl Editing {
    /// Reports a live message in a room the caller belongs to. A repeat by the same member is
    /// a no-op answering their first report.
    pub async fn report_message(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        input: NewReport,
    ) -> Result<Filed> {
        let reason = checked_report_reason(&input.reason)?;
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Report)?;
        self.limiter.check_write_limits(&access, Write::Report).await?;
        let report = Report {
            message_id: message.id.clone(),
            reporter_id: who.user_id.to_string(),
            reporter_name: access.member.display_name().to_owned(),
            reason,
            reported_at: stored_time(self.store.now()),
        };
        Ok(
            match self
                .store
                .reports
                .add_report(room, &message.key(), &who.user_id, &report)
                .await?
            {
                Reported::New(report) => Filed { report, created: true },
                Reported::Repeat(report) => Filed { report, created: false },
            },
        )
    }

    /// The open reports, grouped by message, most reported first (ManageMessages).
    pub async fn report_queue(&self, who: &Principal, room: &RoomId) -> Result<ReportQueue> {
        let access = self.access.access(room, &who.user_id).await?;
        access.require(Permission::ManageMessages)?;
        let mut open = self
            .store
            .reports
            .open_report_groups(room, MAX_OPEN_GROUPS_READ)
            .await?;
        open.sort_by(|a, b| queue_order((a.count, a.last_reported_at), (b.count, b.last_reported_at)));
        let mut groups = Vec::new();
        // Groups whose message is gone are closed and skipped, so read on past them.
        for chunk in open.chunks(MAX_LISTED_GROUPS) {
            let shown = try_join_all(chunk.iter().map(|group| self.queue_entry(room, &who.user_id, group))).await?;
            groups.extend(shown.into_iter().flatten());
            if groups.len() >= MAX_LISTED_GROUPS {
                break;
            }
        }
        groups.truncate(MAX_LISTED_GROUPS);
        Ok(ReportQueue { groups })
    }

    /// A group as the queue shows it; `None` (and the group closed) when its message is
    /// deleted or gone.
    async fn queue_entry(&self, room: &RoomId, reader: &UserId, group: &OpenGroup) -> Result<Option<ReportGroup>> {
        let (message, reports) = tokio::try_join!(self.reading.find_message(room, &group.message), async {
            Ok(self
                .store
                .reports
                .group_reports(room, group, MAX_LISTED_REPORTS)
                .await?)
        },)?;
        let mut message = match message {
            Some(message) if message.is_live() => message,
            gone => {
                self.close_reports_of_gone(room, &group.message, gone.as_ref()).await?;
                return Ok(None);
            }
        };
        self.reading
            .hide_foreign_sources(room, reader, std::slice::from_mut(&mut message))
            .await;
        Ok(Some(ReportGroup {
            message_id: message.id.clone(),
            message,
            count: group.count,
            first_reported_at: group.first_reported_at,
            last_reported_at: group.last_reported_at,
            reports,
        }))
    }

    /// Resolves a message's open reports (ManageMessages): dismissed, or the message deleted
    /// as a moderated tombstone through the normal delete path. No open reports is 404.
    pub async fn resolve_reports(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        input: ResolveReports,
    ) -> Result<()> {
        let reason = checked_reason(input.reason.as_deref())?;
        let access = self.access.access(room, &who.user_id).await?;
        access.require(Permission::ManageMessages)?;
        let none_open = || Error::not_found("no open reports for this message");
        if self.store.reports.open_reports(room, id).await?.is_none() {
            return Err(none_open());
        }
        match input.action {
            ResolveAction::Delete => self.delete_message_for(who, room, id, reason).await,
            ResolveAction::Dismiss => {
                let now = self.store.now();
                let resolved = |group: &OpenGroup| {
                    resolution_entry(Some(&who.user_id), group, Resolution::Dismissed, now).reason(reason.clone())
                };
                let closed = self
                    .store
                    .reports
                    .close_reports(room, id, Resolution::Dismissed, Some(&who.user_id), &[], resolved)
                    .await?;
                closed.map(|_| ()).ok_or_else(none_open)
            }
        }
    }

    /// After a delete: closes the message's reports as resolved by it, writing `entries` (the
    /// moderated delete's line) in the same transaction. The delete has happened by now, so a
    /// failure here is logged rather than answered: the queue closes what is left open.
    pub(crate) async fn resolve_reports_of_deleted(
        &self,
        room: &RoomId,
        deleted: &Message,
        entries: Vec<ModerationEntry>,
    ) {
        let by = deleted.deleted_by.as_deref().and_then(|by| UserId::parse(by).ok());
        let now = self.store.now();
        let resolved = |group: &OpenGroup| resolution_entry(by.as_ref(), group, Resolution::MessageDeleted, now);
        if let Err(e) = self
            .store
            .reports
            .close_reports(
                room,
                &deleted.key(),
                Resolution::MessageDeleted,
                by.as_ref(),
                &entries,
                resolved,
            )
            .await
        {
            tracing::warn!(%room, message = %deleted.id, error = %e, "could not log a delete or resolve its reports");
        }
    }

    /// Closes the reports of a message found deleted (`tombstone`) or gone (purged): by whoever
    /// deleted it, or by the server itself.
    async fn close_reports_of_gone(&self, room: &RoomId, key: &MessageKey, tombstone: Option<&Message>) -> Result<()> {
        let by = tombstone
            .and_then(|m| m.deleted_by.as_deref())
            .and_then(|by| UserId::parse(by).ok());
        let now = self.store.now();
        let resolved = |group: &OpenGroup| resolution_entry(by.as_ref(), group, Resolution::MessageDeleted, now);
        self.store
            .reports
            .close_reports(room, key, Resolution::MessageDeleted, by.as_ref(), &[], resolved)
            .await?;
        Ok(())
    }
}

/// The log entry of a group's resolution.
fn resolution_entry(
    by: Option<&UserId>,
    group: &OpenGroup,
    resolution: Resolution,
    at: chrono::DateTime<chrono::Utc>,
) -> ModerationEntry {
    ModerationEntry::new(ModerationAction::ReportsResolved, by, at)
        .message(group.message.as_str())
        .detail("resolution", resolution)
        .detail("reports", group.count)
}
