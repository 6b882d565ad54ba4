//! Live functions: `negotiate`, the Web PubSub client URL for the caller's rooms, and typing.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::live::Negotiated;

use super::AppState;
use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, PathParams};

/// 503 when no Web PubSub is configured (the local live server is still to come).
#[utoipa::path(post, path = "/api/negotiate", tag = "live", operation_id = "negotiate",
    responses((status = 200, body = Negotiated), (status = "4XX", body = ErrorBody)))]
pub async fn negotiate(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Negotiated>> {
    Ok(Json(state.chat.negotiate(&who).await?))
}

/// Members only; at most one signal per user and room every 3 seconds (more are dropped).
#[utoipa::path(post, path = "/api/rooms/{roomId}/typing", tag = "live", operation_id = "typing",
    params(("roomId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn typing(
    State(state): State<AppState>,
    Caller(who): Caller,
    PathParams(room): PathParams<String>,
) -> ApiResult<StatusCode> {
    state.chat.typing(&who, &RoomId::parse(&room)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
