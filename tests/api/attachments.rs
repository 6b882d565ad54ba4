//! Attachments end to end, on the embedded store and on Azurite (tables and blob): an upload
//! link handed out, the file uploaded with a plain HTTP client, sent in a message, read back
//! in reads and the change feed, and downloaded by another member through tabletalk's
//! redirect; every refusal an upload or a send can meet; and the lifecycle — a tombstone, retention, room
//! deletion and uploads never attached leave no object behind, and a forward gives each
//! target room its own copy.

use chrono::{Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{create_message, forward};
use crate::helpers::{Backend, TestApp, TestClock, backend_tests, spawn_app, spawn_app_with, token_with};

backend_tests!(
    an_uploaded_file_sent_in_a_message_downloads_for_another_member_with_its_bytes_and_headers,
    a_non_member_downloading_an_attachment_is_told_it_is_missing,
    an_expired_download_link_is_refused_by_the_store,
    an_upload_declared_too_large_or_of_a_type_not_allowed_is_refused,
    a_send_naming_a_file_whose_size_or_type_differs_from_the_declared_is_refused,
    a_send_naming_a_file_never_uploaded_is_refused_as_missing,
    a_send_naming_another_users_or_another_rooms_upload_is_refused_as_missing,
    an_upload_with_a_tampered_signature_is_refused_by_the_store,
    an_attachment_goes_on_one_message_only_and_a_message_carries_at_most_ten,
    a_tombstone_removes_the_messages_objects,
    deleting_a_room_deletes_its_objects,
    retention_purges_the_objects_of_expired_messages,
    uploads_never_attached_are_deleted_after_a_day,
    a_forward_into_two_rooms_gives_each_its_own_copy_which_outlives_the_source,
    bad_input_on_the_attachment_routes_gets_documented_errors,
    an_upload_link_used_again_after_its_message_was_deleted_leaves_no_object_after_a_day,
    an_upload_link_used_after_its_room_was_deleted_leaves_no_object_after_a_day,
    a_file_whose_size_or_type_differs_from_the_declared_is_deleted_when_a_send_names_it,
);

/// Two servers on one data directory sign with one key: an upload link handed out by one is
/// taken by the other, and a file uploaded through either downloads through both.
#[tokio::test]
async fn two_servers_on_one_data_directory_accept_each_others_links() {
    let backend = Backend::embedded();
    let (first, second) = (spawn_app(&backend), spawn_app(&backend));
    let room = first.create_room("alice").await;
    let mut answer = declare(&first, "alice", &room, "a.txt", "text/plain", 5).await.body;
    let url = answer["upload"]["url"]
        .as_str()
        .unwrap()
        .replace(&first.base, &second.base);
    answer["upload"]["url"] = json!(url);
    assert_eq!(put_file(&answer, b"hello", None).await, StatusCode::CREATED);
    let id = answer["attachment"]["id"].as_str().unwrap();
    let sent = send_with(&second, "alice", &room, &[id]).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let (_, got) = download(&first, "alice", sent.body["attachments"][0]["url"].as_str().unwrap()).await;
    assert_eq!(got.unwrap().bytes().await.unwrap().as_ref(), b"hello");
}

/// The embedded store refuses a body larger than the largest attachment with the documented
/// error, before writing anything.
#[tokio::test]
async fn the_embedded_store_refuses_a_body_over_the_maximum_as_too_large() {
    let backend = Backend::embedded();
    let app = spawn_app_with(&backend, &[("TABLETALK_ATTACHMENT_MAX_BYTES", "100")]);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.txt", "text/plain", 100).await.body;
    let mut request = no_redirects()
        .put(answer["upload"]["url"].as_str().unwrap())
        .body(vec![b'x'; 5000]);
    for (name, value) in answer["upload"]["headers"].as_object().unwrap() {
        request = request.header(name, value.as_str().unwrap());
    }
    let refused = crate::helpers::Reply::from(request.send().await.unwrap()).await;
    refused.assert_error(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `createUpload` as `user`; the raw reply.
pub(crate) async fn declare(
    app: &TestApp,
    user: &str,
    room: &str,
    name: &str,
    mime: &str,
    size: u64,
) -> crate::helpers::Reply {
    let body = json!({ "name": name, "mime": mime, "size": size });
    app.call(
        Method::POST,
        &format!("/api/rooms/{room}/uploads"),
        Some(user),
        Some(body),
    )
    .await
}

/// Uploads `bytes` as the answer to `createUpload` says, with `content_type` (the declared one
/// unless a test lies); the store's status.
async fn put_file(answer: &Value, bytes: &[u8], content_type: Option<&str>) -> StatusCode {
    let upload = &answer["upload"];
    assert_eq!(upload["method"], "PUT");
    let mut request = no_redirects().put(upload["url"].as_str().unwrap()).body(bytes.to_vec());
    for (name, value) in upload["headers"].as_object().unwrap() {
        let value = match (name.eq_ignore_ascii_case("content-type"), content_type) {
            (true, Some(lie)) => lie,
            _ => value.as_str().unwrap(),
        };
        request = request.header(name, value);
    }
    request.send().await.unwrap().status()
}

/// Declares and uploads a file; its attachment id.
pub(crate) async fn uploaded(app: &TestApp, user: &str, room: &str, name: &str, mime: &str, bytes: &[u8]) -> String {
    let answer = declare(app, user, room, name, mime, bytes.len() as u64).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert!(put_file(&answer.body, bytes, None).await.is_success());
    answer.body["attachment"]["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn send_with(app: &TestApp, user: &str, room: &str, ids: &[&str]) -> crate::helpers::Reply {
    create_message(app, user, room, json!({ "text": "see attached", "attachments": ids })).await
}

/// Follows tabletalk's download URL by hand: its redirect as `user`, then the store's answer.
pub(crate) async fn download(app: &TestApp, user: &str, url: &str) -> (StatusCode, Option<reqwest::Response>) {
    let redirect = no_redirects()
        .get(format!("{}{url}", app.base))
        .bearer_auth(token_with(user, &app.secret, 3600))
        .send()
        .await
        .unwrap();
    if redirect.status() != StatusCode::FOUND {
        return (redirect.status(), None);
    }
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    (
        StatusCode::FOUND,
        Some(no_redirects().get(location).send().await.unwrap()),
    )
}

/// Every object the app keeps under `prefix` (a room id and `/`).
pub(crate) async fn objects_under(backend: &Backend, prefix: &str) -> Vec<String> {
    let objects = backend.objects().await;
    objects
        .list(prefix)
        .await
        .unwrap()
        .iter()
        .map(|k| k.to_string())
        .collect()
}

pub(crate) fn png(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

async fn an_uploaded_file_sent_in_a_message_downloads_for_another_member_with_its_bytes_and_headers(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let bytes = png(1000);
    let answer = declare(&app, "alice", &room, "holiday photo.png", "image/png", 1000).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(
        answer.body["attachment"],
        json!({ "id": answer.body["attachment"]["id"], "name": "holiday photo.png", "mime": "image/png", "size": 1000 })
    );
    assert!(put_file(&answer.body, &bytes, None).await.is_success());
    let id = answer.body["attachment"]["id"].as_str().unwrap();

    let sent = send_with(&app, "alice", &room, &[id]).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let url = format!("/api/rooms/{room}/attachments/{id}");
    let expected = json!([{ "id": id, "name": "holiday photo.png", "mime": "image/png", "size": 1000, "url": url }]);
    assert_eq!(sent.body["attachments"], expected);

    // Reads and the change feed carry the list.
    let read = app
        .call(Method::GET, &format!("/api/rooms/{room}/messages"), Some("bob"), None)
        .await;
    let message = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == sent.body["id"])
        .unwrap_or_else(|| panic!("sent message not read back: {}", read.body))
        .clone();
    assert_eq!(message["attachments"], expected);
    let changes = app.changes("bob", &[(&room, None)], None).await;
    let change = changes.body["messageChanges"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["message"]["id"] == sent.body["id"])
        .unwrap_or_else(|| panic!("no change for the message: {}", changes.body))
        .clone();
    assert_eq!(change["message"]["attachments"], expected);

    let (status, got) = download(&app, "bob", &url).await;
    assert_eq!(status, StatusCode::FOUND);
    let got = got.unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.headers()["content-type"], "image/png");
    assert_eq!(
        got.headers()["content-disposition"],
        "attachment; filename=\"holiday_photo.png\""
    );
    assert_eq!(got.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

async fn a_non_member_downloading_an_attachment_is_told_it_is_missing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    assert_eq!(
        send_with(&app, "alice", &room, &[&id]).await.status,
        StatusCode::CREATED
    );
    let url = format!("/api/rooms/{room}/attachments/{id}");
    let (status, _) = download(&app, "mallory", &url).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // And a member asking for an id that is not there gets the same.
    let (status, _) = download(
        &app,
        "alice",
        &format!("/api/rooms/{room}/attachments/{}", "0".repeat(32)),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn an_expired_download_link_is_refused_by_the_store(backend: Backend) {
    let mut clock = TestClock::new();
    let app = clock.spawn(&backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    assert_eq!(
        send_with(&app, "alice", &room, &[&id]).await.status,
        StatusCode::CREATED
    );
    // The link is signed ten minutes ago, by the server's clock, and used now: by the server's
    // clock for the embedded store, by Azurite's own (the system's) for Azure.
    clock.advance_s(-600);
    let redirect = no_redirects()
        .get(format!("{}/api/rooms/{room}/attachments/{id}", app.base))
        .bearer_auth(token_with("bob", &app.secret, 3600))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), StatusCode::FOUND);
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    clock.advance_s(600);
    let got = no_redirects().get(location).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::FORBIDDEN);
}

async fn an_upload_declared_too_large_or_of_a_type_not_allowed_is_refused(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_ATTACHMENT_MAX_BYTES", "2000")]);
    let room = app.create_room("alice").await;
    declare(&app, "alice", &room, "big.png", "image/png", 2001)
        .await
        .assert_error(413, "PAYLOAD_TOO_LARGE");
    declare(&app, "alice", &room, "page.html", "text/html", 10)
        .await
        .assert_error(422, "VALIDATION");
    assert_eq!(
        declare(&app, "alice", &room, "ok.png", "image/png", 2000).await.status,
        StatusCode::CREATED
    );
}

async fn a_send_naming_a_file_whose_size_or_type_differs_from_the_declared_is_refused(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    // 5000 bytes declared as 1000.
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 1000).await;
    assert!(put_file(&answer.body, &png(5000), None).await.is_success());
    let id = answer.body["attachment"]["id"].as_str().unwrap();
    send_with(&app, "alice", &room, &[id])
        .await
        .assert_error(422, "VALIDATION");
    // A PNG declared, HTML uploaded.
    let answer = declare(&app, "alice", &room, "b.png", "image/png", 100).await;
    assert!(put_file(&answer.body, &png(100), Some("text/html")).await.is_success());
    let id = answer.body["attachment"]["id"].as_str().unwrap();
    send_with(&app, "alice", &room, &[id])
        .await
        .assert_error(422, "VALIDATION");
}

async fn a_send_naming_a_file_never_uploaded_is_refused_as_missing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 10).await;
    let id = answer.body["attachment"]["id"].as_str().unwrap();
    send_with(&app, "alice", &room, &[id])
        .await
        .assert_error(404, "NOT_FOUND");
    // A key that was never handed out at all.
    send_with(&app, "alice", &room, &["not-an-upload"])
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn a_send_naming_another_users_or_another_rooms_upload_is_refused_as_missing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other_room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let alices = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    send_with(&app, "bob", &room, &[&alices])
        .await
        .assert_error(404, "NOT_FOUND");
    send_with(&app, "alice", &other_room, &[&alices])
        .await
        .assert_error(404, "NOT_FOUND");
    // Refusals claim nothing: the owner can still send it where it was uploaded.
    assert_eq!(
        send_with(&app, "alice", &room, &[&alices]).await.status,
        StatusCode::CREATED
    );
}

async fn an_upload_with_a_tampered_signature_is_refused_by_the_store(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let mut answer = declare(&app, "alice", &room, "a.png", "image/png", 10).await.body;
    let url = answer["upload"]["url"].as_str().unwrap().to_owned();
    let (head, sig) = url.split_once("sig=").unwrap();
    let flipped = if sig.starts_with('A') { "B" } else { "A" };
    answer["upload"]["url"] = json!(format!("{head}sig={flipped}{}", &sig[1..]));
    assert_eq!(put_file(&answer, &png(10), None).await, StatusCode::FORBIDDEN);
    let id = answer["attachment"]["id"].as_str().unwrap();
    send_with(&app, "alice", &room, &[id])
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn an_attachment_goes_on_one_message_only_and_a_message_carries_at_most_ten(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    assert_eq!(
        send_with(&app, "alice", &room, &[&id]).await.status,
        StatusCode::CREATED
    );
    send_with(&app, "alice", &room, &[&id])
        .await
        .assert_error(409, "CONFLICT");
    // A retry of the same send (its client id) answers with the first message, not a refusal.
    let again = uploaded(&app, "alice", &room, "b.png", "image/png", &png(10)).await;
    let body = json!({ "text": "x", "attachments": [again], "clientId": "c-1" });
    let first = create_message(&app, "alice", &room, body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let repeat = create_message(&app, "alice", &room, body).await;
    assert_eq!(repeat.status, StatusCode::OK, "{}", repeat.body);
    assert_eq!(repeat.body["attachments"], first.body["attachments"]);
    let eleven: Vec<String> = (0..11).map(|i| format!("{i:032x}")).collect();
    let refs: Vec<&str> = eleven.iter().map(String::as_str).collect();
    send_with(&app, "alice", &room, &refs)
        .await
        .assert_error(422, "VALIDATION");
    send_with(&app, "alice", &room, &[&id, &id])
        .await
        .assert_error(422, "VALIDATION");
}

async fn a_tombstone_removes_the_messages_objects(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let a = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    let b = uploaded(&app, "alice", &room, "b.pdf", "application/pdf", &png(20)).await;
    let sent = send_with(&app, "alice", &room, &[&a, &b]).await;
    assert_eq!(objects_under(&backend, &format!("{room}/")).await.len(), 2);
    let id = sent.body["id"].as_str().unwrap();
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("alice"),
            None,
        )
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
    let read = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/messages/{id}"),
            Some("bob"),
            None,
        )
        .await;
    assert!(read.body.get("attachments").is_none(), "{}", read.body);
    let (status, _) = download(&app, "bob", &format!("/api/rooms/{room}/attachments/{a}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn deleting_a_room_deletes_its_objects(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let sent = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    send_with(&app, "alice", &room, &[&sent]).await;
    uploaded(&app, "alice", &room, "unsent.png", "image/png", &png(10)).await;
    assert_eq!(objects_under(&backend, &format!("{room}/")).await.len(), 2);
    let deleted = app
        .call(Method::DELETE, &format!("/api/rooms/{room}"), Some("alice"), None)
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

async fn retention_purges_the_objects_of_expired_messages(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "0")]);
    let room = app.create_room("alice").await;
    let id = uploaded(&app, "alice", &room, "a.png", "image/png", &png(10)).await;
    send_with(&app, "alice", &room, &[&id]).await;
    let set = json!({ "retentionSeconds": 3600 });
    assert!(
        app.act(Method::PATCH, "alice", &format!("/rooms/{room}"), set)
            .await
            .status
            .is_success()
    );
    let report = backend
        .chat()
        .await
        .housekeeping(Utc::now() + Duration::seconds(3601))
        .await
        .unwrap();
    assert!(report.messages_purged >= 1, "{report:?}");
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

async fn uploads_never_attached_are_deleted_after_a_day(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "0")]);
    let room = app.create_room("alice").await;
    let kept = uploaded(&app, "alice", &room, "kept.png", "image/png", &png(10)).await;
    send_with(&app, "alice", &room, &[&kept]).await;
    let left = uploaded(&app, "alice", &room, "left.png", "image/png", &png(10)).await;
    let chat = backend.chat().await;
    chat.housekeeping(Utc::now() + Duration::hours(23)).await.unwrap();
    assert_eq!(
        objects_under(&backend, &format!("{room}/")).await.len(),
        2,
        "not yet a day"
    );
    let report = chat.housekeeping(Utc::now() + Duration::hours(25)).await.unwrap();
    assert_eq!(report.uploads_expired, 1, "{report:?}");
    let left_over = objects_under(&backend, &format!("{room}/")).await;
    assert_eq!(left_over.len(), 1);
    assert!(left_over[0].contains(&kept), "{left_over:?}");
    send_with(&app, "alice", &room, &[&left])
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn a_forward_into_two_rooms_gives_each_its_own_copy_which_outlives_the_source(backend: Backend) {
    let app = spawn_app(&backend);
    let source = app.create_room("alice").await;
    let first = app.create_room("alice").await;
    let second = app.create_room("alice").await;
    app.join("bob", &first).await;
    let bytes = png(300);
    let id = uploaded(&app, "alice", &source, "a.png", "image/png", &bytes).await;
    let sent = send_with(&app, "alice", &source, &[&id]).await;
    let message = sent.body["id"].as_str().unwrap();
    let forwarded = forward(&app, "alice", &source, message, json!([first, second])).await;
    assert_eq!(forwarded.status, StatusCode::OK, "{}", forwarded.body);
    let mut copies = Vec::new();
    for (index, room) in [&first, &second].into_iter().enumerate() {
        let attachment = forwarded.body[index]["message"]["attachments"][0].clone();
        assert_ne!(attachment["id"], json!(id), "a copy has an id of its own");
        assert_eq!(
            attachment["url"],
            format!("/api/rooms/{room}/attachments/{}", attachment["id"].as_str().unwrap())
        );
        assert_eq!(objects_under(&backend, &format!("{room}/")).await.len(), 1);
        copies.push((room.clone(), attachment["url"].as_str().unwrap().to_owned()));
    }
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{source}/messages/{message}"),
            Some("alice"),
            None,
        )
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    assert_eq!(
        objects_under(&backend, &format!("{source}/")).await,
        Vec::<String>::new()
    );
    let (status, got) = download(&app, "bob", &copies[0].1).await;
    assert_eq!(status, StatusCode::FOUND);
    assert_eq!(got.unwrap().bytes().await.unwrap().as_ref(), bytes.as_slice());
    let (status, _) = download(&app, "bob", &copies[1].1).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "bob is not in the second room");
}

