//! Presence functions: the caller's custom status (`/api/me/status`), and Web PubSub's upstream
//! event handler (`/api/live/events`), through which Azure reports connections opening and
//! closing. The handler is anonymous to the host: the `ce-signature` over the connection id
//! with the hub's access key is its credential (`tabletalk::adapters::live::upstream`), checked
//! before anything in the event is believed.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tabletalk::Error;
use tabletalk::adapters::live::upstream::EventHeaders;
use tabletalk::presence::{NewStatus, Presence};
use tabletalk::service::presence::PresenceKeeper;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody};

/// Sets the caller's custom status: `text` (1–100 characters) and/or `emoji` (1–16, no
/// whitespace), optionally until `expiresAt` (in the future, at most 366 days ahead). The
/// members of the caller's rooms get a `presence` signal.
#[utoipa::path(put, path = "/api/me/status", tag = "presence", operation_id = "setMyStatus",
    request_body = NewStatus,
    responses((status = 200, body = Presence), (status = "4XX", body = ErrorBody)))]
pub async fn set_status(
    State(presence_keeper): State<Arc<PresenceKeeper>>,
    Caller(who): Caller,
    JsonBody(input): JsonBody<NewStatus>,
) -> ApiResult<Json<Presence>> {
    Ok(Json(presence_keeper.set_status(&who, input).await?))
}

/// Clears the caller's custom status.
#[utoipa::path(delete, path = "/api/me/status", tag = "presence", operation_id = "clearMyStatus",
    responses((status = 200, body = Presence), (status = "4XX", body = ErrorBody)))]
pub async fn clear_status(
    State(presence_keeper): State<Arc<PresenceKeeper>>,
    Caller(who): Caller,
) -> ApiResult<Json<Presence>> {
    Ok(Json(presence_keeper.clear_status(&who).await?))
}

/// The caller's own presence and custom status (an expired status reads as none).
#[utoipa::path(get, path = "/api/me/status", tag = "presence", operation_id = "getMyStatus",
    responses((status = 200, body = Presence), (status = "4XX", body = ErrorBody)))]
pub async fn my_status(
    State(presence_keeper): State<Arc<PresenceKeeper>>,
    Caller(who): Caller,
) -> ApiResult<Json<Presence>> {
    Ok(Json(presence_keeper.my_presence(&who).await?))
}

/// Web PubSub's upstream event handler (CloudEvents binary mode): `connected` and
/// `disconnected` system events keep presence. 204 once recorded; 401 for a missing or wrong
/// `ce-signature` (or where no Web PubSub is configured); other events are accepted and
/// ignored.
#[utoipa::path(post, path = "/api/live/events", tag = "presence", operation_id = "liveEvents",
    security(()),
    params(
        ("ce-type" = String, Header, description = "`azure.webpubsub.sys.connected` or `azure.webpubsub.sys.disconnected`."),
        ("ce-connectionId" = String, Header),
        ("ce-userId" = Option<String>, Header),
        ("ce-hub" = Option<String>, Header),
        ("ce-signature" = String, Header, description = "`sha256=<hex HMAC-SHA256(access key, connection id)>` per key, comma separated."),
    ),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn live_events(
    State(presence_keeper): State<Arc<PresenceKeeper>>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let event = EventHeaders {
        ce_type: header("ce-type"),
        hub: header("ce-hub"),
        connection_id: header("ce-connectionid"),
        user_id: header("ce-userid"),
        signature: header("ce-signature"),
    };
    presence_keeper.upstream_event(&event).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The abuse-protection preflight Web PubSub sends before it delivers events: it names itself
/// in `WebHook-Request-Origin`, and is allowed by name.
#[utoipa::path(options, path = "/api/live/events", tag = "presence", operation_id = "liveEventsPreflight",
    security(()),
    params(("WebHook-Request-Origin" = String, Header, description = "The hub's host name, `<name>.webpubsub.azure.com`.")),
    responses((status = 200, description = "Allowed: `WebHook-Allowed-Origin` echoes the origin."), (status = 400, body = ErrorBody)))]
pub async fn live_events_preflight(headers: HeaderMap) -> Response {
    let Some(origin) = headers.get("webhook-request-origin").cloned() else {
        return ApiError(Error::bad_request("WebHook-Request-Origin is missing")).into_response();
    };
    let mut response = StatusCode::OK.into_response();
    let allowed = response.headers_mut();
    allowed.insert("webhook-allowed-origin", origin);
    allowed.insert(header::ALLOW, HeaderValue::from_static("POST, OPTIONS"));
    response
}
