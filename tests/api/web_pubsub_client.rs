//! The official `@azure/web-pubsub-client` npm package, under node, against the self-hosted
//! server's hub: it connects with a URL from negotiate (on its default reliable subprotocol),
//! joins its room's group, receives a message sent over HTTP, and is refused the group of a
//! room it is not in. `tests/run` installs the package and names it in
//! `TABLETALK_TEST_WPS_CLIENT` (its `node_modules` folder); under CI a missing package fails.

use std::process::Stdio;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

use crate::helpers::{Backend, spawn_app};

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the client said something within 30 s")
        .unwrap()
        .expect("the client is still running");
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line}"))
}

#[tokio::test]
async fn the_official_client_joins_its_room_and_receives_messages() {
    let Some(node_modules) = crate::helpers::provided("TABLETALK_TEST_WPS_CLIENT") else {
        return;
    };
    let app = spawn_app(&Backend::embedded());
    let room = app.create_room("alice").await;
    let foreign = app.create_room("alice").await;
    app.join("bob", &room).await;
    let negotiated = app.call(Method::POST, "/api/negotiate", Some("bob"), None).await;
    assert_eq!(negotiated.status, StatusCode::OK, "{}", negotiated.body);

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/node/live_client.cjs");
    let mut node = tokio::process::Command::new("node")
        .arg(script)
        .arg(negotiated.body["url"].as_str().unwrap())
        .arg(format!("room.{room}"))
        .arg(format!("room.{foreign}"))
        .env("NODE_PATH", &node_modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();

    let connected = next_line(&mut lines).await;
    assert_eq!(connected["event"], "connected", "{connected}");
    assert_eq!(connected["userId"], "bob");
    let joined = next_line(&mut lines).await;
    assert_eq!(joined["event"], "joined", "{joined}");

    let id = app.post("alice", &room, "<p>hello, official client</p>").await;
    let mut saw_message = false;
    let mut saw_refusal = false;
    while !(saw_message && saw_refusal) {
        let line = next_line(&mut lines).await;
        match line["event"].as_str() {
            Some("server-message") if line["data"]["type"] == "message.created" => {
                assert_eq!(line["data"]["roomId"], room.as_str());
                assert_eq!(line["data"]["message"]["id"], id.as_str());
                assert_eq!(line["data"]["message"]["text"], "<p>hello, official client</p>");
                saw_message = true;
            }
            Some("refused") => {
                assert_eq!(line["error"], "Forbidden", "{line}");
                saw_refusal = true;
            }
            // Its own user going online (tests/api/presence.rs checks those).
            Some("server-message") if line["data"]["type"] == "presence" => {}
            Some("joined-foreign") => panic!("the client joined a room it is not in"),
            _ => panic!("unexpected: {line}"),
        }
    }
    drop(node.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(10), node.wait())
        .await
        .expect("the client exits")
        .unwrap();
    assert!(status.success());
}
