//! The HTTP surface: one router for every host (the local server, the Functions custom
//! handler with HTTP forwarding, and later Lambda). Handlers are thin — extract, call `Chat`,
//! map errors — and live in one module per resource.

pub mod attachments;
pub mod commands;
pub mod dev_signin;
pub mod emoji;
pub mod erasure;
pub mod error;
pub mod events;
pub mod extract;
pub mod function_table;
pub mod hub;
pub mod invitations;
pub mod live;
pub mod members;
pub mod messages;
pub mod moderation;
pub mod objects;
pub mod openapi;
pub mod outgoing;
pub mod presence;
pub mod previews;
pub mod push;
pub mod roles;
pub mod rooms;
pub mod scheduled;
pub mod search;
pub mod triggers;
pub mod web;
pub mod webhooks;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath};
use axum::http::{HeaderName, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use tabletalk::auth::Authenticator;
use tabletalk::service::one_request;
use tabletalk::{Chat, Error};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What every handler can reach. Cloning is cheap.
#[derive(Clone)]
pub struct AppState {
    pub chat: Chat,
    pub auth: Arc<Authenticator>,
}

/// A handler takes the one component it uses as its state (`State<Arc<Sending>>`), so no
/// handler needs the whole service and nothing lists every use case.
macro_rules! component_state {
    ($field:ident: $module:ident::$component:ident) => {
        impl axum::extract::FromRef<AppState> for Arc<tabletalk::service::$module::$component> {
            fn from_ref(state: &AppState) -> Self {
                state.chat.$field.clone()
            }
        }
    };
}
component_state!(access: access::RoomAccess);
component_state!(reading: read::Reading);
component_state!(signals: live::Signals);
component_state!(presence_keeper: presence::PresenceKeeper);
component_state!(files: attachments::Files);
component_state!(reactions: reactions::Reactions);
component_state!(previewer: previews::Previewer);
component_state!(accounts: subscriptions::Accounts);
component_state!(sending: send::Sending);
component_state!(editing: changes::Editing);
component_state!(moderation: moderation::Moderation);
component_state!(members: members::Members);
component_state!(rooms: rooms::Rooms);
component_state!(scheduler: scheduled::Scheduler);
component_state!(eraser: erasure::Eraser);
component_state!(searching: search::Searching);
component_state!(commands: commands::Commands);
component_state!(room_emoji: room_emoji::RoomEmoji);

/// Every `/api` route of a host and the OpenAPI document that describes them, from one
/// declaration: `routes!` registers each handler at the method and path of its
/// `#[utoipa::path]` and records that operation in the document. Routes under `/api` are added
/// here and only this way, so the served document lists exactly what the host routes, and the
/// Functions app's HTTP functions (`function_table`) are read off the same document.
pub fn api(custom_handler: bool) -> OpenApiRouter<AppState> {
    match custom_handler {
        true => user_api().merge(keyed_api()),
        false => user_api(),
    }
}

/// The API every host serves. On Azure the host lets every call through (`authLevel`
/// anonymous): each handler checks its caller's bearer token itself.
pub fn user_api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(rooms::create, rooms::list))
        .routes(routes!(rooms::get, rooms::update, rooms::delete))
        .routes(routes!(rooms::directory))
        .routes(routes!(search::search))
        .routes(routes!(commands::run, commands::list_all))
        .routes(routes!(commands::create, commands::list))
        .routes(routes!(commands::delete))
        .routes(routes!(commands::answer_later))
        .routes(routes!(emoji::suggest))
        .routes(routes!(emoji::create, emoji::list))
        .routes(routes!(emoji::delete))
        .routes(routes!(rooms::open_direct))
        .routes(routes!(invitations::create, invitations::list))
        .routes(routes!(invitations::revoke))
        .routes(routes!(invitations::mine))
        .routes(routes!(invitations::accept))
        .routes(routes!(invitations::decline))
        .routes(routes!(invitations::redeem))
        .routes(routes!(rooms::join))
        .routes(routes!(rooms::leave))
        .routes(routes!(rooms::transfer))
        .routes(routes!(members::mark_read))
        .routes(routes!(members::list))
        .routes(routes!(members::update_mine))
        .routes(routes!(members::kick))
        .routes(routes!(members::timeout))
        .routes(routes!(members::set_trust_level))
        .routes(routes!(members::ban))
        .routes(routes!(members::set_roles))
        .routes(routes!(members::unban))
        .routes(routes!(roles::list, roles::create))
        .routes(routes!(roles::update, roles::delete))
        .routes(routes!(messages::create, messages::read))
        .routes(routes!(messages::get, messages::edit, messages::delete))
        .routes(routes!(messages::pin, messages::unpin))
        .routes(routes!(messages::vote))
        .routes(routes!(messages::react, messages::unreact))
        .routes(routes!(messages::forward))
        .routes(routes!(messages::thread))
        .routes(routes!(messages::changes))
        .routes(routes!(push::subscribe, push::unsubscribe, push::list))
        .routes(routes!(push::vapid_public_key))
        .routes(routes!(live::negotiate))
        .routes(routes!(live::typing))
        .routes(routes!(erasure::erase, erasure::status))
        .routes(routes!(openapi::document))
        .routes(routes!(members::bans))
        .routes(routes!(moderation::log))
        .routes(routes!(moderation::report))
        .routes(routes!(moderation::queue))
        .routes(routes!(moderation::resolve))
        .routes(routes!(attachments::create_upload))
        .routes(routes!(attachments::download))
        .routes(routes!(attachments::thumbnail))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::rename, webhooks::delete))
        .routes(routes!(webhooks::rotate))
        .routes(routes!(webhooks::post))
        .routes(routes!(outgoing::create, outgoing::list))
        .routes(routes!(outgoing::delete))
        .routes(routes!(outgoing::deliveries))
        .routes(routes!(scheduled::create, scheduled::list))
        .routes(routes!(scheduled::edit, scheduled::cancel))
        .routes(routes!(members::receipts))
        .routes(routes!(members::mark_all_read))
        .routes(routes!(push::set_do_not_disturb, push::do_not_disturb))
        .routes(routes!(messages::follow, messages::unfollow))
        .routes(routes!(messages::thread_read))
        .routes(routes!(messages::my_threads))
        .routes(routes!(messages::batch))
        .routes(routes!(messages::pins))
        .routes(routes!(previews::remove))
        .routes(routes!(live::view_room))
        .routes(routes!(
            presence::set_status,
            presence::clear_status,
            presence::my_status
        ))
        .routes(routes!(presence::live_events, presence::live_events_preflight))
}

