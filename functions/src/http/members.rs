//! Member functions: list, the caller's own settings and read position, and moderation
//! (kick, timeout, ban, unban, roles).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::{RoomId, UserId};
use tabletalk::members::{
    Ban, MarkRead, MarkedAllRead, Member, MemberRoles, MemberSummary, MembershipChange, Receipt, SetTrustLevel, Timeout,
};
use tabletalk::moderation::{BanEntry, Kick};
use tabletalk::service::{members::Members, moderation::Moderation};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, OptionalJsonBody, PathParams};

#[utoipa::path(get, path = "/api/rooms/{roomId}/members", tag = "members", operation_id = "listMembers",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [MemberSummary]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(members): State<Arc<Members>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<MemberSummary>>> {
    Ok(Json(members.list_members(&who, &room).await?))
}

#[utoipa::path(patch, path = "/api/rooms/{roomId}/members/me", tag = "members", operation_id = "updateMembership",
    params(("roomId" = String, Path)), request_body = MembershipChange,
    responses((status = 200, body = Member), (status = "4XX", body = ErrorBody)))]
pub async fn update_mine(
    State(members): State<Arc<Members>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(change): JsonBody<MembershipChange>,
) -> ApiResult<Json<Member>> {
    Ok(Json(members.update_membership(&who, &room, change).await?))
}

#[utoipa::path(post, path = "/api/rooms/{roomId}/read", tag = "members", operation_id = "markRead",
    params(("roomId" = String, Path)), request_body = MarkRead,
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn mark_read(
    State(members): State<Arc<Members>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<MarkRead>,
) -> ApiResult<StatusCode> {
    members.mark_read(&who, &room, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Marks every room of the caller read up to now (one write per room); answers how many.
#[utoipa::path(post, path = "/api/rooms/read", tag = "members", operation_id = "markAllRead",
    responses((status = 200, body = MarkedAllRead), (status = "4XX", body = ErrorBody)))]
pub async fn mark_all_read(State(members): State<Arc<Members>>, Caller(who): Caller) -> ApiResult<Json<MarkedAllRead>> {
    let rooms = members.mark_all_read(&who).await?;
    Ok(Json(MarkedAllRead { rooms }))
}

/// Every member's read position, for seen-ticks: a message is read by a member when its id
/// sorts at or after their `upTo` (ids sort newest first).
#[utoipa::path(get, path = "/api/rooms/{roomId}/receipts", tag = "members", operation_id = "listReceipts",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [Receipt]), (status = "4XX", body = ErrorBody)))]
pub async fn receipts(
    State(members): State<Arc<Members>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<Receipt>>> {
    Ok(Json(members.receipts(&who, &room).await?))
}

/// Needs ManageMembers and a higher rank than the member. The body is optional (no body is a
/// kick without a reason).
#[utoipa::path(post, path = "/api/rooms/{roomId}/members/{userId}/kick", tag = "members", operation_id = "kickMember",
    params(("roomId" = String, Path), ("userId" = String, Path)),
    request_body(content = Kick, description = "Optional: the reason for the moderation log."),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn kick(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
    OptionalJsonBody(input): OptionalJsonBody<Kick>,
) -> ApiResult<StatusCode> {
    moderation.kick(&who, &room, &user, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The bans in force, with who made each, why and until when. Needs ManageMembers.
#[utoipa::path(get, path = "/api/rooms/{roomId}/bans", tag = "members", operation_id = "listBans",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [BanEntry]), (status = "4XX", body = ErrorBody)))]
pub async fn bans(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<BanEntry>>> {
    Ok(Json(moderation.list_bans(&who, &room).await?))
}

/// Needs ManageMembers and a higher rank than the member.
#[utoipa::path(post, path = "/api/rooms/{roomId}/members/{userId}/timeout", tag = "members", operation_id = "timeoutMember",
    params(("roomId" = String, Path), ("userId" = String, Path)), request_body = Timeout,
    responses((status = 200, body = MemberSummary), (status = "4XX", body = ErrorBody)))]
pub async fn timeout(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
    JsonBody(input): JsonBody<Timeout>,
) -> ApiResult<Json<MemberSummary>> {
    Ok(Json(moderation.timeout(&who, &room, &user, input).await?))
}

/// Sets the member's trust level, which then holds instead of the one they earned, or (null)
/// clears it. Needs ManageMembers and a higher rank than the member. The answer shows the
/// level set; the member list shows every member's level in force.
#[utoipa::path(put, path = "/api/rooms/{roomId}/members/{userId}/trust-level", tag = "members", operation_id = "setMemberTrustLevel",
    params(("roomId" = String, Path), ("userId" = String, Path)), request_body = SetTrustLevel,
    responses((status = 200, body = MemberSummary), (status = "4XX", body = ErrorBody)))]
pub async fn set_trust_level(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
    JsonBody(input): JsonBody<SetTrustLevel>,
) -> ApiResult<Json<MemberSummary>> {
    Ok(Json(moderation.set_trust_level(&who, &room, &user, input).await?))
}

/// Needs ManageMembers and a higher rank than the member (if they are one).
#[utoipa::path(post, path = "/api/rooms/{roomId}/members/{userId}/ban", tag = "members", operation_id = "banMember",
    params(("roomId" = String, Path), ("userId" = String, Path)), request_body = Ban,
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn ban(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
    JsonBody(input): JsonBody<Ban>,
) -> ApiResult<StatusCode> {
    moderation.ban(&who, &room, &user, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(delete, path = "/api/rooms/{roomId}/bans/{userId}", tag = "members", operation_id = "unbanMember",
    params(("roomId" = String, Path), ("userId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn unban(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
) -> ApiResult<StatusCode> {
    moderation.unban(&who, &room, &user).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Needs ManageRoles; every role added or removed must rank below the caller.
#[utoipa::path(put, path = "/api/rooms/{roomId}/members/{userId}/roles", tag = "members", operation_id = "setMemberRoles",
    params(("roomId" = String, Path), ("userId" = String, Path)), request_body = MemberRoles,
    responses((status = 200, body = MemberSummary), (status = "4XX", body = ErrorBody)))]
pub async fn set_roles(
    State(moderation): State<Arc<Moderation>>,
    Caller(who): Caller,
    PathParams((room, user)): PathParams<(RoomId, UserId)>,
    JsonBody(input): JsonBody<MemberRoles>,
) -> ApiResult<Json<MemberSummary>> {
    Ok(Json(moderation.set_member_roles(&who, &room, &user, input).await?))
}
