//! AWS Lambda: the binary with `AWS_LAMBDA_RUNTIME_API` set serves the same router through
//! `lambda_http`. A small Lambda Runtime API stand-in (next invocation / response / error)
//! hands it API Gateway HTTP API (v2) events and collects its answers.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::helpers::{SECRET, token};

/// The Runtime API stand-in: invocations queued by the test, answers routed back by id.
#[derive(Clone)]
struct Runtime {
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<(String, Value)>>>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
}

async fn next(State(runtime): State<Runtime>) -> impl IntoResponse {
    let (id, event) = runtime.queue.lock().await.recv().await.expect("the test is running");
    let mut headers = HeaderMap::new();
    let deadline = chrono::Utc::now().timestamp_millis() + 30_000;
    headers.insert("lambda-runtime-aws-request-id", HeaderValue::from_str(&id).unwrap());
    headers.insert("lambda-runtime-deadline-ms", HeaderValue::from(deadline));
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        HeaderValue::from_static("arn:aws:lambda:eu-west-1:123456789012:function:tabletalk"),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        HeaderValue::from_static("Root=1-67891233-abcdef012345678912345678;Parent=0123456789abcdef;Sampled=0"),
    );
    (headers, Json(event))
}

async fn respond(State(runtime): State<Runtime>, Path(id): Path<String>, body: axum::body::Bytes) -> StatusCode {
    let body: Value =
        serde_json::from_slice(&body).unwrap_or_else(|_| json!({ "unreadable": String::from_utf8_lossy(&body) }));
    if let Some(waiter) = runtime.waiting.lock().unwrap().remove(&id) {
        let _ = waiter.send(body);
    }
    StatusCode::ACCEPTED
}

async fn fail(State(runtime): State<Runtime>, Path(id): Path<String>, body: String) -> StatusCode {
    if let Some(waiter) = runtime.waiting.lock().unwrap().remove(&id) {
        let _ = waiter.send(json!({ "invocationError": body }));
    }
    StatusCode::ACCEPTED
}

struct Function {
    child: Child,
    invocations: mpsc::Sender<(String, Value)>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Function {
    async fn start() -> Function {
        let (invocations, queue) = mpsc::channel(16);
        let runtime = Runtime {
            queue: Arc::new(tokio::sync::Mutex::new(queue)),
            waiting: Arc::default(),
        };
        let router = axum::Router::new()
            .route("/2018-06-01/runtime/invocation/next", axum::routing::get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                axum::routing::post(respond),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", axum::routing::post(fail))
            .fallback(|uri: axum::http::Uri| async move {
                eprintln!("runtime stand-in: unexpected {uri}");
                StatusCode::NOT_FOUND
            })
            .with_state(runtime.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        let data_dir = std::env::temp_dir().join(format!("tt-lambda-{}", uuid::Uuid::new_v4().simple()));
        let child = Command::new(env!("CARGO_BIN_EXE_tabletalk"))
            .args(["serve", "--settings", "none"])
            .env_remove("FUNCTIONS_CUSTOMHANDLER_PORT")
            .env("AWS_LAMBDA_RUNTIME_API", &api)
            .env("AWS_LAMBDA_FUNCTION_NAME", "tabletalk")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/tabletalk")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/30/[$LATEST]0123456789")
            .env("TABLETALK_JWT_SECRET", SECRET)
            .env("TABLETALK_STORAGE_CONNECTION", "")
            .env("TABLETALK_DATA_DIR", &data_dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tabletalk");
        Function {
            child,
            invocations,
            waiting: runtime.waiting,
        }
    }

    /// Invokes the function with an API Gateway HTTP API event; returns its response.
    async fn invoke(&self, method: &str, path: &str, query: &str, user: Option<&str>, body: Option<Value>) -> Value {
        let id = uuid::Uuid::new_v4().to_string();
        let (answer, answered) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id.clone(), answer);
        let mut headers = json!({
            "content-type": "application/json",
            "host": "abc123.execute-api.eu-west-1.amazonaws.com",
            "user-agent": "curl/8.5.0",
        });
        if let Some(user) = user {
            headers["authorization"] = json!(format!("Bearer {}", token(user)));
        }
        let parameters: HashMap<&str, &str> = query.split('&').filter_map(|p| p.split_once('=')).collect();
        let event = json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": query,
            "headers": headers,
            "queryStringParameters": if parameters.is_empty() { Value::Null } else { json!(parameters) },
            "requestContext": {
                "accountId": "123456789012", "apiId": "abc123",
                "domainName": "abc123.execute-api.eu-west-1.amazonaws.com", "domainPrefix": "abc123",
                "http": { "method": method, "path": path, "protocol": "HTTP/1.1",
                    "sourceIp": "198.51.100.7", "userAgent": "curl/8.5.0" },
                "requestId": id, "routeKey": "$default", "stage": "$default",
                "time": "30/Nov/2026:12:00:00 +0000", "timeEpoch": 1_796_040_000_000_i64
            },
            "body": body.map(|b| b.to_string()),
            "isBase64Encoded": false
        });
        self.invocations.send((id, event)).await.unwrap();
        tokio::time::timeout(Duration::from_secs(30), answered)
            .await
            .expect("the function answered within 30 s")
            .unwrap()
    }
}

/// The JSON body of an API Gateway v2 response.
fn body_of(response: &Value) -> Value {
    assert_eq!(response["isBase64Encoded"], false, "{response}");
    serde_json::from_str(response["body"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn lambda_serves_sending_and_reading_messages() {
    let function = Function::start().await;
    let created = function
        .invoke(
            "POST",
            "/api/rooms",
            "",
            Some("alice"),
            Some(json!({ "name": "on lambda" })),
        )
        .await;
    assert_eq!(created["statusCode"], 201, "{created}");
    let room = body_of(&created)["id"].as_str().unwrap().to_owned();

    let messages = format!("/api/rooms/{room}/messages");
    let sent = function
        .invoke(
            "POST",
            &messages,
            "",
            Some("alice"),
            Some(json!({ "text": "<p>hello from lambda</p>" })),
        )
        .await;
    assert_eq!(sent["statusCode"], 201, "{sent}");
    assert!(
        sent["headers"]["content-type"]
            .as_str()
            .unwrap()
            .starts_with("application/json")
    );
    let id = body_of(&sent)["id"].as_str().unwrap().to_owned();

    let read = function.invoke("GET", &messages, "limit=10", Some("alice"), None).await;
    assert_eq!(read["statusCode"], 200, "{read}");
    let page = body_of(&read);
    let texts: Vec<(&str, &str)> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "Message")
        .map(|m| (m["id"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(texts, [(id.as_str(), "<p>hello from lambda</p>")]);

    // Errors are the same JSON as everywhere else.
    let anonymous = function.invoke("GET", &messages, "", None, None).await;
    assert_eq!(anonymous["statusCode"], 401);
    assert_eq!(body_of(&anonymous)["code"], "UNAUTHORIZED");
    let bad_limit = function
        .invoke("GET", &messages, "limit=1000", Some("alice"), None)
        .await;
    assert_eq!(bad_limit["statusCode"], 400, "{bad_limit}");
}
