//! A thread read's query and its answer. Reading a thread is `crate::service::threads`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Message;

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadThread {
    /// Replies per page, 1..=100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadPage {
    pub root: Message,
    /// Oldest first.
    pub replies: Vec<Message>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// Participants a thread's root lists; past this the list stops growing (the count does not).
pub const MAX_LISTED_PARTICIPANTS: usize = 20;

/// What a thread's root carries about its replies, kept by each reply's own transaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSummary {
    /// Replies sent into the thread (a deleted reply still counts: it was sent).
    pub reply_count: u32,
    pub last_reply_at: Option<DateTime<Utc>>,
    /// Ids of the people who replied, first replier first, at most 20.
    pub participants: Vec<String>,
}

impl ThreadSummary {
    /// The summary after one more reply, by `author` at `at`.
    pub fn with_reply(mut self, author: &str, at: DateTime<Utc>) -> ThreadSummary {
        self.reply_count = self.reply_count.saturating_add(1);
        self.last_reply_at = Some(self.last_reply_at.map_or(at, |last| last.max(at)));
        if self.participants.len() < MAX_LISTED_PARTICIPANTS && !self.participants.iter().any(|p| p == author) {
            self.participants.push(author.to_owned());
        }
        self
    }
}

/// Threads one "my threads" listing returns.
pub const MAX_FOLLOWED_THREADS: usize = 200;
/// Unread replies counted per followed thread; past this the listing says "at least".
pub const MAX_UNREAD_REPLIES_COUNTED: usize = 100;

/// Whether the caller follows a thread, after following or unfollowing it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Following {
    /// The thread's root (following a reply follows its thread).
    pub thread_id: String,
    pub room_id: String,
    pub following: bool,
}

/// A thread the caller follows, as "my threads" lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FollowedThread {
    pub room_id: String,
    /// The root, with its summary (`thread`).
    pub root: Message,
    /// Replies after the caller's read position in the thread (their own included only if
    /// sent before it), counted up to 100.
    pub unread_replies: usize,
    /// True when there are more unread replies than `unreadReplies` says.
    pub unread_capped: bool,
}
