//! A forward's input and its per-room outcome. Forwarding is `crate::service::forward`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Message;

/// Rooms one forward may reach.
pub const MAX_FORWARD_ROOMS: usize = 10;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Forward {
    /// 1..=10 distinct room ids.
    #[schema(min_items = 1, max_items = 10)]
    pub room_ids: Vec<String>,
}

/// How the forward into one room went: the stored copy, or why that room refused it.
#[derive(Debug, Clone)]
pub struct ForwardOutcome {
    pub room_id: String,
    pub copy: Result<Message, crate::error::Error>,
}
