//! A forward's input and its per-room outcome. Forwarding is `crate::service::forward`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Message;
use crate::error::ErrorBody;

/// Rooms one forward may reach.
pub const MAX_FORWARD_ROOMS: usize = 10;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Forward {
    /// 1..=10 distinct room ids.
    #[schema(min_items = 1, max_items = 10)]
    pub room_ids: Vec<String>,
}

/// How the forward into one room went.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardOutcome {
    pub room_id: String,
    /// 201 when the copy was stored; otherwise the status a send into that room answered.
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}
