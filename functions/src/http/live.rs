//! Live functions: `negotiate`, the Web PubSub client URL for the caller's rooms.

use axum::Json;
use axum::extract::State;
use tabletalk::live::Negotiated;

use super::AppState;
use super::error::{ApiResult, ErrorBody};
use super::extract::Caller;

/// 503 when no Web PubSub is configured (the local live server is still to come).
#[utoipa::path(post, path = "/api/negotiate", tag = "live", operation_id = "negotiate",
    responses((status = 200, body = Negotiated), (status = "4XX", body = ErrorBody)))]
pub async fn negotiate(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Negotiated>> {
    Ok(Json(state.chat.negotiate(&who).await?))
}
