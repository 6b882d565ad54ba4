//! Live functions: `negotiate`, the Web PubSub client URL; which room a connection shows
//! (`viewRoom`); and typing.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use tabletalk::ids::RoomId;
use tabletalk::service::live::Negotiated;
use tabletalk::service::live::Signals;
use tabletalk::signals::ViewRoom;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// The Azure Web PubSub URL when one is configured, else one on the self-hosted server's own
/// hub (as the caller reached the server: its `Host`, and `wss` behind a TLS proxy that says
/// `X-Forwarded-Proto: https`); 503 in a Functions app without Web PubSub.
#[utoipa::path(post, path = "/api/negotiate", tag = "live", operation_id = "negotiate",
    responses((status = 200, body = Negotiated), (status = "4XX", body = ErrorBody)))]
pub async fn negotiate(
    State(signals): State<Arc<Signals>>,
    Caller(who): Caller,
    headers: HeaderMap,
) -> ApiResult<Json<Negotiated>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let scheme = match header("x-forwarded-proto") {
        Some("https") => "https",
        _ => "http",
    };
    let host = header("host").unwrap_or("localhost");
    let endpoint = format!("{scheme}://{host}");
    Ok(Json(signals.negotiate(&who, &endpoint).await?))
}

/// Members only; at most one signal per user and room every 3 seconds (more are dropped).
#[utoipa::path(post, path = "/api/rooms/{roomId}/typing", tag = "live", operation_id = "typing",
    params(("roomId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn typing(
    State(signals): State<Arc<Signals>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<StatusCode> {
    signals.typing(&who, &room).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Makes the caller's live connection (`connectionId` from its `connected` message) show one
/// room: the server puts it in that room's group, where the room's full messages and signals
/// go, and takes it out of the group of the room it showed before; a `roomId` of null shows
/// none. Every room not shown sends a short `room.activity` notice with the unread and
/// mention counts instead. 404 for a room the caller is not in and for a connection that is
/// not open or not the caller's; on Azure, 409 before the connection's `connected` event has
/// reached the server (try again shortly); 422 for a malformed `connectionId`; 503 where there
/// is no live delivery.
#[utoipa::path(put, path = "/api/live/view", tag = "live", operation_id = "viewRoom",
    request_body = ViewRoom,
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn view_room(
    State(signals): State<Arc<Signals>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<ViewRoom>,
) -> ApiResult<StatusCode> {
    signals.view_room(&who, input).await?;
    Ok(StatusCode::NO_CONTENT)
}
