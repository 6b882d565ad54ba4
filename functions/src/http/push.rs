//! Push functions: register, unregister and list the caller's Web Push subscriptions, and the
//! VAPID public key browsers subscribe with.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use tabletalk::Error;
use tabletalk::service::subscriptions::Accounts;
use tabletalk::subscriptions::{DoNotDisturb, NewSubscription, PushSubscription, Unsubscribe};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody};

/// Registers a subscription (`PushSubscription.toJSON()`); the same endpoint again replaces it.
#[utoipa::path(put, path = "/api/push/subscriptions", tag = "push", operation_id = "subscribePush",
    request_body = NewSubscription,
    responses((status = 200, body = PushSubscription), (status = "4XX", body = ErrorBody)))]
pub async fn subscribe(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<NewSubscription>,
) -> ApiResult<Json<PushSubscription>> {
    Ok(Json(accounts.subscribe(&who, input).await?))
}

#[utoipa::path(delete, path = "/api/push/subscriptions", tag = "push", operation_id = "unsubscribePush",
    request_body = Unsubscribe,
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn unsubscribe(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<Unsubscribe>,
) -> ApiResult<StatusCode> {
    accounts.unsubscribe(&who, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/push/subscriptions", tag = "push", operation_id = "listPushSubscriptions",
    responses((status = 200, body = [PushSubscription]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
) -> ApiResult<Json<Vec<PushSubscription>>> {
    Ok(Json(accounts.my_subscriptions(&who).await?))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VapidKey {
    /// base64url, for `applicationServerKey`.
    pub public_key: String,
}

/// 404 when this deployment sends no push (no VAPID key configured).
#[utoipa::path(get, path = "/api/push/vapidPublicKey", tag = "push", operation_id = "vapidPublicKey",
    responses((status = 200, body = VapidKey), (status = "4XX", body = ErrorBody)))]
pub async fn vapid_public_key(State(state): State<AppState>, Caller(_): Caller) -> ApiResult<Json<VapidKey>> {
    let key = state
        .chat
        .vapid_public_key()
        .ok_or_else(|| Error::not_found("push is not configured here"))?;
    Ok(Json(VapidKey {
        public_key: key.to_owned(),
    }))
}

/// Sets the caller's do-not-disturb until a time (null ends it): while it holds, no push
/// reaches them from any room, mentions included.
#[utoipa::path(put, path = "/api/me/do-not-disturb", tag = "push", operation_id = "setDoNotDisturb",
    request_body = DoNotDisturb,
    responses((status = 200, body = DoNotDisturb), (status = "4XX", body = ErrorBody)))]
pub async fn set_do_not_disturb(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<DoNotDisturb>,
) -> ApiResult<Json<DoNotDisturb>> {
    Ok(Json(accounts.set_do_not_disturb(&who, input).await?))
}

/// The caller's do-not-disturb (`until` null when none holds).
#[utoipa::path(get, path = "/api/me/do-not-disturb", tag = "push", operation_id = "getDoNotDisturb",
    responses((status = 200, body = DoNotDisturb), (status = "4XX", body = ErrorBody)))]
pub async fn do_not_disturb(
    State(accounts): State<Arc<Accounts>>,
    Caller(who): Caller,
) -> ApiResult<Json<DoNotDisturb>> {
    Ok(Json(accounts.do_not_disturb(&who).await?))
}
