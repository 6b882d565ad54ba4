//! A page read's query and its answer, with the page limits. Reading is
//! `crate::service::read`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Message;
use super::cursor::Order;

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
