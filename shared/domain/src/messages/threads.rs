//! A thread read's query and its answer. Reading a thread is `crate::service::threads`.

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
