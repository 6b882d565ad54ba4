//! Every kind of bad input gets its documented 4xx JSON error, never a 500.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{Backend, SECRET, spawn_app, token_with};

#[tokio::test]
async fn bad_requests_get_documented_errors() {
    let app = spawn_app(&Backend::embedded());
    let room = app.create_room("alice").await;
    let other_room = app.create_room("alice").await;
    let messages = format!("{}/api/rooms/{room}/messages", app.base);
    let alice = crate::helpers::token("alice");

    let malformed = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .header("content-type", "application/json")
        .body("{\"text\":");
    assert_error(malformed, 400, "BAD_REQUEST").await;
    let wrong_shape = app.http.post(&messages).bearer_auth(&alice).json(&json!({ "text": 5 }));
    assert_error(wrong_shape, 422, "VALIDATION").await;
    let unknown_field = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .json(&json!({ "text": "x", "admin": true }));
    assert_error(unknown_field, 422, "VALIDATION").await;
    let not_json = app.http.post(&messages).bearer_auth(&alice).body("text=hi");
    assert_error(not_json, 400, "BAD_REQUEST").await;
    let oversize = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .json(&json!({ "text": "x".repeat(300 * 1024) }));
    assert_error(oversize, 413, "PAYLOAD_TOO_LARGE").await;
    let too_long = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .json(&json!({ "text": "x".repeat(10_001) }));
    assert_error(too_long, 422, "VALIDATION").await;
    let script = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .json(&json!({ "text": "<script>alert(1)</script>" }));
    assert_error(script, 422, "VALIDATION").await;
    let bad_client_id = app
        .http
        .post(&messages)
        .bearer_auth(&alice)
        .json(&json!({ "text": "x", "clientId": "a b" }));
    assert_error(bad_client_id, 422, "VALIDATION").await;

    // Script mixed into text is stripped, the rest stored.
    let mixed = app
        .send(
            "alice",
            &room,
            "<b onclick=\"x()\">hi</b><script>alert(1)</script>",
            None,
        )
        .await;
    assert_eq!(
        (mixed.status, mixed.body["text"].as_str()),
        (StatusCode::CREATED, Some("<b>hi</b>"))
    );

    let unknown_room = format!("{}/api/rooms/{}/messages", app.base, uuid::Uuid::new_v4());
    assert_error(app.http.get(&unknown_room).bearer_auth(&alice), 404, "NOT_FOUND").await;
    let not_a_room = format!("{}/api/rooms/not-a-uuid/messages", app.base);
    assert_error(app.http.get(&not_a_room).bearer_auth(&alice), 404, "NOT_FOUND").await;
    let bad_message = format!("{messages}/12345");
    assert_error(app.http.get(&bad_message).bearer_auth(&alice), 404, "NOT_FOUND").await;

    for _ in 0..3 {
        app.send("alice", &other_room, "x", None).await;
    }
    let first_page_cursor = async |room: &str| {
        let page = app
            .call(
                Method::GET,
                &format!("/api/rooms/{room}/messages?limit=1"),
                Some("alice"),
                None,
            )
            .await;
        page.body["nextCursor"].as_str().unwrap().to_owned()
    };
    let foreign = first_page_cursor(&other_room).await;
    let desc_cursor = first_page_cursor(&room).await;
    for query in [
        format!("cursor={foreign}"),
        format!("order=asc&cursor={desc_cursor}"),
        "cursor=garbage!!".to_owned(),
        "cursor=eyJ2IjoxLCJyIjoieCJ9".to_owned(),
        "limit=0".to_owned(),
        "limit=101".to_owned(),
        "limit=-1".to_owned(),
        "limit=abc".to_owned(),
        "order=sideways".to_owned(),
    ] {
        assert_error(
            app.http.get(format!("{messages}?{query}")).bearer_auth(&alice),
            400,
            "BAD_REQUEST",
        )
        .await;
    }

    assert_error(app.http.get(&messages), 401, "UNAUTHORIZED").await;
    assert_error(
        app.http.get(&messages).bearer_auth(token_with("alice", SECRET, -3600)),
        401,
        "UNAUTHORIZED",
    )
    .await;
    assert_error(
        app.http.get(&messages).bearer_auth(token_with("alice", "wrong", 3600)),
        401,
        "UNAUTHORIZED",
    )
    .await;
    assert_error(app.http.get(&messages).bearer_auth("not.a.token"), 401, "UNAUTHORIZED").await;
    assert_error(
        app.http.get(&messages).header("authorization", "Basic YWxpY2U6eA=="),
        401,
        "UNAUTHORIZED",
    )
    .await;

    assert_error(app.http.get(format!("{}/api/nothing", app.base)), 404, "NOT_FOUND").await;
    assert_error(app.http.delete(&messages).bearer_auth(&alice), 405, "BAD_REQUEST").await;
    let empty_name = app
        .http
        .post(format!("{}/api/rooms", app.base))
        .bearer_auth(&alice)
        .json(&json!({ "name": "  " }));
    assert_error(empty_name, 422, "VALIDATION").await;
}