async fn bad_input_on_the_attachment_routes_gets_documented_errors(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let uploads = format!("/api/rooms/{room}/uploads");
    let raw = |body: &'static str| {
        app.http
            .post(format!("{}{uploads}", app.base))
            .bearer_auth(token_with("alice", &app.secret, 3600))
            .header("content-type", "application/json")
            .body(body)
    };
    let status_and_code = |reply: reqwest::Response| async move {
        let status = reply.status().as_u16();
        let body: Value = reply.json().await.unwrap();
        (status, body["code"].as_str().unwrap().to_owned())
    };
    let cases = [
        ("{not json", 400, "BAD_REQUEST"),
        (r#"{"name":"a.png","mime":"image/png"}"#, 422, "VALIDATION"),
        (r#"{"name":"a.png","mime":"image/png","size":-1}"#, 422, "VALIDATION"),
        (r#"{"name":"a.png","mime":"image/png","size":"big"}"#, 422, "VALIDATION"),
        (
            r#"{"name":"a.png","mime":"image/png","size":1,"extra":1}"#,
            422,
            "VALIDATION",
        ),
        (r#"{"name":"","mime":"image/png","size":1}"#, 422, "VALIDATION"),
        (r#"{"name":"a.png","mime":"image/png","size":0}"#, 422, "VALIDATION"),
    ];
    for (body, status, code) in cases {
        assert_eq!(
            status_and_code(raw(body).send().await.unwrap()).await,
            (status, code.to_owned()),
            "{body}"
        );
    }
    let body = json!({ "name": "a.png", "mime": "image/png", "size": 1 });
    app.call(Method::POST, &uploads, None, Some(body.clone()))
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.call(Method::POST, &uploads, Some("mallory"), Some(body.clone()))
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::POST, "/api/rooms/not-a-room/uploads", Some("alice"), Some(body))
        .await
        .assert_error(404, "NOT_FOUND");
    for path in [
        format!("/api/rooms/{room}/attachments/not-an-id"),
        format!("/api/rooms/{room}/attachments/{}", "f".repeat(32)),
        "/api/rooms/not-a-room/attachments/x".to_owned(),
    ] {
        app.call(Method::GET, &path, Some("alice"), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    app.call(Method::GET, &format!("/api/rooms/{room}/attachments/x"), None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    // The messages route: attachments of the wrong shape.
    let wrong = json!({ "text": "x", "attachments": "one" });
    create_message(&app, "alice", &room, wrong)
        .await
        .assert_error(422, "VALIDATION");
    // The embedded store's own door, unsigned or for a key that is not one.
    let unsigned = no_redirects()
        .put(format!("{}/objects/{room}/a/b/c.png", app.base))
        .body("x")
        .send()
        .await
        .unwrap();
    let expected = match backend {
        Backend::Embedded { .. } => StatusCode::FORBIDDEN,
        Backend::Azurite { .. } => StatusCode::NOT_FOUND,
    };
    assert_eq!(unsigned.status(), expected);
    let bad_key = no_redirects()
        .get(format!("{}/objects/..%2F..%2Fetc", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_key.status(), StatusCode::NOT_FOUND);
}

async fn an_upload_link_used_again_after_its_message_was_deleted_leaves_no_object_after_a_day(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "0")]);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 10).await.body;
    assert!(put_file(&answer, &png(10), None).await.is_success());
    let sent = send_with(&app, "alice", &room, &[answer["attachment"]["id"].as_str().unwrap()]).await;
    let id = sent.body["id"].as_str().unwrap();
    let deleted = crate::helpers::messages::delete_message(&app, "alice", &room, id).await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
    // The link is still valid for a few minutes: the object comes back, and nothing refers to it.
    assert_eq!(put_file(&answer, &png(10), None).await, StatusCode::CREATED);
    backend
        .chat()
        .await
        .housekeeping(Utc::now() + Duration::hours(25))
        .await
        .unwrap();
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

async fn an_upload_link_used_after_its_room_was_deleted_leaves_no_object_after_a_day(backend: Backend) {
    let app = spawn_app_with(&backend, &[("TABLETALK_HOUSEKEEPING_SECONDS", "0")]);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 10).await.body;
    let deleted = app
        .call(Method::DELETE, &format!("/api/rooms/{room}"), Some("alice"), None)
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    // Used after the room's last sweep: an object under a room that is gone.
    assert_eq!(put_file(&answer, &png(10), None).await, StatusCode::CREATED);
    backend
        .chat()
        .await
        .housekeeping(Utc::now() + Duration::hours(25))
        .await
        .unwrap();
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

async fn a_file_whose_size_or_type_differs_from_the_declared_is_deleted_when_a_send_names_it(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let larger = declare(&app, "alice", &room, "a.png", "image/png", 1000).await.body;
    assert!(put_file(&larger, &png(5000), None).await.is_success());
    let other_type = declare(&app, "alice", &room, "b.png", "image/png", 100).await.body;
    assert!(put_file(&other_type, &png(100), Some("text/plain")).await.is_success());
    assert_eq!(objects_under(&backend, &format!("{room}/")).await.len(), 2);
    for answer in [&larger, &other_type] {
        send_with(&app, "alice", &room, &[answer["attachment"]["id"].as_str().unwrap()])
            .await
            .assert_error(422, "VALIDATION");
    }
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

/// Sends a request's head and the first bytes of a body it says is `length` long, and keeps the
/// connection open without sending the rest; the status line of the answer, if one comes
/// while the body is still unsent.
async fn answer_before_the_body(url: &str, length: u64) -> Option<String> {
    answer_before_the_end(url, &format!("Content-Length: {length}"), b"0123456789").await
}

/// Sends a PUT's head with `framing` (its length header), then `first`, and keeps the
/// connection open; the status line of the answer, if one comes before the body ends.
async fn answer_before_the_end(url: &str, framing: &str, first: &[u8]) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let url = reqwest::Url::parse(url).unwrap();
    let mut stream = tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap()))
        .await
        .unwrap();
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let head = format!(
        "PUT {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: image/png\r\nx-ms-blob-type: BlockBlob\r\n{framing}\r\n\r\n",
        url.authority()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(first).await.unwrap();
    let mut answer = vec![0u8; 1024];
    // Bounded so that a server waiting for the rest of the body fails the test, not hangs it.
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read(&mut answer)).await;
    let n = read.ok()?.unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).into_owned();
    text.lines().next().map(str::to_owned)
}

/// An upload to the embedded store whose signature is wrong is refused from its URL alone:
/// the server answers 403 without waiting for (or reading) the body.
#[tokio::test]
async fn an_upload_with_a_wrong_signature_is_refused_before_its_body_is_read() {
    let backend = Backend::embedded();
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 100).await.body;
    let url = answer["upload"]["url"].as_str().unwrap();
    let (base, _) = url.split_once("sig=").unwrap();
    let forged = format!("{base}sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let status = answer_before_the_body(&forged, 50).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 403 Forbidden"));
}

