//! The notification function as a webhook, for an Event Grid subscription that delivers to a
//! URL instead of the Functions trigger (Event Grid's webhook delivery): the Event Grid schema's validation
//! handshake, the CloudEvents abuse-protection preflight (`OPTIONS`), and deliveries of one
//! event or a batch in either schema. Success is 200; an unreadable delivery is 400 (Event
//! Grid dead-letters it at once); a failure to process is 503 (Event Grid retries), and so is
//! an event another delivery is still pushing. Event Grid waits only 30 s for the answer, so
//! it comes once the event is claimed and recorded, before the pushes end
//! (`Notifier::accept`). The
//! events are only pointers — `notify` reads each message back from the store — so nothing
//! a caller posts here can push text the room does not hold; on Azure the function key guards
//! it as well.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tabletalk::{Error, events};

use super::AppState;
use super::error::{ApiError, ApiResult, is_client_error};

/// Delivers message events to the notification function.
#[utoipa::path(post, path = "/api/events/notifications", tag = "events", operation_id = "notificationEvents",
    security(()),
    request_body(description = "An Event Grid or CloudEvents delivery: one event or a batch, as JSON of any of these types.",
        content((Object = "application/json"), (Object = "application/cloudevents+json"),
            (Object = "application/cloudevents-batch+json"))),
    responses((status = 200), (status = "4XX", body = super::error::ErrorBody)))]
pub async fn deliver(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> ApiResult<Json<Value>> {
    let value: Value = serde_json::from_slice(&body).map_err(|_| Error::bad_request("the body is not JSON"))?;
    let handshake = headers
        .get("aeg-event-type")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"SubscriptionValidation"));
    if let Some(code) = events::validation_code(&value) {
        return Ok(Json(json!({ "validationResponse": code })));
    }
    if handshake {
        return Err(Error::bad_request("a validation request without a validation code").into());
    }
    let events = events::decode(value).map_err(|e| Error::bad_request(e.to_string()))?;
    for event in &events {
        // Answered once the event is claimed and recorded; a slow fan-out goes on after.
        match state.chat.notifier().accept(event).await {
            Ok(_) => {}
            // Names no room or message that could ever exist: dead-letter it, no retries.
            Err(e) if is_client_error(&e) => return Err(Error::bad_request(e.to_string()).into()),
            Err(e) => return Err(Error::Unavailable(format!("an event was not processed: {e}")).into()),
        }
    }
    Ok(Json(json!({ "processed": events.len() })))
}

/// The CloudEvents webhook preflight: the sender names itself in `WebHook-Request-Origin` and
/// is allowed.
#[utoipa::path(options, path = "/api/events/notifications", tag = "events", operation_id = "notificationEventsPreflight",
    security(()),
    params(("WebHook-Request-Origin" = String, Header, description = "The sender's host name.")),
    responses((status = 200, description = "Allowed: `WebHook-Allowed-Origin` echoes the origin."), (status = 400, body = super::error::ErrorBody)))]
pub async fn preflight(headers: HeaderMap) -> Response {
    let Some(origin) = headers.get("webhook-request-origin").cloned() else {
        return ApiError(Error::bad_request("WebHook-Request-Origin is missing")).into_response();
    };
    let mut response = StatusCode::OK.into_response();
    let allowed = response.headers_mut();
    allowed.insert("webhook-allowed-origin", origin);
    allowed.insert("webhook-allowed-rate", HeaderValue::from_static("*"));
    allowed.insert(header::ALLOW, HeaderValue::from_static("POST, OPTIONS"));
    response
}
