//! The HTTP surface: one router for every host (the local server, the Functions custom
//! handler with HTTP forwarding, and later Lambda). Handlers are thin — extract, call `Chat`,
//! map errors — and live in one module per resource.

pub mod error;
pub mod extract;
pub mod messages;
pub mod openapi;
pub mod rooms;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tabletalk::auth::Authenticator;
use tabletalk::{Chat, Error};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use self::error::ApiError;

/// Largest request body accepted (BRIEF §7).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What every handler can reach. Cloning is cheap.
#[derive(Clone)]
pub struct AppState {
    pub chat: Chat,
    pub auth: Arc<Authenticator>,
}

/// An HTTP function as the Functions host knows it: its folder name, method and route (under
/// the `api` prefix). `functions/<name>/function.json` must exist for each, and only for these.
pub struct HttpFunction {
    pub name: &'static str,
    pub method: &'static str,
    pub route: &'static str,
}

pub const HTTP_FUNCTIONS: &[HttpFunction] = &[
    HttpFunction {
        name: "createRoom",
        method: "post",
        route: "rooms",
    },
    HttpFunction {
        name: "listRooms",
        method: "get",
        route: "rooms",
    },
    HttpFunction {
        name: "getRoom",
        method: "get",
        route: "rooms/{roomId}",
    },
    HttpFunction {
        name: "joinRoom",
        method: "post",
        route: "rooms/{roomId}/join",
    },
    HttpFunction {
        name: "leaveRoom",
        method: "post",
        route: "rooms/{roomId}/leave",
    },
    HttpFunction {
        name: "createMessage",
        method: "post",
        route: "rooms/{roomId}/messages",
    },
    HttpFunction {
        name: "readMessages",
        method: "get",
        route: "rooms/{roomId}/messages",
    },
    HttpFunction {
        name: "getMessage",
        method: "get",
        route: "rooms/{roomId}/messages/{messageId}",
    },
    HttpFunction {
        name: "openApi",
        method: "get",
        route: "openapi.json",
    },
];

pub fn router(state: AppState) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let api = Router::new()
        .route("/rooms", post(rooms::create).get(rooms::list))
        .route("/rooms/{roomId}", get(rooms::get))
        .route("/rooms/{roomId}/join", post(rooms::join))
        .route("/rooms/{roomId}/leave", post(rooms::leave))
        .route("/rooms/{roomId}/messages", post(messages::create).get(messages::read))
        .route("/rooms/{roomId}/messages/{messageId}", get(messages::get))
        .route("/openapi.json", get(openapi::document));
    Router::new()
        .nest("/api", api)
        // The Functions host polls `/` until the handler answers anything.
        .route("/", get(|| async { StatusCode::OK }))
        .fallback(|| async { ApiError(Error::not_found("no such route")) })
        .method_not_allowed_fallback(|| async {
            let mut response = ApiError(Error::bad_request("method not allowed on this route")).into_response();
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            response
        })
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError(Error::Internal("handler panicked".into())).into_response()
        }))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
            let id = request
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
        }))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}
