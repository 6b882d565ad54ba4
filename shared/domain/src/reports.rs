//! Reports: a member flags a message with a reason; moderators (ManageMessages) read the open
//! reports grouped by message, most reported first, and resolve a group by dismissing it or by
//! deleting the message. The use cases are `crate::service::reports`.
//!
//! One report per member and message, ever: a repeat is a no-op, also after the group was
//! dismissed, so a dismissal cannot be undone by the same members reporting again. A report
//! from a member who had not reported it opens the message's group again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::messages::Message;
use crate::moderation::MAX_REASON_CHARS;
use crate::text::plain_lines;

/// Open groups one queue read returns, most reported first.
pub const MAX_LISTED_GROUPS: usize = 100;
/// Reports shown per group (its `count` is all of them).
pub const MAX_LISTED_REPORTS: usize = 100;

crate::text_field!(
    /// A report's reason in the document: not blank.
    ReportReason, 1, MAX_REASON_CHARS, crate::text::LINES_NOT_BLANK
);

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewReport {
    /// Why: 1..=500 characters, trimmed; line breaks allowed.
    #[schema(value_type = ReportReason, inline)]
    pub reason: String,
}

/// A member's report of a message.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub message_id: String,
    pub reporter_id: String,
    pub reporter_name: String,
    pub reason: String,
    pub reported_at: DateTime<Utc>,
}

/// The open reports of one message.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportGroup {
    pub message_id: String,
    /// The message as it is now.
    pub message: Message,
    /// How many members reported it since it was last resolved.
    pub count: u32,
    pub first_reported_at: DateTime<Utc>,
    pub last_reported_at: DateTime<Utc>,
    /// Oldest first, at most 100.
    pub reports: Vec<Report>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportQueue {
    /// Most reported first (then most recently reported), at most 100 groups.
    pub groups: Vec<ReportGroup>,
}

/// What a moderator does with a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ResolveAction {
    /// Close the reports and keep the message.
    Dismiss,
    /// Delete the message (a moderated tombstone); its reports close with it.
    Delete,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveReports {
    pub action: ResolveAction,
    /// At most 500 characters; recorded in the moderation log.
    #[schema(value_type = Option<crate::text::Reason>, inline)]
    pub reason: Option<String>,
}

/// How a group was closed, as the log's `details.resolution` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Resolution {
    Dismissed,
    /// The message was deleted (through a resolution, or by anyone, any way).
    MessageDeleted,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Dismissed => "dismissed",
            Resolution::MessageDeleted => "messageDeleted",
        }
    }
}

/// A report's reason: trimmed, 1..=500 characters.
pub fn checked_report_reason(reason: &str) -> Result<String> {
    let reason = plain_lines(reason, "reason", MAX_REASON_CHARS)?;
    if reason.is_empty() {
        return Err(Error::validation("a report needs a reason"));
    }
    Ok(reason)
}

/// The queue's order: most reported first, then the most recently reported.
pub fn queue_order(a: (u32, DateTime<Utc>), b: (u32, DateTime<Utc>)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(b.1.cmp(&a.1))
}
