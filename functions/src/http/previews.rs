//! Link preview functions: the author removes their message's preview. Previews themselves
//! are made by the server (`tabletalk::service::previews`) and read with the message.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::keys::MessageKey;
use tabletalk::service::previews::Previewer;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, PathParams};

/// 204: the message shows no preview, and none will be attached to it (also when none was yet).
#[utoipa::path(delete, path = "/api/rooms/{roomId}/messages/{messageId}/preview", tag = "messages",
    operation_id = "removeLinkPreview",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 204, description = "the preview is removed"),
        (status = 403, description = "not the message's author", body = ErrorBody),
        (status = 404, description = "no such room or message, or not a member", body = ErrorBody),
        (status = "4XX", body = ErrorBody)))]
pub async fn remove(
    State(previewer): State<Arc<Previewer>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<StatusCode> {
    previewer.remove_preview(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
