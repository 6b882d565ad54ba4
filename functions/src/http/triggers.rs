//! The functions the Azure Functions host invokes with its payload protocol rather than by
//! forwarding HTTP (the custom handler payload protocol): `POST /<FunctionName>` with
//! `{"Data": {...}, "Metadata": {...}}`, answered with `{"Outputs", "Logs", "ReturnValue"}`.
//! A 2xx reply is a successful invocation; anything else fails it, so the platform retries
//! (Event Grid redelivers, the timer runs again). Served only in custom-handler mode: the
//! self-hosted server runs the timers itself and has no Event Grid.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use serde_json::{Value, json};
use tabletalk::events;
use tabletalk::service::{scheduled::Scheduler, send::Sending};

use super::AppState;
use super::error::is_client_error;

/// A function the host invokes through the payload protocol: its name (the folder, and the
/// route `/<name>` the router serves it at), its trigger binding and its handler. The router,
/// the package and the `function.json` check all read this one table.
pub struct TriggerFunction {
    pub name: &'static str,
    /// The `function.json` binding, as its JSON.
    pub binding: &'static str,
    /// The handler, as the router mounts it.
    pub handler: fn() -> MethodRouter<AppState>,
}

pub const TRIGGER_FUNCTIONS: &[TriggerFunction] = &[
    TriggerFunction {
        name: "notify",
        binding: r#"{"type":"eventGridTrigger","direction":"in","name":"eventGridEvent"}"#,
        handler: || post(notify),
    },
    TriggerFunction {
        name: "republishEvents",
        binding: r#"{"type":"timerTrigger","direction":"in","name":"timer","schedule":"*/15 * * * * *","runOnStartup":false,"useMonitor":false}"#,
        handler: || post(republish_events),
    },
    TriggerFunction {
        name: "housekeeping",
        binding: r#"{"type":"timerTrigger","direction":"in","name":"timer","schedule":"0 */5 * * * *","runOnStartup":false,"useMonitor":true}"#,
        handler: || post(housekeeping),
    },
    TriggerFunction {
        name: "sendScheduled",
        binding: r#"{"type":"timerTrigger","direction":"in","name":"timer","schedule":"*/15 * * * * *","runOnStartup":false,"useMonitor":false}"#,
        handler: || post(send_scheduled),
    },
    TriggerFunction {
        name: "deliverWebhooks",
        binding: r#"{"type":"timerTrigger","direction":"in","name":"timer","schedule":"*/15 * * * * *","runOnStartup":false,"useMonitor":false}"#,
        handler: || post(deliver_webhooks),
    },
];

/// The invocation response: `Logs` go to the invocation log.
fn invocation(status: StatusCode, logs: Vec<String>) -> Response {
    (
        status,
        Json(json!({ "Outputs": {}, "Logs": logs, "ReturnValue": null })),
    )
        .into_response()
}

/// The notification function on its Event Grid trigger. An event it cannot read is logged and
/// dropped (retrying would not help); a failure to process one fails the invocation. As with
/// the webhook, Event Grid waits for the invocation only so long, so it succeeds once the event
/// is claimed and recorded, and the pushes go on in this process.
pub async fn notify(State(state): State<AppState>, body: Bytes) -> Response {
    let decoded = serde_json::from_slice::<Value>(&body)
        .map_err(|_| tabletalk::Error::bad_request("the invocation is not JSON"))
        .and_then(events::decode);
    let events = match decoded {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(error = %e, "an unreadable event was dropped");
            return invocation(StatusCode::OK, vec![format!("dropped an unreadable event: {e}")]);
        }
    };
    let mut logs = Vec::new();
    for event in &events {
        match state.chat.notifier().accept(event).await {
            Ok(accepted) => logs.push(format!("{}: {accepted:?}", event.id)),
            // Names no room or message that could ever exist: a retry would not help.
            Err(e) if is_client_error(&e) => {
                tracing::warn!(event = %event.id, error = %e, "an event naming nothing was dropped");
                logs.push(format!("{}: dropped: {e}", event.id));
            }
            Err(e) => {
                tracing::warn!(event = %event.id, error = %e, "notifying failed; the invocation fails for a retry");
                logs.push(format!("{}: failed: {e}", event.id));
                return invocation(StatusCode::INTERNAL_SERVER_ERROR, logs);
            }
        }
    }
    invocation(StatusCode::OK, logs)
}

/// The timer that republishes events still pending in the outbox.
pub async fn republish_events(State(state): State<AppState>) -> Response {
    match state.chat.outbox.republish(state.chat.now()).await {
        Ok(count) => invocation(StatusCode::OK, vec![format!("republished {count} events")]),
        Err(e) => invocation(StatusCode::INTERNAL_SERVER_ERROR, vec![format!("failed: {e}")]),
    }
}

/// The timer that purges expired messages and idempotency records.
pub async fn housekeeping(State(state): State<AppState>) -> Response {
    match state.chat.housekeeping(state.chat.now()).await {
        Ok(report) => invocation(StatusCode::OK, vec![format!("{report:?}")]),
        Err(e) => invocation(StatusCode::INTERNAL_SERVER_ERROR, vec![format!("failed: {e}")]),
    }
}

/// The timer that sends the scheduled messages due. Two runs at once (a timer firing twice, two
/// instances) send each message once (`tabletalk::scheduled`).
pub async fn send_scheduled(State(scheduler): State<Arc<Scheduler>>) -> Response {
    match scheduler.send_due_messages().await {
        Ok(report) => invocation(StatusCode::OK, vec![format!("{report:?}")]),
        Err(e) => invocation(StatusCode::INTERNAL_SERVER_ERROR, vec![format!("failed: {e}")]),
    }
}

/// The timer that fans outgoing webhook events out and posts the deliveries due. Two runs at
/// once make one attempt of each delivery (`tabletalk::service::outgoing`).
pub async fn deliver_webhooks(State(sending): State<Arc<Sending>>) -> Response {
    match sending.deliver_webhooks().await {
        Ok(report) => invocation(StatusCode::OK, vec![format!("{report:?}")]),
        Err(e) => invocation(StatusCode::INTERNAL_SERVER_ERROR, vec![format!("failed: {e}")]),
    }
}