/// A signed upload saying it is longer than the largest attachment is refused as too large
/// before its body is read.
#[tokio::test]
async fn an_upload_longer_than_the_maximum_is_refused_before_its_body_is_read() {
    let backend = Backend::embedded();
    let app = spawn_app_with(&backend, &[("TABLETALK_ATTACHMENT_MAX_BYTES", "100")]);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 100).await.body;
    let status = answer_before_the_body(answer["upload"]["url"].as_str().unwrap(), 1_000_000_000).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}

/// A signed upload sent without a length (chunked) is cut off once it runs over the largest
/// attachment: 413 while the body is still coming, and nothing stored.
#[tokio::test]
async fn an_upload_without_a_length_running_over_the_maximum_is_cut_off() {
    let backend = Backend::embedded();
    let app = spawn_app_with(&backend, &[("TABLETALK_ATTACHMENT_MAX_BYTES", "100")]);
    let room = app.create_room("alice").await;
    let answer = declare(&app, "alice", &room, "a.png", "image/png", 100).await.body;
    let chunk = format!("c8\r\n{}\r\n", "x".repeat(200));
    let url = answer["upload"]["url"].as_str().unwrap();
    let status = answer_before_the_end(url, "Transfer-Encoding: chunked", chunk.as_bytes()).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}