/// The platform's doors, served only by the Functions app and guarded there by the function
/// key (`authLevel` function): Event Grid's webhook delivery. The self-hosted server consumes
/// its events in process and exposes no such door.
pub fn keyed_api() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(events::deliver, events::preflight))
}

/// The router for every host; `custom_handler` adds the functions the Functions host invokes
/// through its payload protocol (`triggers`), and the notification webhook.
pub fn router(state: AppState, custom_handler: bool) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let objects_body_limit = state.chat.files.attachment_max_bytes().unwrap_or(0) as usize;
    let (api, document) = api(custom_handler).split_for_parts();
    let api = api.layer(Extension(Arc::new(document)));
    let mut app = Router::new();
    if custom_handler {
        for function in triggers::TRIGGER_FUNCTIONS {
            app = app.route(&format!("/{}", function.name), (function.handler)());
        }
    } else {
        // The self-hosted server's development sign-in (shut unless loopback and the
        // development secret); not an API function, so not in the document.
        app = app.route("/api/dev/signin", post(dev_signin::sign_in));
    }
    app.merge(api)
        // The local live hub (only when this server runs one; 404 otherwise).
        .route("/client/hubs/{hub}", get(hub::connect))
        // The embedded object store's links (only when it is the store; 404 otherwise), with
        // a body limit of their own: an upload is as large as the configured maximum.
        .route(
            "/objects/{*key}",
            get(objects::get)
                .put(objects::put)
                .layer(DefaultBodyLimit::max(objects_body_limit)),
        )
        // The web client's page and files. (The Functions host polls `/` until the handler
        // answers anything: the page does.)
        .route("/", get(web::page))
        .route("/web/{*path}", get(web::file))
        .route("/sw.js", get(web::service_worker))
        .fallback(|| async { ApiError(Error::not_found("no such route")) })
        .method_not_allowed_fallback(|| async {
            let mut response = ApiError(Error::bad_request("method not allowed on this route")).into_response();
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            response
        })
        .with_state(state)
        // One stack, outermost first, applied once: layered one by one, every route's service
        // was a box in a box for each layer, and a request cloned them all (axum clones the
        // route's service for each request).
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(PropagateRequestIdLayer::new(request_id))
                .layer(middleware::from_fn(named_request))
                .layer(TraceLayer::new_for_http().make_span_with(request_span))
                .layer(CatchPanicLayer::custom(|_| {
                    ApiError(Error::Internal("handler panicked".into())).into_response()
                }))
                .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
                .layer(middleware::from_fn(calls_together)),
        )
}

