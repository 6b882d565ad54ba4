//! The moderation log: every moderation action recorded with its actor, target and reason,
//! read newest first a page at a time by members with a moderation permission; the bans
//! listing; a moderated delete flagged in the change feed and its live signal.

use std::collections::HashSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, delete_message};
use crate::helpers::web_pubsub::start_hub;
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, spawn_app_with, token};

backend_tests!(
    every_moderation_action_is_logged_with_its_actor_and_reason,
    the_log_is_paged_newest_first_with_a_cursor,
    bans_are_listed_with_reason_author_and_end,
    strangers_get_404_and_members_without_a_moderation_permission_403,
    bad_input_on_the_moderation_routes_is_a_clear_4xx,
    a_moderated_delete_is_flagged_in_the_feed_and_its_live_signal,
);

/// Every entry of a room's log as `user` reads it, newest first.
pub(crate) async fn whole_log(app: &TestApp, user: &str, room: &str) -> Vec<Value> {
    let reply = app
        .call(
            Method::GET,
            &format!("/api/rooms/{room}/moderation-log?limit=100"),
            Some(user),
            None,
        )
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body["entries"].as_array().unwrap().clone()
}

fn in_an_hour() -> String {
    (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339()
}

async fn every_moderation_action_is_logged_with_its_actor_and_reason(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    for user in ["bob", "carol", "dave"] {
        app.join(user, &room).await;
    }
    let ok = |reply: crate::helpers::Reply| assert!(reply.status.is_success(), "{}", reply.body);
    let roles = format!("/rooms/{room}/roles");
    let role = app
        .act(
            Method::POST,
            "alice",
            &roles,
            json!({ "name": "mods", "permissions": ["ManageMessages"], "position": 5 }),
        )
        .await;
    assert_status(&role, StatusCode::CREATED);
    let role_id = role.body["id"].as_str().unwrap().to_owned();
    ok(app
        .act(
            Method::PATCH,
            "alice",
            &format!("{roles}/{role_id}"),
            json!({ "name": "moderators" }),
        )
        .await);
    ok(app
        .act(
            Method::PUT,
            "alice",
            &format!("/rooms/{room}/members/carol/roles"),
            json!({ "roleIds": [role_id] }),
        )
        .await);
    ok(app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{room}"),
            json!({ "slowmodeSeconds": 5, "everyonePermissions": [] }),
        )
        .await);
    let members = format!("/rooms/{room}/members");
    ok(app
        .act(
            Method::POST,
            "alice",
            &format!("{members}/bob/timeout"),
            json!({ "until": in_an_hour(), "reason": "cool down" }),
        )
        .await);
    ok(app
        .act(
            Method::POST,
            "alice",
            &format!("{members}/bob/kick"),
            json!({ "reason": "flooding" }),
        )
        .await);
    ok(app
        .act(
            Method::POST,
            "alice",
            &format!("{members}/dave/ban"),
            json!({ "reason": "abuse" }),
        )
        .await);
    ok(app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/bans/dave"),
            Some("alice"),
            None,
        )
        .await);
    // A moderated delete (alice deletes carol's message), a report dismissed, and a kick as it
    // was sent before kicks took a body: no body at all.
    let id = app.post("carol", &room, "off topic").await;
    assert_status(&delete_message(&app, "alice", &room, &id).await, StatusCode::NO_CONTENT);
    let reported = app.post("alice", &room, "fine really").await;
    ok(app
        .act(
            Method::POST,
            "carol",
            &format!("/rooms/{room}/messages/{reported}/report"),
            json!({ "reason": "rude" }),
        )
        .await);
    ok(app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/reports/{reported}/resolve"),
            json!({ "action": "dismiss", "reason": "not rude" }),
        )
        .await);
    app.join("bob", &room).await;
    let bare = app
        .http
        .post(format!("{}/api{members}/bob/kick", app.base))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::NO_CONTENT);
    ok(app
        .act(Method::DELETE, "alice", &format!("{roles}/{role_id}"), json!({}))
        .await);
    ok(app
        .act(
            Method::PUT,
            "alice",
            &format!("/rooms/{room}/owner"),
            json!({ "userId": "carol" }),
        )
        .await);

    let log = whole_log(&app, "carol", &room).await;
    let got: Vec<(&str, Option<&str>, Option<&str>)> = log
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["targetUserId"].as_str(),
                e["reason"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("ownershipTransferred", Some("carol"), None),
            ("roleDeleted", None, None),
            ("kick", Some("bob"), None),
            ("reportsResolved", None, Some("not rude")),
            ("moderatedDelete", Some("carol"), None),
            ("unban", Some("dave"), None),
            ("ban", Some("dave"), Some("abuse")),
            ("kick", Some("bob"), Some("flooding")),
            ("timeout", Some("bob"), Some("cool down")),
            ("everyonePermissionsChanged", None, None),
            ("roomSettingsChanged", None, None),
            ("memberRolesSet", Some("carol"), None),
            ("roleChanged", None, None),
            ("roleCreated", None, None),
        ],
        "{log:#?}"
    );
    for entry in &log {
        assert_eq!(entry["actorId"], "alice", "{entry}");
        assert!(entry["at"].is_string() && entry["id"].is_string(), "{entry}");
    }
    let by_action = |action: &str| log.iter().find(|e| e["action"] == action).unwrap().clone();
    assert_eq!(by_action("roleChanged")["targetRoleId"], role_id.as_str());
    assert_eq!(by_action("roleChanged")["details"]["name"], "moderators");
    assert_eq!(
        by_action("roomSettingsChanged")["details"],
        json!({ "slowmodeSeconds": 5 })
    );
    assert_eq!(by_action("everyonePermissionsChanged")["details"]["to"], json!([]));
    assert_eq!(by_action("moderatedDelete")["targetMessageId"], id.as_str());
    assert_eq!(by_action("reportsResolved")["targetMessageId"], reported.as_str());
    assert_eq!(by_action("reportsResolved")["details"]["resolution"], "dismissed");
    assert!(by_action("timeout")["details"]["until"].is_string());
}

