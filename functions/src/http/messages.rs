//! Message functions: send, read a page, get one.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::messages::Message;
use tabletalk::messages::read::{MessagePage, ReadMessages};
use tabletalk::messages::send::NewMessage;

use super::AppState;
use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, QueryParams};

/// 201 with the stored message; 200 with the first stored message when the `clientId` was sent
/// before.
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages", tag = "messages", operation_id = "createMessage",
    params(("roomId" = String, Path)), request_body = NewMessage,
    responses((status = 201, body = Message), (status = 200, description = "a repeat of an earlier clientId", body = Message),
        (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(room): Path<String>,
    JsonBody(input): JsonBody<NewMessage>,
) -> ApiResult<(StatusCode, Json<Message>)> {
    let sent = state.chat.send_message(&who, &RoomId::parse(&room)?, input).await?;
    let status = if sent.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(sent.message)))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}/messages", tag = "messages", operation_id = "readMessages",
    params(("roomId" = String, Path), ReadMessages),
    responses((status = 200, body = MessagePage), (status = "4XX", body = ErrorBody)))]
pub async fn read(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(room): Path<String>,
    QueryParams(request): QueryParams<ReadMessages>,
) -> ApiResult<Json<MessagePage>> {
    Ok(Json(
        state.chat.read_messages(&who, &RoomId::parse(&room)?, request).await?,
    ))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}/messages/{messageId}", tag = "messages", operation_id = "getMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((room, id)): Path<(String, String)>,
) -> ApiResult<Json<Message>> {
    Ok(Json(state.chat.get_message(&who, &RoomId::parse(&room)?, &id).await?))
}
