//! A page read's query and its answer, with the page limits; the reads that find messages (a
//! page around one, several by id, the room's pins) too. Reading is `crate::service::read` and
//! `crate::service::pins`.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Message;
use super::cursor::Order;
use crate::error::{Error, Result};

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 100;
/// Serialized messages one page may carry; a page stops early (with `hasMore`) past this.
pub const PAGE_BYTE_BUDGET: usize = 1024 * 1024;

/// Query parameters of a page read.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadMessages {
    /// `desc` (newest first, the default) or `asc` (oldest first).
    #[param(inline)]
    pub order: Option<Order>,
    /// Messages per page, 1..=100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
    /// The `nextCursor` of the previous page in the same order.
    pub cursor: Option<String>,
    /// A message id: answers the page around it instead (an [`AroundPage`], oldest first, with
    /// a cursor each way); takes no `order` or `cursor`. A missing or deleted message is 404.
    pub around: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    /// In the order asked for.
    pub messages: Vec<Message>,
    /// True when more messages follow `nextCursor`: ask again with it.
    pub has_more: bool,
    /// Resume here; the incoming cursor (or null) when the page covered nothing.
    pub next_cursor: Option<String>,
}

/// The page around a message: for jump-to and permalinks.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AroundPage {
    /// Oldest first: up to `(limit - 1) - (limit - 1) / 2` older messages, the message asked
    /// for, then up to `(limit - 1) / 2` newer ones.
    pub messages: Vec<Message>,
    /// True when older messages may follow `olderCursor` (always true when `limit` left no
    /// room for older ones): read on with `order=desc&cursor=<olderCursor>`.
    pub has_older: bool,
    /// A newest-first cursor just past the oldest message covered.
    pub older_cursor: String,
    /// True when newer messages may follow `newerCursor` (always true when `limit` left no
    /// room for newer ones): read on with `order=asc&cursor=<newerCursor>`.
    pub has_newer: bool,
    /// An oldest-first cursor just past the newest message covered; it stays valid for
    /// messages sent later.
    pub newer_cursor: String,
}

/// What `readMessages` answers: a page, or with `around` the page around a message.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum MessagesRead {
    Page(MessagePage),
    Around(AroundPage),
}

/// Ids one batch read may name.
pub const MAX_BATCH: usize = 100;

/// Several messages by id in one call (reply previews).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetMessages {
    /// 1..=100 message ids; a repeated id is answered once.
    #[schema(min_items = 1, max_items = 100)]
    pub ids: Vec<String>,
}

impl GetMessages {
    /// The ids in the order asked, each once; none or more than [`MAX_BATCH`] is VALIDATION.
    pub fn unique_ids(&self) -> Result<Vec<&str>> {
        if !(1..=MAX_BATCH).contains(&self.ids.len()) {
            return Err(Error::validation(format!("ids must hold 1..={MAX_BATCH} message ids")));
        }
        let mut seen = HashSet::new();
        Ok(self
            .ids
            .iter()
            .map(String::as_str)
            .filter(|id| seen.insert(*id))
            .collect())
    }
}

/// The answer of a batch read: what a single get of each id would answer, in one call.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageBatch {
    /// The messages found, in the order their ids were asked (each once).
    pub messages: Vec<Message>,
    /// The ids a single get would answer 404 for (unknown, not an id, deleted), in the order
    /// asked, each once.
    pub missing: Vec<String>,
}

/// Query parameters of the pins read.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadPins {
    /// Pinned messages per page, 1..=100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// Cuts an around page to [`PAGE_BYTE_BUDGET`] (never below the target message), dropping
/// the farthest message of the longer side first, so the page stays centred on the target.
/// `older` is newest first and `newer` oldest first, so each side's farthest is its last.
/// Answers whether each side was cut.
pub fn keep_around_within_budget(older: &mut Vec<Message>, target: &Message, newer: &mut Vec<Message>) -> (bool, bool) {
    let size = |m: &Message| serde_json::to_vec(m).map(|v| v.len()).unwrap_or(0);
    let mut bytes: usize = size(target) + older.iter().map(size).sum::<usize>() + newer.iter().map(size).sum::<usize>();
    let (mut older_cut, mut newer_cut) = (false, false);
    while bytes > PAGE_BYTE_BUDGET && !(older.is_empty() && newer.is_empty()) {
        let dropped = if older.len() >= newer.len() {
            older_cut = true;
            older.pop()
        } else {
            newer_cut = true;
            newer.pop()
        };
        bytes -= dropped.as_ref().map(size).unwrap_or(0);
    }
    (older_cut, newer_cut)
}

/// Cuts `messages` to its longest prefix within [`PAGE_BYTE_BUDGET`] (never below one
/// message); true when something was cut.
pub fn keep_within_budget(messages: &mut Vec<Message>) -> bool {
    let mut bytes = 0;
    for (index, message) in messages.iter().enumerate() {
        bytes += serde_json::to_vec(message).map(|v| v.len()).unwrap_or(0);
        if bytes > PAGE_BYTE_BUDGET && index > 0 {
            messages.truncate(index);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: usize, bytes: usize) -> Message {
        crate::messages::sample(&format!("{id:019}"), &"x".repeat(bytes))
    }

    #[test]
    fn an_around_page_over_budget_drops_its_farthest_messages_and_keeps_the_target() {
        let big = PAGE_BYTE_BUDGET / 5;
        let target = message(0, big);
        let mut older: Vec<Message> = (1..=4).map(|n| message(n, big)).collect();
        let mut newer: Vec<Message> = (5..=6).map(|n| message(n, big)).collect();
        let (older_cut, newer_cut) = keep_around_within_budget(&mut older, &target, &mut newer);
        // Seven messages of a fifth of the budget each, plus their JSON: four fit. The longer
        // side loses its farthest first, and the older side when both are as long.
        assert_eq!((older_cut, newer_cut), (true, false));
        let kept: Vec<&str> = older.iter().chain(&newer).map(|m| m.id.as_str()).collect();
        assert_eq!(kept, [message(1, 0).id, message(5, 0).id, message(6, 0).id]);

        let huge = message(0, PAGE_BYTE_BUDGET * 2);
        let (mut older, mut newer) = (vec![message(1, 10)], vec![message(2, 10)]);
        assert_eq!(keep_around_within_budget(&mut older, &huge, &mut newer), (true, true));
        assert!(older.is_empty() && newer.is_empty(), "never below the target");

        let (mut older, mut newer) = (vec![message(1, 10)], vec![message(2, 10)]);
        assert_eq!(
            keep_around_within_budget(&mut older, &target, &mut newer),
            (false, false)
        );
        assert_eq!((older.len(), newer.len()), (1, 1));
    }
}
