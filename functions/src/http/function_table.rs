//! The Functions app's HTTP functions, read off the OpenAPI document of the router
//! (`http::api`) rather than listed a second time: each operation is a function named by its
//! `operationId`, at its method and its path less the host's `/api/` prefix. `package` ships,
//! and checks, one `functions/<name>/function.json` for each, so a handler registered in the
//! router is a function at once and a package without its folder is refused.

use utoipa::openapi::OpenApi;
use utoipa::openapi::path::{Operation, PathItem};

/// Who the Functions host lets through to a function, as `function.json`'s `authLevel` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthLevel {
    /// Everyone: the API checks its callers' bearer tokens itself (`http::user_api`).
    Anonymous,
    /// Only callers holding the function key: the platform's doors (`http::keyed_api`).
    Function,
}

impl AuthLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthLevel::Anonymous => "anonymous",
            AuthLevel::Function => "function",
        }
    }
}

/// An HTTP function as the Functions host knows it: its folder name, methods (lower case, in
/// `function.json`'s order) and route (under the `api` prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFunction {
    pub name: String,
    pub methods: Vec<&'static str>,
    pub route: String,
    pub auth_level: AuthLevel,
}

/// Every HTTP function of the Functions app: the user API's, then the keyed ones.
///
/// # Panics
/// If the router declares an operation the host cannot serve as a function (see
/// `functions_of`); the unit tests derive the table, so such a router does not get past them.
pub fn http_functions() -> Vec<HttpFunction> {
    let derive = |doc: OpenApi, auth_level| {
        functions_of(&doc, auth_level).unwrap_or_else(|e| panic!("the router declares no function table: {e}"))
    };
    let mut functions = derive(super::user_api().into_openapi(), AuthLevel::Anonymous);
    functions.extend(derive(super::keyed_api().into_openapi(), AuthLevel::Function));
    functions
}

/// The functions a document's operations make. An `OPTIONS` operation is the preflight of the
/// one other operation on its path (the CloudEvents webhook handshake): the host sends it to that
/// operation's function, whose methods then list `options` last, so it is no function of its
/// own. Refused: a path outside `/api/`, an operation without an `operationId`, a preflight
/// whose path has no other operation or more than one.
pub fn functions_of(doc: &OpenApi, auth_level: AuthLevel) -> Result<Vec<HttpFunction>, String> {
    let mut functions = Vec::new();
    for (path, item) in &doc.paths.paths {
        let route = path
            .strip_prefix("/api/")
            .ok_or_else(|| format!("{path} is outside the host's /api/ prefix"))?;
        let mut on_path = Vec::new();
        for (method, operation) in operations(item) {
            if method == "options" {
                continue;
            }
            let name = operation
                .operation_id
                .clone()
                .ok_or_else(|| format!("{method} {path} has no operationId"))?;
            on_path.push(HttpFunction {
                name,
                methods: vec![method],
                route: route.to_owned(),
                auth_level,
            });
        }
        if item.options.is_some() {
            match on_path.as_mut_slice() {
                [only] => only.methods.push("options"),
                _ => return Err(format!("options {path} is the preflight of no one operation")),
            }
        }
        functions.extend(on_path);
    }
    Ok(functions)
}

/// A path's operations with their methods as `function.json` writes them.
fn operations(item: &PathItem) -> impl Iterator<Item = (&'static str, &Operation)> {
    [
        ("get", &item.get),
        ("put", &item.put),
        ("post", &item.post),
        ("delete", &item.delete),
        ("options", &item.options),
        ("head", &item.head),
        ("patch", &item.patch),
        ("trace", &item.trace),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_ref().map(|operation| (method, operation)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(paths: serde_json::Value) -> OpenApi {
        serde_json::from_value(serde_json::json!({
            "openapi": "3.1.0",
            "info": { "title": "t", "version": "1" },
            "paths": paths,
        }))
        .unwrap()
    }

    fn function(name: &str, methods: &[&'static str], route: &str) -> HttpFunction {
        HttpFunction {
            name: name.into(),
            methods: methods.to_vec(),
            route: route.into(),
            auth_level: AuthLevel::Function,
        }
    }

    /// Each operation is its own function, named by its operationId; a preflight joins the one
    /// other operation on its path.
    #[test]
    fn each_operation_is_a_function_and_a_preflight_joins_its_paths_operation() {
        let doc = document(serde_json::json!({
            "/api/rooms": {
                "get": { "operationId": "listRooms", "responses": {} },
                "post": { "operationId": "createRoom", "responses": {} },
            },
            "/api/hook": {
                "options": { "operationId": "hookPreflight", "responses": {} },
                "post": { "operationId": "hook", "responses": {} },
            },
        }));
        assert_eq!(
            functions_of(&doc, AuthLevel::Function).unwrap(),
            vec![
                function("hook", &["post", "options"], "hook"),
                function("listRooms", &["get"], "rooms"),
                function("createRoom", &["post"], "rooms"),
            ]
        );
    }

    /// What the host could not route as functions is refused, not guessed at.
    #[test]
    fn a_document_the_host_cannot_route_as_functions_is_refused() {
        let refused = [
            serde_json::json!({ "/other": { "get": { "operationId": "x", "responses": {} } } }),
            serde_json::json!({ "/api/x": { "get": { "responses": {} } } }),
            serde_json::json!({ "/api/x": { "options": { "operationId": "x", "responses": {} } } }),
            serde_json::json!({ "/api/x": {
                "options": { "operationId": "p", "responses": {} },
                "get": { "operationId": "g", "responses": {} },
                "post": { "operationId": "q", "responses": {} },
            } }),
        ];
        for paths in refused {
            assert!(
                functions_of(&document(paths.clone()), AuthLevel::Anonymous).is_err(),
                "{paths}"
            );
        }
    }

    /// Only the Event Grid webhook is behind the function key, and the self-hosted server does
    /// not serve it; every other function is anonymous at the host.
    #[test]
    fn only_the_webhook_is_keyed() {
        let functions = http_functions();
        let keyed: Vec<&str> = functions
            .iter()
            .filter(|f| f.auth_level == AuthLevel::Function)
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(keyed, ["notificationEvents"]);
        let webhook = functions.iter().find(|f| f.name == "notificationEvents").unwrap();
        assert_eq!(webhook.methods, ["post", "options"]);
        assert_eq!(webhook.route, "events/notifications");
        let self_hosted = super::super::api(false).into_openapi();
        assert!(!self_hosted.paths.paths.contains_key("/api/events/notifications"));
    }
}