/// A request's span names its route's template, never its path: a path can hold a secret (an
/// inbound webhook's token is a path segment), and logs are read by more people than the
/// secret's holder. A request no route matches is logged without its path.
fn request_span(request: &Request<Body>) -> tracing::Span {
    let id = request_id(request);
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("(no route)", MatchedPath::as_str);
    tracing::info_span!("request", method = %request.method(), route = %route, request_id = %id)
}

/// Refuses a request that names a host other than a loopback one. Put in front of a server
/// that trusts the published development secret: it listens on loopback only, and this keeps
/// a web page on another site from reaching it through a name that resolves to 127.0.0.1 (DNS
/// rebinding), which the browser would treat as that site's own origin.
pub async fn loopback_hosts_only(request: Request<Body>, next: Next) -> Response {
    let named = request.uri().host().map(str::to_owned).or_else(|| {
        let host = request.headers().get(axum::http::header::HOST)?.to_str().ok()?;
        host.parse::<axum::http::uri::Authority>()
            .ok()
            .map(|a| a.host().to_owned())
    });
    let loopback = |host: &str| {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        host == "localhost"
            || host.ends_with(".localhost")
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    match named {
        Some(host) if !loopback(&host) => ApiError(Error::Forbidden(
            "this development server answers only to loopback host names".into(),
        ))
        .into_response(),
        _ => next.run(request).await,
    }
}

/// The request's id, for answers that hide their detail (`error::body`).
async fn named_request(request: Request<Body>, next: Next) -> Response {
    let id = request_id(&request).to_owned();
    error::in_request(id, next.run(request)).await
}

/// The request's `x-request-id` (set by `SetRequestIdLayer` when the client sent none).
fn request_id(request: &Request<Body>) -> &str {
    request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
}

/// The store calls a request's handler makes in one step reach the store together
/// ([`one_request`]): a send's index row, message and read position commit in one group of
/// the embedded store, with one fsync.
async fn calls_together(request: Request<Body>, next: Next) -> Response {
    one_request(next.run(request)).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use axum::body::Body;
    use axum::http::Request;
    use tabletalk::config::AuthSettings;
    use tabletalk::storage::Tables;
    use tabletalk::storage::sqlite::{Durability, SqliteTables};
    use tabletalk::store::schema::Schema;
    use tower::ServiceExt;

    use super::*;

    fn functions_dir() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// `functions/<name>/function.json` exists for every HTTP function and every trigger
    /// function, and only for them, each agreeing with the router (`check_definition`).
    #[test]
    fn function_folders_match_the_routes() {
        let mut found = BTreeSet::new();
        for entry in std::fs::read_dir(functions_dir()).unwrap() {
            let path = entry.unwrap().path().join("function.json");
            if !path.exists() {
                continue;
            }
            let name = path.parent().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
            crate::package::check_definition(&name, &std::fs::read(&path).unwrap()).unwrap();
            found.insert(name);
        }
        let expected: BTreeSet<String> = crate::package::function_names().into_iter().collect();
        assert_eq!(found, expected);
        // And the check can fail: another route, another method, another schedule.
        let drifted = [
            (
                "createRoom",
                r#"{"bindings":[{"type":"httpTrigger","methods":["post"],"route":"room"},{"type":"http"}]}"#,
            ),
            (
                "createRoom",
                r#"{"bindings":[{"type":"httpTrigger","methods":["get"],"route":"rooms"},{"type":"http"}]}"#,
            ),
            (
                "housekeeping",
                r#"{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"0 0 * * * *"}]}"#,
            ),
            ("unknownFunction", r#"{"bindings":[]}"#),
            // The webhook must stay behind the function key.
            (
                "notificationEvents",
                r#"{"bindings":[{"type":"httpTrigger","authLevel":"anonymous","methods":["post","options"],"route":"events/notifications"},{"type":"http"}]}"#,
            ),
        ];
        for (name, definition) in drifted {
            assert!(
                crate::package::check_definition(name, definition.as_bytes()).is_err(),
                "{name}: {definition}"
            );
        }
        let host: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(functions_dir().join("host.json")).unwrap()).unwrap();
        assert_eq!(host["customHandler"]["enableForwardingHttpRequest"], true);
        assert_eq!(host["extensions"]["http"]["routePrefix"], "api");
    }

    /// Every declared function is served by the router: unauthenticated calls get 401 (or 200
    /// for the OpenAPI document), never 404 or 405.
    #[tokio::test]
    async fn every_function_is_routed() {
        let dir = std::env::temp_dir().join(format!("tt-router-{}", uuid::Uuid::new_v4()));
        let tables = Tables::new(SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap());
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let auth = Arc::new(Authenticator::new(AuthSettings {
            hs256_secret: Some("s".into()),
            ..Default::default()
        }));
        let app = router(AppState { chat, auth }, true);
        for function in function_table::http_functions() {
            let path = format!("/api/{}", function.route)
                .replace("{roomId}", &uuid::Uuid::new_v4().to_string())
                .replace("{messageId}", "2516062689814758707")
                .replace("{userId}", "bob")
                .replace("{roleId}", &uuid::Uuid::new_v4().to_string())
                .replace("{emoji}", "%F0%9F%91%8D");
            let method = function.methods[0].to_uppercase();
            let request = Request::builder()
                .method(method.as_str())
                .uri(&path)
                .body(Body::empty())
                .unwrap();
            let status = app.clone().oneshot(request).await.unwrap().status();
            let expected = match function.name.as_str() {
                "openApi" => StatusCode::OK,
                // Not a user's function: an empty delivery is refused as unreadable.
                "notificationEvents" => StatusCode::BAD_REQUEST,
                // No bearer: its URL is the credential; an empty body is refused as not JSON.
                "postToWebhook" | "answerSlashCommand" => StatusCode::BAD_REQUEST,
                _ => StatusCode::UNAUTHORIZED,
            };
            assert_eq!(status, expected, "{} {path}", function.name);
        }
        for function in triggers::TRIGGER_FUNCTIONS {
            let request = Request::builder()
                .method("POST")
                .uri(format!("/{}", function.name))
                .header("content-type", "application/json")
                .body(Body::from(r#"{"Data":{},"Metadata":{}}"#))
                .unwrap();
            let status = app.clone().oneshot(request).await.unwrap().status();
            assert_eq!(status, StatusCode::OK, "{}", function.name);
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// What the log holds, shared with the subscriber that writes it.
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An inbound webhook's token is a segment of its URL: the request's log lines carry the
    /// route's template, never the token.
    #[tokio::test(flavor = "current_thread")]
    async fn a_webhook_token_never_reaches_the_log() {
        let dir = std::env::temp_dir().join(format!("tt-router-{}", uuid::Uuid::new_v4()));
        let tables = Tables::new(SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap());
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let auth = Arc::new(Authenticator::new(AuthSettings::default()));
        let app = router(AppState { chat, auth }, false);
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        // Another test's thread may have met these callsites first, with no subscriber of its
        // own: have their interest asked again, now that this one is set.
        tracing::callsite::rebuild_interest_cache();
        let token = "s3cr3t-t0ken-Zq";
        for uri in [
            format!("/api/hooks/{}/{token}", "a".repeat(48)),
            format!("/no/route/{token}"),
        ] {
            let request = Request::builder()
                .method("POST")
                .uri(&uri)
                .header("content-type", "application/json")
                .body(Body::from(r#"{"text":"hi"}"#))
                .unwrap();
            app.clone().oneshot(request).await.unwrap();
        }
        let written = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(written.contains("/api/hooks/{webhookId}/{token}"), "{written}");
        assert!(!written.contains(token), "{written}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
