//! Slash commands over HTTP on both stores: each does what its route does, each refused as its
//! route refuses a member without the permission, a client id runs a command once, and a bad
//! line or body gets its documented 4xx and changes nothing. And the composer's other
//! suggestions, emoji by shortcode.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, backend_tests, posts, spawn_app};

backend_tests!(
    each_command_does_what_its_route_does,
    each_command_is_refused_without_its_permission,
    a_client_id_runs_a_command_once,
    bad_command_lines_get_documented_errors_and_change_nothing,
    emoji_are_suggested_by_shortcode,
);

async fn ran(app: &TestApp, user: &str, room: &str, text: &str) -> Value {
    let reply = app.command(user, room, text, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{text}: {}", reply.body);
    assert_eq!(reply.body["repeated"], false, "{}", reply.body);
    reply.body
}

async fn room_get(app: &TestApp, user: &str, room: &str) -> Value {
    let reply = app
        .call(Method::GET, &format!("/api/rooms/{room}"), Some(user), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

async fn each_command_does_what_its_route_does(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    for user in ["bob", "dave", "erin"] {
        app.join(user, &room).await;
    }

    let me = ran(&app, "owner", &room, "/me waves **hello**").await;
    assert_eq!(me["command"], "me");
    assert_eq!(
        me["message"]["text"], "<p><em>waves <strong>hello</strong></em></p>",
        "{me}"
    );
    let shrug = ran(&app, "owner", &room, "/shrug no idea").await;
    assert_eq!(shrug["message"]["text"], "<p>no idea ¯\\_(ツ)_/¯</p>", "{shrug}");
    let texts: Vec<Value> = posts(app.read_all("bob", &room, "desc", 50).await)
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [shrug["message"]["text"].clone(), me["message"]["text"].clone()],
        "posted through the one door"
    );

    ran(&app, "owner", &room, "/topic Launch on Friday").await;
    assert_eq!(room_get(&app, "bob", &room).await["description"], "Launch on Friday");

    ran(&app, "owner", &room, "/invite @carol").await;
    let invited = app.call(Method::GET, "/api/invites", Some("carol"), None).await;
    assert!(invited.body.to_string().contains(&room), "{}", invited.body);

    let timeout = ran(&app, "owner", &room, "/timeout @bob 10m cool off").await;
    assert!(timeout["result"].as_str().unwrap().contains("timed out"), "{timeout}");
    let bob = app.member("owner", &room, "bob").await.unwrap();
    assert!(bob["timeoutUntil"].is_string(), "{bob}");
    app.send("bob", &room, "still here?", None)
        .await
        .assert_error(403, "FORBIDDEN");

    ran(&app, "owner", &room, "/kick @dave off-topic").await;
    assert!(app.member("owner", &room, "dave").await.is_none());
    ran(&app, "owner", &room, "/ban erin").await;
    let bans = app
        .call(Method::GET, &format!("/api/rooms/{room}/bans"), Some("owner"), None)
        .await;
    assert!(bans.body.to_string().contains("erin"), "{}", bans.body);
    let log = app.moderation_log("owner", &room).await;
    for action in ["off-topic", "cool off"] {
        assert!(
            log.body.to_string().contains(action),
            "logged as the routes log: {}",
            log.body
        );
    }

    let muted = |user: &'static str| {
        let (app, room) = (&app, room.clone());
        async move {
            let rooms = app.call(Method::GET, "/api/rooms", Some(user), None).await;
            let entry = rooms
                .body
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == room.as_str())
                .cloned();
            entry.expect("the room is listed")["muted"].clone()
        }
    };
    ran(&app, "bob", &room, "/mute").await;
    assert_eq!(muted("bob").await, true);
    ran(&app, "bob", &room, "/unmute").await;
    assert_eq!(muted("bob").await, false);

    let remind = ran(&app, "owner", &room, "/remind 1h check the *agenda*").await;
    assert_eq!(
        remind["scheduled"]["text"], "<p>check the <em>agenda</em></p>",
        "{remind}"
    );
    let scheduled = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/scheduled"),
            Some("owner"),
            None,
        )
        .await;
    assert!(scheduled.body.to_string().contains("agenda"), "{}", scheduled.body);
}

