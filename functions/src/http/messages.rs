//! Message functions: send, read a page (or the page around a message), get one or several,
//! the room's pins, and every operation on a message.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use tabletalk::ids::RoomId;
use tabletalk::keys::MessageKey;
use tabletalk::messages::Message;
use tabletalk::messages::changes::Edit;
use tabletalk::messages::feed::{MessageChangesRequest, MessageChangesResult};
use tabletalk::messages::forward::{Forward, ForwardOutcome};
use tabletalk::messages::polls::Vote;
use tabletalk::messages::reactions::ReactionCount;
use tabletalk::messages::read::{GetMessages, MessageBatch, MessagePage, MessagesRead, ReadMessages, ReadPins};
use tabletalk::messages::send::NewMessage;
use tabletalk::messages::threads::{FollowedThread, Following, ReadThread, ThreadPage};
use tabletalk::service::{changes::Editing, reactions::Reactions, read::Reading, send::Sending};
use utoipa::ToSchema;

use super::error::{self, ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams, QueryParams};

/// 201 with the stored message; 200 with the first stored message when the `clientId` was sent
/// before.
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages", tag = "messages", operation_id = "createMessage",
    params(("roomId" = String, Path)), request_body = NewMessage,
    responses((status = 201, body = Message), (status = 200, description = "a repeat of an earlier clientId", body = Message),
        (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewMessage>,
) -> ApiResult<(StatusCode, Json<Message>)> {
    let sent = sending.send_message(&who, &room, input).await?;
    let status = if sent.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(sent.message)))
}

/// A page (`MessagePage`), or with `around` the page around that message (`AroundPage`).
#[utoipa::path(get, path = "/api/rooms/{roomId}/messages", tag = "messages", operation_id = "readMessages",
    params(("roomId" = String, Path), ReadMessages),
    responses((status = 200, body = MessagesRead), (status = "4XX", body = ErrorBody)))]
pub async fn read(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    QueryParams(request): QueryParams<ReadMessages>,
) -> ApiResult<Json<MessagesRead>> {
    Ok(Json(match request.around {
        Some(_) => MessagesRead::Around(reading.read_around(&who, &room, request).await?),
        None => MessagesRead::Page(reading.read_messages(&who, &room, request).await?),
    }))
}

/// Several messages by id (reply previews): each answered as `getMessage` would, found or
/// listed in `missing`.
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages/batch", tag = "messages", operation_id = "batchGetMessages",
    params(("roomId" = String, Path)), request_body = GetMessages,
    responses((status = 200, body = MessageBatch), (status = "4XX", body = ErrorBody)))]
pub async fn batch(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(request): JsonBody<GetMessages>,
) -> ApiResult<Json<MessageBatch>> {
    Ok(Json(reading.get_messages(&who, &room, request).await?))
}

/// The room's pinned messages, newest message first, a page at a time.
#[utoipa::path(get, path = "/api/rooms/{roomId}/pins", tag = "messages", operation_id = "listPins",
    params(("roomId" = String, Path), ReadPins),
    responses((status = 200, body = MessagePage), (status = "4XX", body = ErrorBody)))]
pub async fn pins(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    QueryParams(request): QueryParams<ReadPins>,
) -> ApiResult<Json<MessagePage>> {
    Ok(Json(reading.read_pins(&who, &room, request).await?))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}/messages/{messageId}", tag = "messages", operation_id = "getMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn get(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<Json<Message>> {
    Ok(Json(reading.get_message(&who, &room, &id).await?))
}

#[utoipa::path(patch, path = "/api/rooms/{roomId}/messages/{messageId}", tag = "messages", operation_id = "editMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)), request_body = Edit,
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn edit(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    JsonBody(edit): JsonBody<Edit>,
) -> ApiResult<Json<Message>> {
    Ok(Json(editing.edit_message(&who, &room, &id, edit).await?))
}

/// Leaves a tombstone: the message is gone from every read and operation.
#[utoipa::path(delete, path = "/api/rooms/{roomId}/messages/{messageId}", tag = "messages", operation_id = "deleteMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<StatusCode> {
    editing.delete_message(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/rooms/{roomId}/messages/{messageId}/pin", tag = "messages", operation_id = "pinMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn pin(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<Json<Message>> {
    Ok(Json(editing.pin_message(&who, &room, &id).await?))
}

#[utoipa::path(delete, path = "/api/rooms/{roomId}/messages/{messageId}/pin", tag = "messages", operation_id = "unpinMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn unpin(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<Json<Message>> {
    Ok(Json(editing.unpin_message(&who, &room, &id).await?))
}

#[utoipa::path(put, path = "/api/rooms/{roomId}/messages/{messageId}/vote", tag = "messages", operation_id = "votePoll",
    params(("roomId" = String, Path), ("messageId" = String, Path)), request_body = Vote,
    responses((status = 200, body = Message), (status = "4XX", body = ErrorBody)))]
pub async fn vote(
    State(reactions): State<Arc<Reactions>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    JsonBody(vote): JsonBody<Vote>,
) -> ApiResult<Json<Message>> {
    Ok(Json(reactions.vote(&who, &room, &id, vote).await?))
}

