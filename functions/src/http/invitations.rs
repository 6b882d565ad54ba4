//! Invitation functions: a room's invitations (create, list, revoke), the caller's own
//! (list, accept, decline), and joining through a shared code.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::rooms::Room;
use tabletalk::rooms::invitations::{Invitation, NewInvitation, PendingInvitation, Redeem};
use tabletalk::service::rooms::Rooms;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// Needs CreateInvites (every member of a new room has it). `{userId}` invites one user, who
/// then sees it in `GET /api/invites`; otherwise the answer carries a `code` to share, shown
/// only here. Not in a direct conversation (403).
#[utoipa::path(post, path = "/api/rooms/{roomId}/invites", tag = "invitations", operation_id = "createInvitation",
    params(("roomId" = String, Path)), request_body = NewInvitation,
    responses((status = 201, body = Invitation), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewInvitation>,
) -> ApiResult<(StatusCode, Json<Invitation>)> {
    let invitation = rooms.create_invitation(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(invitation)))
}

/// Every invitation of the room with ManageMembers, else the caller's own; open or closed.
#[utoipa::path(get, path = "/api/rooms/{roomId}/invites", tag = "invitations", operation_id = "listInvitations",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [Invitation]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<Invitation>>> {
    Ok(Json(rooms.list_invitations(&who, &room).await?))
}

/// Its maker, or ManageMembers. A revoked code answers as a missing one.
#[utoipa::path(delete, path = "/api/rooms/{roomId}/invites/{inviteId}", tag = "invitations", operation_id = "revokeInvitation",
    params(("roomId" = String, Path), ("inviteId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn revoke(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    rooms.revoke_invitation(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's invitations waiting for an answer.
#[utoipa::path(get, path = "/api/invites", tag = "invitations", operation_id = "listMyInvitations",
    responses((status = 200, body = [PendingInvitation]), (status = "4XX", body = ErrorBody)))]
pub async fn mine(State(rooms): State<Arc<Rooms>>, Caller(who): Caller) -> ApiResult<Json<Vec<PendingInvitation>>> {
    Ok(Json(rooms.my_invitations(&who).await?))
}

/// Joins the room of the caller's invitation (a ban still refuses).
#[utoipa::path(post, path = "/api/invites/{roomId}/accept", tag = "invitations", operation_id = "acceptInvitation",
    params(("roomId" = String, Path)),
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn accept(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.accept_invitation(&who, &room).await?))
}

#[utoipa::path(post, path = "/api/invites/{roomId}/decline", tag = "invitations", operation_id = "declineInvitation",
    params(("roomId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn decline(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<StatusCode> {
    rooms.decline_invitation(&who, &room).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Joins through a shared code. An expired, used-up or revoked code answers 404, as a
/// missing one does.
#[utoipa::path(post, path = "/api/invites/redeem", tag = "invitations", operation_id = "redeemInvitation",
    request_body = Redeem,
    responses((status = 200, body = Room), (status = "4XX", body = ErrorBody)))]
pub async fn redeem(
    State(rooms): State<Arc<Rooms>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<Redeem>,
) -> ApiResult<Json<Room>> {
    Ok(Json(rooms.redeem(&who, input).await?))
}
