//! Outgoing webhook functions: a room's HTTPS endpoints for its message events (register,
//! list, delete) and each one's deliveries. They need ManageWebhooks; a non-member is answered
//! 404 as for a missing room. The receiver's side is docs/OUTGOING_WEBHOOKS.md.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::ids::RoomId;
use tabletalk::outgoing::{Delivery, NewOutgoingWebhook, OutgoingWebhook, OutgoingWebhookWithSecret};
use tabletalk::service::send::Sending;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// Registers an endpoint. The answer carries its signing `secret`, shown only here. 422: a
/// URL that is not `https` to a public host, has credentials, or is too long; an empty or
/// unknown event list. 409: the room has ten already.
#[utoipa::path(post, path = "/api/rooms/{roomId}/outgoing-webhooks", tag = "webhooks", operation_id = "createOutgoingWebhook",
    params(("roomId" = String, Path)), request_body = NewOutgoingWebhook,
    responses((status = 201, body = OutgoingWebhookWithSecret), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewOutgoingWebhook>,
) -> ApiResult<(StatusCode, Json<OutgoingWebhookWithSecret>)> {
    let hook = sending.create_outgoing_webhook(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(hook)))
}

/// The room's endpoints, each with its status and its newest attempt's outcome.
#[utoipa::path(get, path = "/api/rooms/{roomId}/outgoing-webhooks", tag = "webhooks", operation_id = "listOutgoingWebhooks",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [OutgoingWebhook]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<OutgoingWebhook>>> {
    Ok(Json(sending.list_outgoing_webhooks(&who, &room).await?))
}

/// Deletes an endpoint; nothing more is sent to it. An id naming nothing is 404.
#[utoipa::path(delete, path = "/api/rooms/{roomId}/outgoing-webhooks/{webhookId}", tag = "webhooks", operation_id = "deleteOutgoingWebhook",
    params(("roomId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    sending.delete_outgoing_webhook(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// An endpoint's deliveries (the newest 100 changes), each with its status, attempts and
/// last answer.
#[utoipa::path(get, path = "/api/rooms/{roomId}/outgoing-webhooks/{webhookId}/deliveries", tag = "webhooks", operation_id = "listDeliveries",
    params(("roomId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = [Delivery]), (status = "4XX", body = ErrorBody)))]
pub async fn deliveries(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<Json<Vec<Delivery>>> {
    Ok(Json(sending.list_deliveries(&who, &room, &id).await?))
}