#[utoipa::path(put, path = "/api/rooms/{roomId}/messages/{messageId}/reactions/{emoji}", tag = "messages",
    operation_id = "addReaction",
    params(("roomId" = String, Path), ("messageId" = String, Path), ("emoji" = inline(tabletalk::messages::reactions::ReactionEmoji), Path)),
    responses((status = 200, body = [ReactionCount]), (status = "4XX", body = ErrorBody)))]
pub async fn react(
    State(reactions): State<Arc<Reactions>>,
    Caller(who): Caller,
    PathParams((room, id, emoji)): PathParams<(RoomId, MessageKey, String)>,
) -> ApiResult<Json<Vec<ReactionCount>>> {
    Ok(Json(reactions.react(&who, &room, &id, &emoji).await?))
}

#[utoipa::path(delete, path = "/api/rooms/{roomId}/messages/{messageId}/reactions/{emoji}", tag = "messages",
    operation_id = "removeReaction",
    params(("roomId" = String, Path), ("messageId" = String, Path), ("emoji" = inline(tabletalk::messages::reactions::ReactionEmoji), Path)),
    responses((status = 200, body = [ReactionCount]), (status = "4XX", body = ErrorBody)))]
pub async fn unreact(
    State(reactions): State<Arc<Reactions>>,
    Caller(who): Caller,
    PathParams((room, id, emoji)): PathParams<(RoomId, MessageKey, String)>,
) -> ApiResult<Json<Vec<ReactionCount>>> {
    Ok(Json(reactions.unreact(&who, &room, &id, &emoji).await?))
}

/// How the forward into one room went, as the API answers it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ForwardOutcome)]
pub struct ForwardResult {
    pub room_id: String,
    /// 201 when the copy was stored; otherwise the status a send into that room answered.
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl From<ForwardOutcome> for ForwardResult {
    fn from(outcome: ForwardOutcome) -> ForwardResult {
        let (status, message, error) = match outcome.copy {
            Ok(message) => (201, Some(message), None),
            Err(e) => (error::status(&e).as_u16(), None, Some(error::body(&e))),
        };
        ForwardResult {
            room_id: outcome.room_id,
            status,
            message,
            error,
        }
    }
}

/// One outcome per room, in request order: each room succeeds or fails on its own.
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages/{messageId}/forward", tag = "messages",
    operation_id = "forwardMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)), request_body = Forward,
    responses((status = 200, body = [ForwardResult]), (status = "4XX", body = ErrorBody)))]
pub async fn forward(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    JsonBody(forward): JsonBody<Forward>,
) -> ApiResult<Json<Vec<ForwardResult>>> {
    let outcomes = editing.forward_message(&who, &room, &id, forward).await?;
    Ok(Json(outcomes.into_iter().map(ForwardResult::from).collect()))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}/messages/{messageId}/thread", tag = "messages",
    operation_id = "readThread",
    params(("roomId" = String, Path), ("messageId" = String, Path), ReadThread),
    responses((status = 200, body = ThreadPage), (status = "4XX", body = ErrorBody)))]
pub async fn thread(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    QueryParams(request): QueryParams<ReadThread>,
) -> ApiResult<Json<ThreadPage>> {
    Ok(Json(reading.read_thread(&who, &room, &id, request).await?))
}

/// The change feed (docs/CATCHUP.md): what changed in these conversations since the stored cursors.
#[utoipa::path(post, path = "/api/messageChanges", tag = "messages", operation_id = "messageChanges",
    request_body = MessageChangesRequest,
    responses((status = 200, body = MessageChangesResult), (status = "4XX", body = ErrorBody)))]
pub async fn changes(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    JsonBody(request): JsonBody<MessageChangesRequest>,
) -> ApiResult<Json<MessageChangesResult>> {
    Ok(Json(reading.message_changes(&who, request.input).await?))
}

/// Follows the thread of a message (a reply's: its root's): its replies push the caller,
/// subject to their notification level and mute. Repliers follow automatically.
#[utoipa::path(put, path = "/api/rooms/{roomId}/messages/{messageId}/follow", tag = "messages",
    operation_id = "followThread",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Following), (status = "4XX", body = ErrorBody)))]
pub async fn follow(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<Json<Following>> {
    Ok(Json(reading.follow_thread(&who, &room, &id).await?))
}

/// Stops following the thread of a message; not following it is no error.
#[utoipa::path(delete, path = "/api/rooms/{roomId}/messages/{messageId}/follow", tag = "messages",
    operation_id = "unfollowThread",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 200, body = Following), (status = "4XX", body = ErrorBody)))]
pub async fn unfollow(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<Json<Following>> {
    Ok(Json(reading.unfollow_thread(&who, &room, &id).await?))
}

/// Marks a followed thread read up to now (409 when the caller does not follow it).
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages/{messageId}/thread/read", tag = "messages",
    operation_id = "markThreadRead",
    params(("roomId" = String, Path), ("messageId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn thread_read(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
) -> ApiResult<StatusCode> {
    reading.mark_thread_read(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The threads the caller follows, the most recent reply first, each with its unread replies.
#[utoipa::path(get, path = "/api/threads", tag = "messages", operation_id = "listMyThreads",
    responses((status = 200, body = [FollowedThread]), (status = "4XX", body = ErrorBody)))]
pub async fn my_threads(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
) -> ApiResult<Json<Vec<FollowedThread>>> {
    Ok(Json(reading.my_threads(&who).await?))
}
