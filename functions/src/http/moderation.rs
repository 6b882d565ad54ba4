//! Moderation functions: the moderation log, and reports (file one, read the queue, resolve a
//! group).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::keys::MessageKey;
use tabletalk::moderation::{ModerationLogPage, ReadModerationLog};
use tabletalk::reports::{NewReport, Report, ReportQueue, ResolveReports};
use tabletalk::service::{changes::Editing, read::Reading};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams, QueryParams};

/// Newest first. Needs ManageMembers, ManageMessages, ManageRoles or ManageRoom. A bad
/// `limit` or `cursor` is 400.
#[utoipa::path(get, path = "/api/rooms/{roomId}/moderation-log", tag = "moderation", operation_id = "readModerationLog",
    params(("roomId" = String, Path), ReadModerationLog),
    responses((status = 200, body = ModerationLogPage), (status = "4XX", body = ErrorBody)))]
pub async fn log(
    State(reading): State<Arc<Reading>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    QueryParams(request): QueryParams<ReadModerationLog>,
) -> ApiResult<Json<ModerationLogPage>> {
    Ok(Json(reading.moderation_log(&who, &room, request).await?))
}

/// 201 with the report; 200 with the member's earlier report of the message when they
/// reported it before (a repeat changes nothing). A server's line cannot be reported (400).
#[utoipa::path(post, path = "/api/rooms/{roomId}/messages/{messageId}/report", tag = "moderation", operation_id = "reportMessage",
    params(("roomId" = String, Path), ("messageId" = String, Path)), request_body = NewReport,
    responses((status = 201, body = Report), (status = 200, description = "reported before", body = Report),
        (status = "4XX", body = ErrorBody)))]
pub async fn report(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    JsonBody(input): JsonBody<NewReport>,
) -> ApiResult<(StatusCode, Json<Report>)> {
    let filed = editing.report_message(&who, &room, &id, input).await?;
    let status = if filed.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(filed.report)))
}

/// The open reports grouped by message, most reported first. Needs ManageMessages.
#[utoipa::path(get, path = "/api/rooms/{roomId}/reports", tag = "moderation", operation_id = "listReports",
    params(("roomId" = String, Path)),
    responses((status = 200, body = ReportQueue), (status = "4XX", body = ErrorBody)))]
pub async fn queue(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<ReportQueue>> {
    Ok(Json(editing.report_queue(&who, &room).await?))
}

/// Closes a message's open reports: `dismiss` keeps the message, `delete` deletes it (a
/// moderated tombstone). Needs ManageMessages; a message without open reports is 404.
#[utoipa::path(post, path = "/api/rooms/{roomId}/reports/{messageId}/resolve", tag = "moderation", operation_id = "resolveReports",
    params(("roomId" = String, Path), ("messageId" = String, Path)), request_body = ResolveReports,
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn resolve(
    State(editing): State<Arc<Editing>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, MessageKey)>,
    JsonBody(input): JsonBody<ResolveReports>,
) -> ApiResult<StatusCode> {
    editing.resolve_reports(&who, &room, &id, input).await?;
    Ok(StatusCode::NO_CONTENT)
}
