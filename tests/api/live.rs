//! Live delivery end to end. With Azure Web PubSub: `negotiate` (a client URL whose token lets
//! the caller join the live groups of their rooms and no other, for at most an hour), live
//! signals, presence and group removal through the service REST API, checked by a stand-in
//! that verifies each call as Web PubSub does. Without
//! it: the self-hosted server's own hub, driven over a real WebSocket.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::web_pubsub::{start_hub, verify_hs256};
use crate::helpers::{Backend, TestApp, spawn_app_with, spawn_push_app};

/// The token a client connects with lets it join no group at all (Web PubSub lets a
/// connection without roles only send events upstream): the server puts it in
/// the group of the room it shows, so an old token of a removed member cannot rejoin one.
#[tokio::test]
async fn negotiate_hands_out_a_token_that_may_join_no_group() {
    let backend = Backend::embedded();
    let access_key = B64.encode(rand::random::<[u8; 32]>());
    let connection = format!("Endpoint=https://chat.webpubsub.azure.com;AccessKey={access_key};Version=1.0;");
    let app = spawn_app_with(&backend, &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())]);
    app.create_room("bob").await;
    let alices = app.create_room("alice").await;
    app.join("bob", &alices).await;

    let reply = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let url = reply.body["url"].as_str().unwrap();
    let token = url
        .strip_prefix("wss://chat.webpubsub.azure.com/client/hubs/chat?access_token=")
        .unwrap_or_else(|| panic!("a client URL: {url}"));
    let claims = verify_hs256(token, &access_key);
    assert_eq!(claims["aud"], "https://chat.webpubsub.azure.com/client/hubs/chat");
    assert_eq!(claims["sub"], "bob");
    let now = chrono::Utc::now().timestamp();
    let exp = claims["exp"].as_i64().unwrap();
    assert!(exp > now && exp <= now + 3600, "expires within the hour");
    let roles = claims["role"].as_array().cloned().unwrap_or_default();
    assert!(roles.is_empty(), "no role at all, so no group to join: {roles:?}");
    assert!(claims.get("webpubsub.group").is_none(), "no group joined at connect");

    app.call(Method::POST, "/api/negotiate", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

/// A Functions app without Web PubSub has no live delivery (the host carries no WebSockets).
#[tokio::test]
async fn a_functions_app_without_web_pubsub_has_no_negotiate() {
    let app = spawn_app_with(&Backend::embedded(), &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")]);
    let refused = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    refused.assert_error(503, "UNAVAILABLE");
    // What is missing is the operator's to read in the log; the caller reads a generic message
    // naming the request.
    let id = refused.headers["x-request-id"].to_str().unwrap();
    assert_eq!(
        refused.body["message"],
        format!("temporarily unavailable; try again (request {id})")
    );
}

#[tokio::test]
async fn changes_reach_the_rooms_group_as_live_signals() {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );

    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let id = app.post("alice", &room, "hi").await;
    let at = |rest: &str| format!("/api/rooms/{room}/messages/{id}{rest}");
    app.call(
        Method::PATCH,
        &at(""),
        Some("alice"),
        Some(serde_json::json!({ "text": "hi!" })),
    )
    .await;
    app.call(Method::PUT, &at("/reactions/ok"), Some("bob"), None).await;
    app.call(Method::POST, &at("/pin"), Some("alice"), None).await;
    for _ in 0..3 {
        let typing = app
            .call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("bob"), None)
            .await;
        assert_eq!(typing.status, StatusCode::NO_CONTENT);
    }
    app.call(
        Method::POST,
        &format!("/api/rooms/{room}/read"),
        Some("bob"),
        Some(serde_json::json!({})),
    )
    .await;
    app.call(Method::DELETE, &at(""), Some("alice"), None).await;
    // A stranger can neither type into the room nor learn it exists.
    app.call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("eve"), None)
        .await
        .assert_error(404, "NOT_FOUND");

    // created: the join line, "hi", the pin line; then the rest once each; typing only once.
    let expected = 3 + 5 + 1;
    for _ in 0..100 {
        if hub.sent.lock().unwrap().len() >= expected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let sent = hub.sent.lock().unwrap().clone();
    let mut kinds: Vec<&str> = sent.iter().map(|(_, body)| body["type"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "message.created",
            "message.created",
            "message.created",
            "message.deleted",
            "message.pinned",
            "message.reacted",
            "message.updated",
            "read",
            "typing"
        ]
    );
    for (group, body) in &sent {
        assert_eq!(group, &format!("room.{room}"), "the room's group");
        assert_eq!(body["roomId"], room.as_str());
    }
    let updated = sent.iter().find(|(_, b)| b["type"] == "message.updated").unwrap();
    assert_eq!(updated.1["message"]["text"], "hi!", "a signal carries the change");
}

