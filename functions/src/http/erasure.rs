//! Erasure functions: a user erases themselves (`POST /api/me/erase`, 202 with the job, which
//! runs in the background) and reads how far it got (`GET /api/me/erase`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::Error;
use tabletalk::erasure::Erasure;
use tabletalk::service::erasure::Eraser;

use super::error::{ApiResult, ErrorBody};
use super::extract::Caller;

/// Starts erasing the caller: every message they wrote becomes a tombstone, their reactions,
/// votes, push subscriptions and memberships go, and rooms they own go to their
/// highest-ranked member (or are deleted when no one else is in them). Takes no body (one is
/// 400). While it runs, a repeat answers the same job, and joining or creating a room or
/// registering a push subscription is 409.
#[utoipa::path(post, path = "/api/me/erase", tag = "me", operation_id = "eraseMe",
    responses((status = 202, body = Erasure), (status = "4XX", body = ErrorBody)))]
pub async fn erase(
    State(eraser): State<Arc<Eraser>>,
    Caller(who): Caller,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Erasure>)> {
    if !body.is_empty() {
        return Err(Error::bad_request("this request takes no body").into());
    }
    Ok((StatusCode::ACCEPTED, Json(eraser.erase_me(&who).await?)))
}

/// The caller's erasure and its progress; 404 if they never asked for one.
#[utoipa::path(get, path = "/api/me/erase", tag = "me", operation_id = "erasureStatus",
    responses((status = 200, body = Erasure), (status = "4XX", body = ErrorBody)))]
pub async fn status(State(eraser): State<Arc<Eraser>>, Caller(who): Caller) -> ApiResult<Json<Erasure>> {
    Ok(Json(eraser.my_erasure(&who).await?))
}
