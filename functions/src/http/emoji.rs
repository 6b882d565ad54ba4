//! Emoji: suggestions for the composer's `:`, and a room's own emoji.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::emoji::{CustomEmoji, EmojiQuery, EmojiSuggestion, NewCustomEmoji, suggestions};
use tabletalk::ids::RoomId;
use tabletalk::service::room_emoji::RoomEmoji;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams, QueryParams};

/// The standard emoji whose shortcodes begin with `q` (GitHub's set, as `:shortcode:` renders
/// in Markdown), shortest shortcode first.
#[utoipa::path(get, path = "/api/emoji", tag = "messages", operation_id = "suggestEmoji",
    params(EmojiQuery),
    responses((status = 200, body = [EmojiSuggestion]), (status = "4XX", body = ErrorBody)))]
pub async fn suggest(
    Caller(_): Caller,
    QueryParams(query): QueryParams<EmojiQuery>,
) -> ApiResult<Json<Vec<EmojiSuggestion>>> {
    Ok(Json(suggestions(&query)?))
}

/// Makes `:name:` an emoji of the room's own (ManageRoom), its image an upload of the caller's
/// in the room (`createUpload`; PNG, JPEG, GIF or WebP, at most 256 KiB) not yet sent: in the
/// room's Markdown, `:name:` then marks it for clients to show the image.
#[utoipa::path(post, path = "/api/rooms/{roomId}/emoji", tag = "messages", operation_id = "createRoomEmoji",
    params(("roomId" = String, Path)), request_body = NewCustomEmoji,
    responses((status = 201, body = CustomEmoji), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(emoji): State<Arc<RoomEmoji>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewCustomEmoji>,
) -> ApiResult<(StatusCode, Json<CustomEmoji>)> {
    Ok((StatusCode::CREATED, Json(emoji.create(&who, &room, input).await?)))
}

/// The room's own emoji, by name (any member); each image is at its `url`, as an attachment.
#[utoipa::path(get, path = "/api/rooms/{roomId}/emoji", tag = "messages", operation_id = "listRoomEmoji",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [CustomEmoji]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(emoji): State<Arc<RoomEmoji>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<CustomEmoji>>> {
    Ok(Json(emoji.list(&who, &room).await?))
}

/// Deletes one of the room's own emoji and its image (ManageRoom); messages that used it keep
/// showing its name.
#[utoipa::path(delete, path = "/api/rooms/{roomId}/emoji/{name}", tag = "messages", operation_id = "deleteRoomEmoji",
    params(("roomId" = String, Path), ("name" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(emoji): State<Arc<RoomEmoji>>,
    Caller(who): Caller,
    PathParams((room, name)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    emoji.delete(&who, &room, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