async fn the_log_is_paged_newest_first_with_a_cursor(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    for i in 0..7 {
        let reply = app
            .act(
                Method::POST,
                "alice",
                &format!("/rooms/{room}/members/bob/timeout"),
                json!({ "until": in_an_hour(), "reason": format!("r{i}") }),
            )
            .await;
        assert_status(&reply, StatusCode::OK);
    }
    let mut reasons = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut path = format!("/api/rooms/{room}/moderation-log?limit=3");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = app.call(Method::GET, &path, Some("alice"), None).await;
        assert_status(&page, StatusCode::OK);
        let entries = page.body["entries"].as_array().unwrap();
        assert!(entries.len() <= 3);
        reasons.extend(entries.iter().map(|e| e["reason"].as_str().unwrap().to_owned()));
        pages += 1;
        if !page.body["hasMore"].as_bool().unwrap() {
            assert!(page.body["nextCursor"].is_null());
            break;
        }
        cursor = Some(page.body["nextCursor"].as_str().unwrap().to_owned());
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..7).rev().map(|i| format!("r{i}")).collect();
    assert_eq!(reasons, expected, "newest first, each once");
}

async fn bans_are_listed_with_reason_author_and_end(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.join("mod", &room).await;
    app.grant("alice", &room, "mod", &["ManageMembers"], 10).await;
    let until = (chrono::Utc::now() + chrono::Duration::days(2)).to_rfc3339();
    let ban = |by: &'static str, user: &'static str, body: Value| {
        let path = format!("/rooms/{room}/members/{user}/ban");
        let app = &app;
        async move { app.act(Method::POST, by, &path, body).await }
    };
    assert_status(
        &ban("mod", "bob", json!({ "until": until, "reason": "spam links" })).await,
        StatusCode::NO_CONTENT,
    );
    assert_status(&ban("alice", "eve", json!({})).await, StatusCode::NO_CONTENT);
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/bans"), Some("mod"), None)
        .await;
    assert_status(&listed, StatusCode::OK);
    let mut bans = listed.body.as_array().unwrap().clone();
    bans.sort_by_key(|b| b["userId"].as_str().unwrap().to_owned());
    assert_eq!(bans.len(), 2, "{bans:?}");
    assert_eq!(
        (&bans[0]["userId"], &bans[0]["bannedBy"]),
        (&json!("bob"), &json!("mod"))
    );
    assert_eq!(bans[0]["reason"], "spam links");
    let listed_until = chrono::DateTime::parse_from_rfc3339(bans[0]["until"].as_str().unwrap()).unwrap();
    let sent_until = chrono::DateTime::parse_from_rfc3339(&until).unwrap();
    assert!((listed_until - sent_until).num_seconds().abs() < 1);
    assert_eq!((&bans[1]["userId"], &bans[1]["until"]), (&json!("eve"), &Value::Null));
    assert!(bans[1].get("reason").is_none(), "no reason given: {}", bans[1]);
    // Lifted, a ban is no longer listed.
    let lifted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/bans/eve"),
            Some("alice"),
            None,
        )
        .await;
    assert_status(&lifted, StatusCode::NO_CONTENT);
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/bans"), Some("alice"), None)
        .await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1);
}

