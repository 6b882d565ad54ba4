//! The OpenAPI document, served at `/api/openapi.json`. Its operations come from the router
//! itself (`http::api` registers each route from its handler's annotation), so a host's
//! document lists exactly the routes it serves; this module holds what is common to every
//! host: the info, the bearer scheme and the document's own route.

use std::sync::Arc;

use axum::{Extension, Json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "tabletalk", description = "Chat messages on table storage.

Integers are whole JSON numbers, as JSON Schema counts them: `3`, `3.0` and `3e0` are the same \
integer. A query parameter given empty (`?cursor=`) is one not given. Text limits count \
characters."),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// This document: every route this host serves.
#[utoipa::path(get, path = "/api/openapi.json", tag = "meta", operation_id = "openApi", security(()),
    responses((status = 200, description = "This OpenAPI document.", content_type = "application/json")))]
pub async fn document(Extension(document): Extension<Arc<utoipa::openapi::OpenApi>>) -> Json<utoipa::openapi::OpenApi> {
    Json(document.as_ref().clone())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use serde_json::{Value, json};
    use tabletalk::Chat;
    use tabletalk::auth::Authenticator;
    use tabletalk::config::AuthSettings;
    use tabletalk::storage::Tables;
    use tabletalk::storage::sqlite::{Durability, SqliteTables};
    use tabletalk::store::schema::Schema;
    use tower::ServiceExt;

    use crate::http::function_table::{AuthLevel, http_functions};
    use crate::http::{AppState, router};

    /// The router of the self-hosted server (`false`) or of the Functions app (`true`).
    async fn app(custom_handler: bool) -> Router {
        let dir = std::env::temp_dir().join(format!("tt-openapi-{}", uuid::Uuid::new_v4()));
        let tables = Tables::new(SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap());
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let auth = Arc::new(Authenticator::new(AuthSettings {
            hs256_secret: Some("s".into()),
            ..Default::default()
        }));
        router(AppState { chat, auth }, custom_handler)
    }

    async fn call(app: &Router, method: &str, path: &str) -> (StatusCode, Vec<u8>) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, body.to_vec())
    }

    /// The document as the router serves it.
    async fn served(app: &Router) -> Value {
        let (status, body) = call(app, "GET", "/api/openapi.json").await;
        assert_eq!(status, StatusCode::OK);
        serde_json::from_slice(&body).unwrap()
    }

    /// Every `$ref` anywhere in `value`.
    fn refs<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("$ref", Value::String(target)) => found.push(target),
                        _ => refs(inner, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, found)),
            _ => {}
        }
    }

    /// `(METHOD, path)` of every operation in the document.
    fn operations(doc: &Value) -> BTreeSet<(String, String)> {
        let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
        let mut found = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if methods.contains(&method.as_str()) {
                    found.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        found
    }

    /// `(METHOD, path)` of every function the host declares (the Functions app's table, which
    /// `function_folders_match_the_routes` ties to `functions/<name>/function.json`), less the
    /// keyed ones (the notification webhook) on a host without them.
    fn declared(custom_handler: bool) -> BTreeSet<(String, String)> {
        http_functions()
            .into_iter()
            .filter(|f| custom_handler || f.auth_level == AuthLevel::Anonymous)
            .flat_map(|f| {
                f.methods
                    .into_iter()
                    .map(move |m| (m.to_uppercase(), format!("/api/{}", f.route)))
            })
            .collect()
    }

    /// A concrete request path for a documented one.
    fn concrete(path: &str) -> String {
        path.replace("{roomId}", &uuid::Uuid::new_v4().to_string())
            .replace("{messageId}", "2516062689814758707")
            .replace("{userId}", "bob")
            .replace("{roleId}", &uuid::Uuid::new_v4().to_string())
            .replace("{emoji}", "%F0%9F%91%8D")
    }

    #[tokio::test]
    async fn the_served_document_is_openapi_with_every_ref_defined_and_exactly_the_routers_routes() {
        for custom_handler in [false, true] {
            let host = if custom_handler { "Functions app" } else { "self-hosted" };
            let app = app(custom_handler).await;
            let doc = served(&app).await;

            let spec = oas3::from_json(doc.to_string()).unwrap_or_else(|e| panic!("{host}: not OpenAPI 3.1: {e}"));
            spec.validate_version().unwrap();

            let mut targets = Vec::new();
            refs(&doc, &mut targets);
            assert!(!targets.is_empty());
            for target in targets {
                let pointer = target
                    .strip_prefix('#')
                    .unwrap_or_else(|| panic!("{target} is not local"));
                assert!(doc.pointer(pointer).is_some(), "{host}: {target} is not defined");
            }

            let documented = operations(&doc);
            let expected = declared(custom_handler);
            assert_eq!(
                documented.difference(&expected).collect::<Vec<_>>(),
                Vec::<&(String, String)>::new(),
                "{host}: documented but not served"
            );
            assert_eq!(
                expected.difference(&documented).collect::<Vec<_>>(),
                Vec::<&(String, String)>::new(),
                "{host}: served but not documented"
            );
            for function in http_functions()
                .into_iter()
                .filter(|f| f.auth_level == AuthLevel::Anonymous || custom_handler)
            {
                let path = format!("/api/{}", function.route);
                let method = function.methods[0];
                assert_eq!(
                    doc["paths"][&path][method]["operationId"], function.name,
                    "{host}: {method} {path}"
                );
            }

            // The router agrees: every documented operation is routed, and every other method
            // on a documented path is not.
            for path in doc["paths"].as_object().unwrap().keys() {
                let request_path = concrete(path);
                for method in ["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH"] {
                    let (status, body) = call(&app, method, &request_path).await;
                    let routed = status != StatusCode::METHOD_NOT_ALLOWED
                        && !(status == StatusCode::NOT_FOUND
                            && String::from_utf8_lossy(&body).contains("no such route"));
                    let listed = documented.contains(&(method.to_owned(), path.clone()));
                    assert_eq!(routed, listed, "{host}: {method} {path} answered {status}");
                }
            }
            // And the webhook is nowhere on a host that does not serve it.
            if !custom_handler {
                let (status, _) = call(&app, "POST", "/api/events/notifications").await;
                assert_eq!(status, StatusCode::NOT_FOUND);
            }
        }
    }

    /// The request limits the server enforces are in the document, so a client generated from
    /// it does not send what is refused.
    #[tokio::test]
    async fn the_document_states_the_limits_the_server_enforces() {
        use tabletalk::messages::{feed, forward, polls, read};
        use tabletalk::{roles, rooms};
        let doc = served(&app(false).await).await;
        let schemas = "/components/schemas";
        let expected = [
            (format!("{schemas}/NewRole/properties/position/minimum"), json!(1)),
            (
                format!("{schemas}/NewRole/properties/position/maximum"),
                json!(roles::MAX_POSITION),
            ),
            (format!("{schemas}/RoleChange/properties/position/minimum"), json!(1)),
            (
                format!("{schemas}/RoomChange/properties/slowmodeSeconds/maximum"),
                json!(rooms::settings::MAX_SLOWMODE_SECONDS),
            ),
            (
                format!("{schemas}/RoomChange/properties/retentionSeconds/minimum"),
                json!(1),
            ),
            (
                format!("{schemas}/RoomChange/properties/retentionSeconds/maximum"),
                json!(rooms::settings::MAX_RETENTION_SECONDS),
            ),
            (
                format!("{schemas}/WordFilterSettings/properties/timeoutSeconds/minimum"),
                json!(1),
            ),
            (format!("{schemas}/Forward/properties/roomIds/minItems"), json!(1)),
            (
                format!("{schemas}/Forward/properties/roomIds/maxItems"),
                json!(forward::MAX_FORWARD_ROOMS),
            ),
            (
                format!("{schemas}/NewPoll/properties/options/minItems"),
                json!(polls::MIN_OPTIONS),
            ),
            (
                format!("{schemas}/NewPoll/properties/options/maxItems"),
                json!(polls::MAX_OPTIONS),
            ),
            (
                format!("{schemas}/MessageChangesInput/properties/conversations/maxItems"),
                json!(feed::MAX_CONVERSATIONS),
            ),
            (format!("{schemas}/Edit/properties/text/minLength"), json!(1)),
        ];
        for (pointer, value) in expected {
            assert_eq!(doc.pointer(&pointer), Some(&value), "{pointer}");
        }
        // Text fields carry the bounds and the pattern of the one rule that checks them
        // (`tabletalk::text`), inline (beside a null when the field may be left out).
        let text = |schema: &str, property: &str| {
            let field = &doc["components"]["schemas"][schema]["properties"][property];
            let strings = field["oneOf"]
                .as_array()
                .map(|all| all.iter().find(|s| s["type"] == "string"));
            strings.flatten().unwrap_or(field).clone()
        };
        for (schema, property, max) in [
            ("NewRoom", "name", rooms::MAX_ROOM_NAME_CHARS),
            ("RoomChange", "name", rooms::MAX_ROOM_NAME_CHARS),
            ("NewRole", "name", roles::MAX_ROLE_NAME_CHARS),
            ("RoleChange", "name", roles::MAX_ROLE_NAME_CHARS),
            ("NewPoll", "question", polls::MAX_QUESTION_CHARS),
        ] {
            let field = text(schema, property);
            assert_eq!(field["minLength"], 1, "{schema}.{property}: {field}");
            assert_eq!(field["maxLength"], max, "{schema}.{property}: {field}");
            assert_eq!(
                field["pattern"],
                tabletalk::text::ONE_LINE,
                "{schema}.{property}: {field}"
            );
        }
        let description = text("NewRoom", "description");
        assert_eq!(description["pattern"], tabletalk::text::LINES, "{description}");
        for path in [
            "/api/rooms/{roomId}/messages",
            "/api/rooms/{roomId}/messages/{messageId}/thread",
        ] {
            let parameters = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
            let limit = parameters.iter().find(|p| p["name"] == "limit").unwrap();
            assert_eq!(limit["schema"]["minimum"], 1, "{path}");
            assert_eq!(limit["schema"]["maximum"], read::MAX_LIMIT, "{path}");
        }
        for schema in ["Timeout", "Ban"] {
            let until = doc["components"]["schemas"][schema]["properties"]["until"]["description"]
                .as_str()
                .unwrap_or_default();
            assert!(until.contains("in the future"), "{schema}.until: {until:?}");
        }
        let info = doc["info"]["description"].as_str().unwrap_or_default();
        assert!(info.contains("`3.0`"), "integers written as floats: {info:?}");
        assert!(info.contains("given empty"), "empty query parameters: {info:?}");
    }
}
