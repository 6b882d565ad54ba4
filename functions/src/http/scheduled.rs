//! Scheduled message functions: schedule, list, edit and cancel the caller's own. Sending them
//! when due is a timer's work (`triggers::send_scheduled`, the self-hosted housekeeping loop).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::scheduled::{NewScheduled, Scheduled, ScheduledEdit};
use tabletalk::service::scheduled::Scheduler;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// 201 with the item, `status: scheduled`. At its `sendAt` it is sent as if the caller sent it
/// then; the item's `status` then says `sent` (with `messageId`) or `refused` (with `refusal`).
#[utoipa::path(post, path = "/api/rooms/{roomId}/scheduled", tag = "scheduled", operation_id = "scheduleMessage",
    params(("roomId" = String, Path)), request_body = NewScheduled,
    responses((status = 201, body = Scheduled), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(scheduler): State<Arc<Scheduler>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewScheduled>,
) -> ApiResult<(StatusCode, Json<Scheduled>)> {
    let item = scheduler.schedule_message(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(item)))
}

/// The caller's own, whatever became of them.
#[utoipa::path(get, path = "/api/rooms/{roomId}/scheduled", tag = "scheduled", operation_id = "listScheduled",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [Scheduled]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(scheduler): State<Arc<Scheduler>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<Scheduled>>> {
    Ok(Json(scheduler.list_scheduled(&who, &room).await?))
}

/// Only while it is `scheduled` (409 once it is being sent or done).
#[utoipa::path(patch, path = "/api/rooms/{roomId}/scheduled/{scheduledId}", tag = "scheduled", operation_id = "editScheduled",
    params(("roomId" = String, Path), ("scheduledId" = String, Path)), request_body = ScheduledEdit,
    responses((status = 200, body = Scheduled), (status = "4XX", body = ErrorBody)))]
pub async fn edit(
    State(scheduler): State<Arc<Scheduler>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
    JsonBody(input): JsonBody<ScheduledEdit>,
) -> ApiResult<Json<Scheduled>> {
    Ok(Json(scheduler.edit_scheduled(&who, &room, &id, input).await?))
}

/// Cancels it: 200 with the item, `status: cancelled` (409 once it is being sent or done).
#[utoipa::path(delete, path = "/api/rooms/{roomId}/scheduled/{scheduledId}", tag = "scheduled", operation_id = "cancelScheduled",
    params(("roomId" = String, Path), ("scheduledId" = String, Path)),
    responses((status = 200, body = Scheduled), (status = "4XX", body = ErrorBody)))]
pub async fn cancel(
    State(scheduler): State<Arc<Scheduler>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<Json<Scheduled>> {
    Ok(Json(scheduler.cancel_scheduled(&who, &room, &id).await?))
}