async fn each_command_is_refused_without_its_permission(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    for user in ["bob", "carl"] {
        app.join(user, &room).await;
    }
    for line in ["/topic mine now", "/kick @carl", "/ban @carl", "/timeout @carl 5m"] {
        app.command("bob", &room, line, None)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    let description = room_get(&app, "owner", &room).await["description"].clone();
    assert_ne!(description, "mine now", "refused, so unchanged");
    let carl = app
        .member("owner", &room, "carl")
        .await
        .expect("carl is still a member");
    assert!(carl["timeoutUntil"].is_null(), "{carl}");
    // A moderator outranked by the target is refused as the route refuses.
    app.grant("owner", &room, "bob", &["ManageMembers"], 5).await;
    app.command("bob", &room, "/kick @owner", None)
        .await
        .assert_error(403, "FORBIDDEN");
    ran(&app, "bob", &room, "/kick @carl").await;
    // Nobody outside the room runs anything in it.
    let outsider = app.command("mallory", &room, "/shrug", None).await;
    assert!(matches!(outsider.status.as_u16(), 403 | 404), "{}", outsider.body);
    assert!(posts(app.read_all("owner", &room, "desc", 50).await).is_empty());
}

async fn a_client_id_runs_a_command_once(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    let first = app.command("owner", &room, "/shrug", Some("c-1")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let again = app.command("owner", &room, "/shrug", Some("c-1")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["repeated"], true, "{}", again.body);
    assert_eq!(
        posts(app.read_all("owner", &room, "desc", 50).await).len(),
        1,
        "posted once"
    );

    // A repeat runs nothing, whatever it says; another caller's id is their own.
    let topic = app.command("owner", &room, "/topic first", Some("c-2")).await;
    assert_eq!(topic.status, StatusCode::OK, "{}", topic.body);
    let changed = app.command("owner", &room, "/topic second", Some("c-2")).await;
    assert_eq!(changed.body["repeated"], true, "{}", changed.body);
    assert_eq!(room_get(&app, "owner", &room).await["description"], "first");
    // A send's client id and a command's never meet, either way round.
    let sent = app.send("owner", &room, "hello", Some("c-1")).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    app.send("owner", &room, "first a send", Some("c-4")).await;
    let after_send = app.command("owner", &room, "/mute", Some("c-4")).await;
    assert_eq!(after_send.body["repeated"], false, "{}", after_send.body);
    // A command refused for what it is ran nothing: its id runs the corrected line.
    app.join("carl", &room).await;
    let refused = app.command("owner", &room, "/timeout @carl 30d", Some("c-5")).await;
    refused.assert_error(422, "VALIDATION");
    let corrected = app.command("owner", &room, "/timeout @carl 10m", Some("c-5")).await;
    assert_eq!(corrected.status, StatusCode::OK, "{}", corrected.body);
    assert_eq!(corrected.body["repeated"], false, "{}", corrected.body);
    app.join("bob", &room).await;
    let bobs = app.command("bob", &room, "/shrug", Some("c-1")).await;
    assert_eq!(bobs.body["repeated"], false, "{}", bobs.body);
}

async fn bad_command_lines_get_documented_errors_and_change_nothing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    let path = format!("/rooms/{room}/commands");
    for (body, status, code) in [
        (json!({ "text": "/dance" }), 422, "VALIDATION"),
        (json!({ "text": "hello" }), 422, "VALIDATION"),
        (json!({ "text": "/me" }), 422, "VALIDATION"),
        (json!({ "text": "/timeout @bob soon" }), 422, "VALIDATION"),
        (json!({ "text": "/remind 10m" }), 422, "VALIDATION"),
        (
            json!({ "text": format!("/me {}", "a".repeat(20_000)) }),
            422,
            "VALIDATION",
        ),
        (json!({ "text": "/shrug", "clientId": "not an id" }), 422, "VALIDATION"),
        (json!({ "text": 5 }), 422, "VALIDATION"),
        (json!({}), 422, "VALIDATION"),
        (json!({ "text": "/shrug", "extra": true }), 422, "VALIDATION"),
    ] {
        let reply = app.act(Method::POST, "owner", &path, body.clone()).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.body);
        assert_eq!(reply.body["code"], code, "{body}: {}", reply.body);
    }
    let unknown = app
        .act(
            Method::POST,
            "owner",
            "/rooms/no-such-room/commands",
            json!({ "text": "/shrug" }),
        )
        .await;
    assert!(matches!(unknown.status.as_u16(), 403 | 404), "{}", unknown.body);
    let anonymous = app
        .call(
            Method::POST,
            &format!("/api{path}"),
            None,
            Some(json!({ "text": "/shrug" })),
        )
        .await;
    anonymous.assert_error(401, "UNAUTHORIZED");
    assert!(
        posts(app.read_all("owner", &room, "desc", 50).await).is_empty(),
        "nothing ran"
    );
}

async fn emoji_are_suggested_by_shortcode(backend: Backend) {
    let app = spawn_app(&backend);
    let found = app.call(Method::GET, "/api/emoji?q=tad", Some("alice"), None).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    assert_eq!(
        found.body[0],
        json!({ "shortcode": "tada", "emoji": "🎉", "name": "party popper" })
    );
    let few = app
        .call(Method::GET, "/api/emoji?q=s&limit=3", Some("alice"), None)
        .await;
    assert_eq!(few.body.as_array().unwrap().len(), 3, "{}", few.body);
    for path in [
        "/api/emoji",
        "/api/emoji?q=",
        "/api/emoji?q=a%20b",
        "/api/emoji?q=a&limit=0",
        "/api/emoji?q=a&limit=x",
    ] {
        let reply = app.call(Method::GET, path, Some("alice"), None).await;
        assert!(
            matches!(reply.status.as_u16(), 400 | 422),
            "{path}: {} {}",
            reply.status,
            reply.body
        );
        assert!(reply.body["code"].is_string(), "{path}: {}", reply.body);
    }
    app.call(Method::GET, "/api/emoji?q=tad", None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}
