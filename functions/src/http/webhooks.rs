//! Inbound webhook functions: a room's webhooks (create, list, rename, rotate, delete; they
//! need ManageWebhooks), and the secret URL that posts with one (no bearer: the URL is the
//! credential).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use tabletalk::ids::RoomId;
use tabletalk::messages::Message;
use tabletalk::service::send::Sending;
use tabletalk::webhooks::{Webhook, WebhookName, WebhookPayload, WebhookWithUrl};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// The answer carries the secret `url`, shown only here (and on a rotation).
#[utoipa::path(post, path = "/api/rooms/{roomId}/webhooks", tag = "webhooks", operation_id = "createWebhook",
    params(("roomId" = String, Path)), request_body = WebhookName,
    responses((status = 201, body = WebhookWithUrl), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<WebhookName>,
) -> ApiResult<(StatusCode, Json<WebhookWithUrl>)> {
    let hook = sending.create_webhook(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(hook)))
}

#[utoipa::path(get, path = "/api/rooms/{roomId}/webhooks", tag = "webhooks", operation_id = "listWebhooks",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [Webhook]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<Webhook>>> {
    Ok(Json(sending.list_webhooks(&who, &room).await?))
}

#[utoipa::path(patch, path = "/api/rooms/{roomId}/webhooks/{webhookId}", tag = "webhooks", operation_id = "renameWebhook",
    params(("roomId" = String, Path), ("webhookId" = String, Path)), request_body = WebhookName,
    responses((status = 200, body = Webhook), (status = "4XX", body = ErrorBody)))]
pub async fn rename(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
    JsonBody(input): JsonBody<WebhookName>,
) -> ApiResult<Json<Webhook>> {
    Ok(Json(sending.rename_webhook(&who, &room, &id, input).await?))
}

#[utoipa::path(delete, path = "/api/rooms/{roomId}/webhooks/{webhookId}", tag = "webhooks", operation_id = "deleteWebhook",
    params(("roomId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    sending.delete_webhook(&who, &room, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A new secret URL; the old one answers 404 from now on.
#[utoipa::path(post, path = "/api/rooms/{roomId}/webhooks/{webhookId}/rotate", tag = "webhooks", operation_id = "rotateWebhook",
    params(("roomId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = WebhookWithUrl), (status = "4XX", body = ErrorBody)))]
pub async fn rotate(
    State(sending): State<Arc<Sending>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<Json<WebhookWithUrl>> {
    Ok(Json(sending.rotate_webhook(&who, &room, &id).await?))
}

/// Posts a `Webhook` message; no bearer token. The body is Slack's incoming-webhook body
/// (`text` in Slack markup, `username`, `icon_url`). An `Idempotency-Key` header (1-64 of
/// `[A-Za-z0-9._:-]`) makes a retry safe: 200 with the message the first call stored. A
/// missing, deleted or rotated webhook answers 404.
#[utoipa::path(post, path = "/api/hooks/{webhookId}/{token}", tag = "webhooks", operation_id = "postToWebhook", security(()),
    params(("webhookId" = String, Path), ("token" = String, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry safe")),
    request_body = WebhookPayload,
    responses((status = 201, body = Message), (status = 200, description = "a repeat of an earlier Idempotency-Key", body = Message),
        (status = "4XX", body = ErrorBody)))]
pub async fn post(
    State(sending): State<Arc<Sending>>,
    PathParams((id, token)): PathParams<(String, String)>,
    headers: HeaderMap,
    JsonBody(payload): JsonBody<WebhookPayload>,
) -> ApiResult<(StatusCode, Json<Message>)> {
    let key = match headers.get("idempotency-key") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| tabletalk::Error::bad_request("the Idempotency-Key is not text"))?,
        ),
        None => None,
    };
    let sent = sending.post_to_webhook(&id, &token, payload, key).await?;
    let status = match sent.created {
        true => StatusCode::CREATED,
        false => StatusCode::OK,
    };
    Ok((status, Json(sent.message)))
}