#[tokio::test]
async fn an_unreachable_web_pubsub_never_fails_a_request() {
    let connection = format!(
        "Endpoint=http://127.0.0.1:9;AccessKey={};Version=1.0;",
        B64.encode(rand::random::<[u8; 32]>())
    );
    let app = spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );
    let room = app.create_room("alice").await;
    let sent = app.send("alice", &room, "still stored", None).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let typing = app
        .call(Method::POST, &format!("/api/rooms/{room}/typing"), Some("alice"), None)
        .await;
    assert_eq!(typing.status, StatusCode::NO_CONTENT);
    assert_eq!(app.read_all("alice", &room, "desc", 10).await.len(), 1);
}

// ---- The local hub ----------------------------------------------------------------------------

pub(crate) type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to a negotiated URL with the plain JSON subprotocol; returns the socket after its
/// `connected` message.
pub(crate) async fn connect(url: &str) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "json.webpubsub.azure.v1".parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.headers()["sec-websocket-protocol"], "json.webpubsub.azure.v1");
    let connected = next_frame(&mut socket).await;
    assert_eq!(connected["event"], "connected", "{connected}");
    socket
}

/// Connects as `connect` does; also returns the connection's id from its `connected` message.
pub(crate) async fn connect_with_id(url: &str) -> (Socket, String) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "json.webpubsub.azure.v1".parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let connected = next_frame(&mut socket).await;
    assert_eq!(connected["event"], "connected", "{connected}");
    let id = connected["connectionId"].as_str().unwrap().to_owned();
    (socket, id)
}

/// `user`'s connection `connection` shows `room` (none for `None`); the answer.
pub(crate) async fn view(app: &TestApp, user: &str, connection: &str, room: Option<&str>) -> crate::helpers::Reply {
    let body = serde_json::json!({ "connectionId": connection, "roomId": room });
    app.call(Method::PUT, "/api/live/view", Some(user), Some(body)).await
}

/// `user` negotiates, connects to the local hub and shows `room`: the socket and its id.
pub(crate) async fn connect_viewing(app: &TestApp, user: &str, room: &str) -> (Socket, String) {
    let negotiated = app.call(Method::POST, "/api/negotiate", Some(user), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    let (socket, id) = connect_with_id(negotiated.body["url"].as_str().unwrap()).await;
    let shown = view(app, user, &id, Some(room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    (socket, id)
}

/// The next text frame, passing over `presence` signals (a connection's own user going online
/// makes one in each of their rooms; tests/api/presence.rs checks them).
pub(crate) async fn next_frame(socket: &mut Socket) -> Value {
    use futures::StreamExt;
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(5), socket.next())
            .await
            .expect("a frame within 5 s")
            .expect("the socket is open")
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
            let frame: Value = serde_json::from_str(text.as_str()).unwrap();
            if frame["data"]["type"] != "presence" {
                return frame;
            }
        }
    }
}

pub(crate) async fn send_frame(socket: &mut Socket, frame: Value) {
    use futures::SinkExt;
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(frame.to_string()))
        .await
        .unwrap();
}