async fn strangers_get_404_and_members_without_a_moderation_permission_403(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.join("carol", &room).await;
    app.grant("alice", &room, "carol", &["ManageMessages"], 10).await;
    let log = format!("/api/rooms/{room}/moderation-log");
    let bans = format!("/api/rooms/{room}/bans");
    for path in [&log, &bans] {
        app.call(Method::GET, path, Some("eve"), None)
            .await
            .assert_error(404, "NOT_FOUND");
        app.call(Method::GET, path, Some("bob"), None)
            .await
            .assert_error(403, "FORBIDDEN");
        app.call(Method::GET, path, None, None)
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    // ManageMessages is a moderation permission: carol reads the log, but bans need
    // ManageMembers.
    assert_status(&app.call(Method::GET, &log, Some("carol"), None).await, StatusCode::OK);
    app.call(Method::GET, &bans, Some("carol"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    app.call(Method::GET, "/api/rooms/not-a-room/moderation-log", Some("alice"), None)
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn bad_input_on_the_moderation_routes_is_a_clear_4xx(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    app.join("bob", &room).await;
    app.join("bob", &other).await;
    for i in 0..2 {
        let path = format!("/rooms/{other}/members/bob/timeout");
        let body = json!({ "until": in_an_hour(), "reason": format!("{i}") });
        assert_status(&app.act(Method::POST, "alice", &path, body).await, StatusCode::OK);
    }
    let page = app
        .call(
            Method::GET,
            &format!("/api/rooms/{other}/moderation-log?limit=1"),
            Some("alice"),
            None,
        )
        .await;
    let foreign = page.body["nextCursor"].as_str().unwrap().to_owned();
    for query in [
        format!("cursor={foreign}"),
        "cursor=garbage!!".to_owned(),
        "cursor=eyJ2IjoxLCJyIjoieCJ9".to_owned(),
        "limit=0".to_owned(),
        "limit=101".to_owned(),
        "limit=-1".to_owned(),
        "limit=abc".to_owned(),
    ] {
        app.call(
            Method::GET,
            &format!("/api/rooms/{room}/moderation-log?{query}"),
            Some("alice"),
            None,
        )
        .await
        .assert_error(400, "BAD_REQUEST");
    }

    let long = "x".repeat(501);
    let members = format!("/rooms/{room}/members/bob");
    for (action, body) in [
        ("kick", json!({ "reason": long })),
        ("kick", json!({ "reason": 7 })),
        ("kick", json!({ "why": "x" })),
        ("ban", json!({ "reason": long })),
        ("timeout", json!({ "until": in_an_hour(), "reason": long })),
        ("timeout", json!({ "until": in_an_hour(), "reason": "bad\u{7}" })),
    ] {
        app.act(Method::POST, "alice", &format!("{members}/{action}"), body)
            .await
            .assert_error(422, "VALIDATION");
    }
    for action in ["kick", "ban", "timeout"] {
        let malformed = app
            .http
            .post(format!("{}/api{members}/{action}", app.base))
            .bearer_auth(token("alice"))
            .header("content-type", "application/json")
            .body("{\"reason\":")
            .send()
            .await
            .unwrap();
        assert_eq!(malformed.status(), StatusCode::BAD_REQUEST, "{action}");
    }
    // Nothing of it happened: bob is still a member, and the log is empty.
    assert!(app.member("alice", &room, "bob").await.is_some());
    assert!(whole_log(&app, "alice", &room).await.is_empty());
}

async fn a_moderated_delete_is_flagged_in_the_feed_and_its_live_signal(backend: Backend) {
    let (hub, connection) = start_hub(&[]).await;
    let app = spawn_app_with(&backend, &[("TABLETALK_WEBPUBSUB_CONNECTION", connection.as_str())]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let theirs = app.post("bob", &room, "moderate me").await;
    let own = app.post("bob", &room, "my own to delete").await;
    assert_status(
        &delete_message(&app, "alice", &room, &theirs).await,
        StatusCode::NO_CONTENT,
    );
    assert_status(&delete_message(&app, "bob", &room, &own).await, StatusCode::NO_CONTENT);

    let feed = app.changes("bob", &[(&room, None)], None).await;
    assert_status(&feed, StatusCode::OK);
    let changes = feed.body["messageChanges"][0]["changes"].as_array().unwrap();
    let change = |id: &str| changes.iter().find(|c| c["message"]["id"] == id).unwrap().clone();
    assert_eq!(change(&theirs)["kind"], "DELETED");
    assert_eq!(change(&theirs)["message"]["moderated"], true);
    assert_eq!(change(&own)["message"]["moderated"], false);
    let live = change(&own);
    assert_eq!(live["message"]["isDeleted"], true);

    let mut deleted = HashSet::new();
    for _ in 0..100 {
        deleted = hub
            .sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, body)| body["type"] == "message.deleted")
            .map(|(_, body)| {
                (
                    body["messageId"].as_str().unwrap().to_owned(),
                    body["moderated"].clone(),
                )
            })
            .collect::<HashSet<_>>();
        if deleted.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let expected: HashSet<(String, Value)> = [(theirs, json!(true)), (own, json!(false))].into_iter().collect();
    assert_eq!(deleted, expected);
}
