//! Room functions: create, list mine, the directory, get, join, leave, change, hand over,
//! delete, and opening a direct conversation.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::rooms::directory::{DirectoryPage, DirectoryQuery};
use tabletalk::rooms::{NewDirect, NewRoom, OwnershipTransfer, Room, RoomChange, RoomEntry};
use tabletalk::service::{rooms::Rooms, subscriptions::Accounts};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams, QueryParams};

#[utoipa::path(post, path = "/api/rooms", tag = "rooms", operation_id = "createRoom",
    request_body = NewRoom,
    responses((status = 201, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<NewRoom>,
) -> ApiResult<(StatusCode, Json<Room>)> {
    Ok((StatusCode::CREATED, Json(rooms.create_room(&who, input).await?)))
}

#[utoipa::path(get, path = "/api/rooms", tag = "rooms", operation_id = "listRooms",
    responses((status = 200, body = [RoomEntry]), (status = "4XX", body = ErrorBody)))]
pub async fn list(State(rooms): State<Arc<Rooms>>, Caller(who): Caller) -> ApiResult<Json<Vec<RoomEntry>>> {
    Ok(Json(rooms.my_rooms(&who).await?))
}

/// Public rooms, in name order, whose names have words beginning with each word of `q`.
#[utoipa::path(get, path = "/api/rooms/directory", tag = "rooms", operation_id = "roomDirectory",
    params(DirectoryQuery),
    responses((status = 200, body = DirectoryPage), (status = "4XX", body = ErrorBody)))]
pub async fn directory(
    State(accounts): State<Arc<Accounts>>,
    Caller(_who): Caller,
    QueryParams(query): QueryParams<DirectoryQuery>,
) -> ApiResult<Json<DirectoryPage>> {
    Ok(Json(accounts.directory(query).await?))
}

/// Opens the caller's direct conversation with `userId`, or returns it: the same room from
/// either side.
#[utoipa::path(post, path = "/api/dms", tag = "rooms", operation_id = "openDirect",
    request_body = NewDirect,
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn open_direct(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<NewDirect>,
) -> ApiResult<Json<Room>> {
    Ok(Json(accounts.open_direct(&who, input).await?))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}", tag = "rooms", operation_id = "getRoom",
    params(("roomId" = String, Path)),
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn get(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.get_room(&who, &room).await?))
}

/// A public room only: a private one answers 404 (join it through an invitation).
#[utoipa::path(post, path = "/api/rooms/{roomId}/join", tag = "rooms", operation_id = "joinRoom",
    params(("roomId" = String, Path)),
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn join(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.join_room(&who, &room).await?))
}

/// Only the owner; the new owner must be a member. The caller becomes an ordinary member, who
/// may then leave.
#[utoipa::path(put, path = "/api/rooms/{roomId}/owner", tag = "rooms", operation_id = "transferOwnership",
    params(("roomId" = String, Path)), request_body = OwnershipTransfer,
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn transfer(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<OwnershipTransfer>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.transfer_ownership(&who, &room, input).await?))
}

#[utoipa::path(post, path = "/api/rooms/{roomId}/leave", tag = "rooms", operation_id = "leaveRoom",
    params(("roomId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn leave(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<StatusCode> {
    rooms.leave_room(&who, &room).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Needs ManageRoom (ManageRoles for `everyonePermissions`). A rename writes an `EditRoom` line.
#[utoipa::path(patch, path = "/api/rooms/{roomId}", tag = "rooms", operation_id = "updateRoom",
    params(("roomId" = String, Path)), request_body = RoomChange,
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn update(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(change): JsonBody<RoomChange>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.update_room(&who, &room, change).await?))
}

/// Owner only. Removes every row of the room in every table.
#[utoipa::path(delete, path = "/api/rooms/{roomId}", tag = "rooms", operation_id = "deleteRoom",
    params(("roomId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<StatusCode> {
    rooms.delete_room(&who, &room).await?;
    Ok(StatusCode::NO_CONTENT)
}