/// Without Web PubSub the server is its own hub: negotiate hands out a URL on it, the token
/// is checked, the room's group delivers the signals, a foreign room is refused — and a user
/// with a connection open gets no push, until they disconnect.
#[tokio::test]
async fn the_local_hub_carries_signals_and_connected_users_are_not_pushed() {
    use crate::push::{Device, start_service, subscribe, wait_for};
    let (service, push_addr) = start_service().await;
    let app = spawn_push_app(&Backend::embedded(), &[]);
    let room = app.create_room("alice").await;
    let elsewhere = app.create_room("alice").await;
    let devices = [Device::new("bob", push_addr), Device::new("carol", push_addr)];
    for device in &devices {
        app.join(&device.name, &room).await;
        subscribe(&app, &device.name, device).await;
    }
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);
    let url = negotiated.body["url"].as_str().unwrap();
    let host = app.base.strip_prefix("http://").unwrap();
    assert!(
        url.starts_with(&format!("ws://{host}/client/hubs/chat?access_token=")),
        "{url}"
    );

    // A forged token is refused before the upgrade.
    let forged = format!("ws://{host}/client/hubs/chat?access_token=x.y.z");
    assert!(tokio_tungstenite::connect_async(forged.as_str()).await.is_err());

    let (mut socket, connection) = connect_with_id(url).await;
    // The token joins nothing itself; the server puts the connection in the room it shows.
    send_frame(
        &mut socket,
        serde_json::json!({ "type": "joinGroup", "group": format!("room.{room}"), "ackId": 1 }),
    )
    .await;
    let refused = next_frame(&mut socket).await;
    assert_eq!(refused["error"]["name"], "Forbidden", "{refused}");
    let shown = view(&app, "bob", &connection, Some(&room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    view(&app, "bob", &connection, Some(&elsewhere))
        .await
        .assert_error(404, "NOT_FOUND");

    let id = app.post("alice", &room, "<p>hello</p>").await;
    app.post("alice", &elsewhere, "<p>not for bob</p>").await;
    let signal = next_frame(&mut socket).await;
    assert_eq!(signal["from"], "server");
    assert_eq!(signal["data"]["type"], "message.created");
    assert_eq!(signal["data"]["message"]["id"], id.as_str());
    let pushed = wait_for(&service, 1).await;
    let names: Vec<&str> = pushed.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(names, ["carol"], "bob is connected, so only carol is pushed");

    // Once bob has gone, he is pushed again.
    drop(socket);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    app.post("alice", &room, "<p>still there?</p>").await;
    let pushed = wait_for(&service, 3).await;
    let mut names: Vec<&str> = pushed.iter().map(|p| p.device.as_str()).collect();
    names.sort();
    assert_eq!(names, ["bob", "carol", "carol"]);
    // Each one a real push: signed with the server's VAPID key, readable only by its device.
    let public_key = app
        .call(Method::GET, "/api/push/vapidPublicKey", Some("bob"), None)
        .await
        .body["publicKey"]
        .as_str()
        .unwrap()
        .to_owned();
    for push in &pushed {
        crate::push::verify_vapid(&push.headers, &public_key);
        let device = devices.iter().find(|d| d.name == push.device).unwrap();
        let payload: Value =
            serde_json::from_slice(&crate::push::decrypt(&device.secret, &device.auth, &push.body)).unwrap();
        assert_eq!(payload["roomId"], room.as_str());
    }
}

/// A member who is removed stops receiving the room's signals at once; neither their old
/// token (it holds no join role) nor the server (membership is checked) puts them back.
#[tokio::test]
async fn a_removed_member_stops_receiving_signals() {
    let app = spawn_app_with(&Backend::embedded(), &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let (mut socket, connection) = connect_viewing(&app, "bob", &room).await;
    app.post("alice", &room, "<p>one</p>").await;
    assert_eq!(next_frame(&mut socket).await["data"]["type"], "message.created");

    app.kick("alice", &room, "bob").await;
    app.post("alice", &room, "<p>not for bob</p>").await;
    let group = format!("room.{room}");
    send_frame(
        &mut socket,
        serde_json::json!({ "type": "joinGroup", "group": group, "ackId": 2 }),
    )
    .await;
    let rejoin = next_frame(&mut socket).await;
    assert_eq!(rejoin["type"], "ack", "no signal reached bob after the kick: {rejoin}");
    assert_eq!(rejoin["error"]["name"], "Forbidden");
    view(&app, "bob", &connection, Some(&room))
        .await
        .assert_error(404, "NOT_FOUND");
}

/// With Azure Web PubSub: a user the service reports connected is not pushed, and a removed
/// member is taken out of the room's group through the REST API, tried again when a call fails.
#[tokio::test]
async fn with_web_pubsub_connected_users_are_not_pushed_and_removed_members_leave_the_group() {
    use crate::push::{Device, start_service, subscribe, wait_for};
    let (hub, connection) = start_hub(&["bob"]).await;
    let (service, push_addr) = start_service().await;
    let app = spawn_push_app(
        &Backend::embedded(),
        &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())],
    );
    let room = app.create_room("alice").await;
    for user in ["bob", "carol"] {
        app.join(user, &room).await;
        subscribe(&app, user, &Device::new(user, push_addr)).await;
    }
    app.post("alice", &room, "<p>hello</p>").await;
    let pushed = wait_for(&service, 1).await;
    let devices: Vec<&str> = pushed.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(devices, ["carol"], "bob is connected to Web PubSub");
    let calls = hub.calls.lock().unwrap().clone();
    assert!(calls.contains(&"HEAD /api/hubs/chat/users/bob".to_owned()), "{calls:?}");

    // The first removal call fails: it is tried again.
    hub.failing_removals.store(1, std::sync::atomic::Ordering::SeqCst);
    app.kick("alice", &room, "carol").await;
    let removal = format!("DELETE /api/hubs/chat/users/carol/groups/room.{room}");
    let removals = || {
        hub.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|call| **call == removal)
            .count()
    };
    for _ in 0..250 {
        if removals() >= 2 {
            assert_eq!(hub.failing_removals.load(std::sync::atomic::Ordering::SeqCst), 0);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("carol's removal was not tried again: {:?}", hub.calls.lock().unwrap());
}
