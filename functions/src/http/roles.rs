//! Role functions: list, create, change, delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::roles::{NewRole, Role, RoleChange};
use tabletalk::service::access::RoomAccess;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

#[utoipa::path(get, path = "/api/rooms/{roomId}/roles", tag = "roles", operation_id = "listRoles",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [Role]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(access): State<Arc<RoomAccess>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<Role>>> {
    Ok(Json(access.list_roles(&who, &room).await?))
}

/// Needs ManageRoles; the position must be below the caller's rank.
#[utoipa::path(post, path = "/api/rooms/{roomId}/roles", tag = "roles", operation_id = "createRole",
    params(("roomId" = String, Path)), request_body = NewRole,
    responses((status = 201, body = Role), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(access): State<Arc<RoomAccess>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewRole>,
) -> ApiResult<(StatusCode, Json<Role>)> {
    let role = access.create_role(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(role)))
}

#[utoipa::path(patch, path = "/api/rooms/{roomId}/roles/{roleId}", tag = "roles", operation_id = "updateRole",
    params(("roomId" = String, Path), ("roleId" = String, Path)), request_body = RoleChange,
    responses((status = 200, body = Role), (status = "4XX", body = ErrorBody)))]
pub async fn update(
    State(access): State<Arc<RoomAccess>>,
    Caller(who): Caller,
    PathParams((room, role)): PathParams<(RoomId, String)>,
    JsonBody(change): JsonBody<RoleChange>,
) -> ApiResult<Json<Role>> {
    Ok(Json(access.update_role(&who, &room, &role, change).await?))
}

#[utoipa::path(delete, path = "/api/rooms/{roomId}/roles/{roleId}", tag = "roles", operation_id = "deleteRole",
    params(("roomId" = String, Path), ("roleId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(access): State<Arc<RoomAccess>>,
    Caller(who): Caller,
    PathParams((room, role)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    access.delete_role(&who, &room, &role).await?;
    Ok(StatusCode::NO_CONTENT)
}