async fn assert_error(request: reqwest::RequestBuilder, status: u16, code: &str) {
    let response = request.send().await.expect("request");
    assert_eq!(response.status().as_u16(), status);
    let body: serde_json::Value = response.json().await.expect("a JSON error body");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

#[tokio::test]
async fn openapi_and_request_ids_are_served() {
    let app = spawn_app(&Backend::embedded());
    let response = app
        .http
        .get(format!("{}/api/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().contains_key("x-request-id"));
    let doc: serde_json::Value = response.json().await.unwrap();
    for path in [
        "/api/rooms",
        "/api/rooms/{roomId}/messages",
        "/api/rooms/{roomId}/messages/{messageId}",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    let echoed = app
        .http
        .get(format!("{}/api/openapi.json", app.base))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "abc-123");
}

/// Every route the document gives a JSON body refuses an array, which the document does not
/// allow (serde would read one as a struct's fields in order). Driven from the served document,
/// so a new route is covered when it is added; the path parameters name real things where the
/// route could otherwise answer before it reads the body.
#[tokio::test]
async fn every_json_body_must_be_an_object() {
    let app = spawn_app(&Backend::embedded());
    let room = app.create_room("alice").await;
    let message = app.post("alice", &room, "hello").await;
    let hook = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/webhooks"),
            json!({ "name": "CI" }),
        )
        .await;
    let hook_url = hook.body["url"].as_str().unwrap().to_owned();
    let doc: serde_json::Value = app
        .http
        .get(format!("{}/api/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    for (template, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            if operation["requestBody"]["content"]["application/json"].is_null() {
                continue;
            }
            let path = match template.as_str() {
                "/api/hooks/{webhookId}/{token}" => hook_url.clone(),
                _ => template
                    .replace("{roomId}", &room)
                    .replace("{messageId}", &message)
                    .replace("{userId}", "alice")
                    .replace("{emoji}", "%F0%9F%91%8D")
                    .replace(['{', '}'], ""),
            };
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            for body in [json!(["Message", "array body"]), json!([null, null])] {
                let response = app
                    .http
                    .request(method.clone(), format!("{}{path}", app.base))
                    .bearer_auth(crate::helpers::token("alice"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                let answer: serde_json::Value = response.json().await.unwrap_or_default();
                // With every path parameter naming a real thing, the body is what is refused;
                // a made-up one may be refused first, as missing.
                let real = [
                    "{roomId}",
                    "{messageId}",
                    "{userId}",
                    "{emoji}",
                    "{webhookId}",
                    "{token}",
                ]
                .iter()
                .fold(template.clone(), |t, known| t.replace(known, ""))
                .find('{')
                .is_none();
                let expected = match real {
                    true => (422..423).contains(&status) && answer["code"] == "VALIDATION",
                    false => (400..500).contains(&status) && answer["code"].is_string(),
                };
                assert!(expected, "{method} {path} with {body}: {status} {answer}");
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} routes with a JSON body");
    // The routes where the array was once stored: refused as a wrong shape, nothing stored.
    for path in [format!("/api/rooms/{room}/messages"), "/api/rooms".to_owned(), hook_url] {
        let refused = app
            .http
            .post(format!("{}{path}", app.base))
            .bearer_auth(crate::helpers::token("alice"))
            .json(&json!(["Message", "array body"]));
        assert_error(refused, 422, "VALIDATION").await;
    }
    assert_eq!(
        crate::helpers::posts(app.read_all("alice", &room, "asc", 100).await).len(),
        1
    );
}

/// What the document allows, the server takes: a query parameter given empty is one not given,
/// a whole number written `5.0` or `5e0` is the integer 5 (JSON Schema counts it so), and a
/// text field's bounds are those of the text as sent (a control character anywhere refused,
/// surrounding spaces stored trimmed).
#[tokio::test]
async fn what_the_document_allows_is_accepted_as_it_says() {
    let app = spawn_app(&Backend::embedded());
    let room = app.create_room("alice").await;
    app.post("alice", &room, "hello").await;
    let read = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/messages?cursor=&around=&order=desc"),
            Some("alice"),
            None,
        )
        .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    let directory = app
        .call(Method::GET, "/api/rooms/directory?cursor=&q=", Some("alice"), None)
        .await;
    assert_eq!(directory.status, StatusCode::OK, "{}", directory.body);

    for limit in [json!(5.0), json!(5e0), json!(5)] {
        let body = json!({ "input": { "serverId": "default", "conversations": [{ "conversationId": room }], "limit": limit } });
        let changes = app
            .call(Method::POST, "/api/messageChanges", Some("alice"), Some(body))
            .await;
        assert_eq!(changes.status, StatusCode::OK, "{limit}: {}", changes.body);
    }
    let fraction = json!({ "input": { "serverId": "default", "conversations": [], "limit": 5.5 } });
    app.call(Method::POST, "/api/messageChanges", Some("alice"), Some(fraction))
        .await
        .assert_error(422, "VALIDATION");

    let trimmed = app
        .call(
            Method::POST,
            "/api/rooms",
            Some("alice"),
            Some(json!({ "name": "  spaced  " })),
        )
        .await;
    assert_eq!(trimmed.status, StatusCode::CREATED, "{}", trimmed.body);
    assert_eq!(trimmed.body["name"], "spaced");
    for name in ["\tleading tab", "trailing newline\n", " "] {
        app.call(Method::POST, "/api/rooms", Some("alice"), Some(json!({ "name": name })))
            .await
            .assert_error(422, "VALIDATION");
    }
}
