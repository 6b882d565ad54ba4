//! The official `@azure/web-pubsub-client` npm package, under node, against the self-hosted
//! server's hub: it connects with a URL from negotiate (on its default reliable subprotocol),
//! cannot join a room's group itself, is put in the group of the room it shows by the server,
//! receives that room's messages and only notices of others, and once kicked receives the
//! room no more and cannot rejoin it. `tests/run` installs the package and names it in
//! `TABLETALK_TEST_WPS_CLIENT` (its `node_modules` folder); under CI a missing package fails.

use std::process::Stdio;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use crate::helpers::messages::mention;
use crate::helpers::{Backend, backend_tests, spawn_app};
use crate::live::view;

backend_tests!(the_official_client_shows_its_room_and_a_kick_takes_it_out_for_good);

/// The client's next line, passing over `presence` signals (its own user going online makes
/// one in each room it shows; tests/api/presence.rs checks them).
async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the client said something within 30 s")
            .unwrap()
            .expect("the client is still running");
        let line: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line}"));
        if !(line["event"] == "server-message" && line["data"]["type"] == "presence") {
            return line;
        }
    }
}

async fn join(stdin: &mut ChildStdin, group: &str) {
    stdin.write_all(format!("join {group}\n").as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
}

async fn the_official_client_shows_its_room_and_a_kick_takes_it_out_for_good(backend: Backend) {
    let Some(node_modules) = crate::helpers::provided("TABLETALK_TEST_WPS_CLIENT") else {
        return;
    };
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.join("bob", &other).await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/live_client.cjs");
    let mut node = tokio::process::Command::new("node")
        .arg(script)
        .arg(negotiated.body["url"].as_str().unwrap())
        .env("NODE_PATH", &node_modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut stdin = node.stdin.take().unwrap();
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();

    let connected = next_line(&mut lines).await;
    assert_eq!(connected["event"], "connected", "{connected}");
    assert_eq!(connected["userId"], "bob");
    let connection = connected["connectionId"].as_str().unwrap().to_owned();
    let group = format!("room.{room}");
    join(&mut stdin, &group).await;
    let refused = next_line(&mut lines).await;
    assert_eq!(
        (refused["event"].as_str(), refused["error"].as_str()),
        (Some("refused"), Some("Forbidden")),
        "the token joins no group: {refused}"
    );

    let shown = view(&app, "bob", &connection, Some(&room)).await;
    assert_eq!(shown.status, StatusCode::NO_CONTENT, "{}", shown.body);
    let id = app.post("alice", &room, "<p>hello, official client</p>").await;
    let line = next_line(&mut lines).await;
    assert_eq!(line["event"], "server-message", "{line}");
    assert_eq!(line["data"]["type"], "message.created");
    assert_eq!(line["data"]["roomId"], room.as_str());
    assert_eq!(line["data"]["message"]["id"], id.as_str());
    assert_eq!(line["data"]["message"]["text"], "<p>hello, official client</p>");

    // Kicked: the room's messages stop at once. The next frame bob gets is the notice of a
    // mention in his other room, which went out after the kicked room's message.
    app.kick("alice", &room, "bob").await;
    app.post("alice", &room, "<p>not for bob</p>").await;
    app.post("alice", &other, &format!("<p>{}</p>", mention("bob"))).await;
    let line = next_line(&mut lines).await;
    assert_eq!(line["event"], "server-message", "{line}");
    assert_eq!(line["data"]["type"], "room.activity", "{line}");
    assert_eq!(line["data"]["roomId"], other.as_str(), "{line}");
    assert_eq!(line["data"]["mentioned"], true);

    // Neither the old token nor the server puts the connection back.
    join(&mut stdin, &group).await;
    let refused = next_line(&mut lines).await;
    assert_eq!(refused["event"], "refused", "{refused}");
    view(&app, "bob", &connection, Some(&room))
        .await
        .assert_error(404, "NOT_FOUND");

    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), node.wait())
        .await
        .expect("the client exits")
        .unwrap();
    assert!(status.success());
}
