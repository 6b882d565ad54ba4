//! Reports: a member reports a message once; moderators read the open reports grouped by
//! message, most reported first, and resolve a group by dismissing it or deleting the message;
//! a reported message deleted by anyone leaves its reports resolved, in the moderation log.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, at, delete_message, get_message, moderator};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app, token};
use crate::moderation_log::whole_log;

backend_tests!(
    a_member_reports_a_message_once_and_a_repeat_changes_nothing,
    the_queue_groups_reports_by_message_most_reported_first,
    resolving_by_delete_leaves_a_moderated_tombstone_and_logs_both,
    a_dismissed_group_reopens_only_for_a_new_reporter,
    a_reported_message_deleted_by_its_author_leaves_its_reports_resolved,
    strangers_get_404_and_members_without_manage_messages_403,
    bad_input_on_the_report_routes_is_a_clear_4xx,
);

async fn report(app: &TestApp, user: &str, room: &str, id: &str, reason: &str) -> crate::helpers::Reply {
    let body = json!({ "reason": reason });
    app.call(Method::POST, &at(room, id, "/report"), Some(user), Some(body))
        .await
}

async fn queue(app: &TestApp, user: &str, room: &str) -> Vec<Value> {
    let reply = app
        .call(Method::GET, &format!("/api/rooms/{room}/reports"), Some(user), None)
        .await;
    assert_status(&reply, StatusCode::OK);
    reply.body["groups"].as_array().unwrap().clone()
}

async fn resolve(app: &TestApp, user: &str, room: &str, id: &str, body: Value) -> crate::helpers::Reply {
    let path = format!("/api/rooms/{room}/reports/{id}/resolve");
    app.call(Method::POST, &path, Some(user), Some(body)).await
}

/// A room owned by alice with members bob, carol, dave and erin.
async fn room_with_members(app: &TestApp) -> String {
    let room = app.create_room("alice").await;
    for user in ["bob", "carol", "dave", "erin"] {
        app.join(user, &room).await;
    }
    room
}

async fn a_member_reports_a_message_once_and_a_repeat_changes_nothing(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    let id = app.post("carol", &room, "buy cheap watches").await;
    let first = report(&app, "bob", &room, &id, "  spam  ").await;
    assert_status(&first, StatusCode::CREATED);
    assert_eq!(
        (
            &first.body["messageId"],
            &first.body["reporterId"],
            &first.body["reason"]
        ),
        (&json!(id), &json!("bob"), &json!("spam"))
    );
    let repeat = report(&app, "bob", &room, &id, "really spam").await;
    assert_status(&repeat, StatusCode::OK);
    assert_eq!(repeat.body, first.body, "a repeat answers the first report");

    let groups = queue(&app, "alice", &room).await;
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["count"], 1);
    assert_eq!(groups[0]["reports"].as_array().unwrap().len(), 1);
    assert_eq!(groups[0]["reports"][0]["reason"], "spam");
    assert_eq!(groups[0]["message"]["text"], "buy cheap watches");
}

async fn the_queue_groups_reports_by_message_most_reported_first(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    let once = app.post("alice", &room, "one report").await;
    let thrice = app.post("alice", &room, "three reports").await;
    let twice = app.post("alice", &room, "two reports").await;
    for (id, reporters) in [
        (&once, &["bob"][..]),
        (&thrice, &["bob", "carol", "dave"][..]),
        (&twice, &["erin", "carol"][..]),
    ] {
        for reporter in reporters {
            let filed = report(&app, reporter, &room, id, &format!("{reporter} says no")).await;
            assert_status(&filed, StatusCode::CREATED);
        }
    }
    let groups = queue(&app, "alice", &room).await;
    let order: Vec<(&str, u64)> = groups
        .iter()
        .map(|g| (g["messageId"].as_str().unwrap(), g["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(order, [(thrice.as_str(), 3), (twice.as_str(), 2), (once.as_str(), 1)]);
    let reporters: Vec<(&str, &str)> = groups[1]["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["reporterId"].as_str().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reporters,
        [("erin", "erin says no"), ("carol", "carol says no")],
        "oldest first"
    );
    assert_eq!(groups[1]["reports"][0]["reporterName"], "erin (test)");
}

async fn resolving_by_delete_leaves_a_moderated_tombstone_and_logs_both(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    moderator(&app, &room, "dave").await;
    let id = app.post("carol", &room, "nasty").await;
    for reporter in ["bob", "erin"] {
        assert_status(&report(&app, reporter, &room, &id, "nasty").await, StatusCode::CREATED);
    }
    let resolved = resolve(
        &app,
        "dave",
        &room,
        &id,
        json!({ "action": "delete", "reason": "hate" }),
    )
    .await;
    assert_status(&resolved, StatusCode::NO_CONTENT);

    get_message(&app, "bob", &room, &id)
        .await
        .assert_error(404, "NOT_FOUND");
    let feed = app.changes("bob", &[(&room, None)], None).await;
    let changes = feed.body["messageChanges"][0]["changes"].as_array().unwrap().clone();
    let tombstone = changes.iter().find(|c| c["message"]["id"] == id.as_str()).unwrap();
    assert_eq!(tombstone["kind"], "DELETED");
    assert_eq!(tombstone["message"]["moderated"], true);
    assert!(queue(&app, "dave", &room).await.is_empty(), "resolved");
    // A deleted message cannot be reported any more.
    report(&app, "alice", &room, &id, "late")
        .await
        .assert_error(404, "NOT_FOUND");

    let entries = whole_log(&app, "dave", &room).await;
    let delete = entries.iter().find(|e| e["action"] == "moderatedDelete").unwrap();
    let resolution = entries.iter().find(|e| e["action"] == "reportsResolved").unwrap();
    assert_eq!(
        (&delete["actorId"], &delete["reason"]),
        (&json!("dave"), &json!("hate"))
    );
    assert_eq!(delete["targetMessageId"], id.as_str());
    assert_eq!(resolution["actorId"], "dave");
    assert_eq!(
        resolution["details"],
        json!({ "resolution": "messageDeleted", "reports": 2 })
    );
    // Nothing is left open to resolve.
    resolve(&app, "dave", &room, &id, json!({ "action": "dismiss" }))
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn a_dismissed_group_reopens_only_for_a_new_reporter(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    let id = app.post("carol", &room, "borderline").await;
    assert_status(&report(&app, "bob", &room, &id, "meh").await, StatusCode::CREATED);
    let dismissed = resolve(&app, "alice", &room, &id, json!({ "action": "dismiss" })).await;
    assert_status(&dismissed, StatusCode::NO_CONTENT);
    assert!(queue(&app, "alice", &room).await.is_empty());
    assert_status(&get_message(&app, "bob", &room, &id).await, StatusCode::OK);

    // bob reported it before: still a no-op. erin had not: the group opens again, with hers.
    assert_status(&report(&app, "bob", &room, &id, "again").await, StatusCode::OK);
    assert!(queue(&app, "alice", &room).await.is_empty());
    assert_status(
        &report(&app, "erin", &room, &id, "no really").await,
        StatusCode::CREATED,
    );
    let groups = queue(&app, "alice", &room).await;
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["count"], 1);
    assert_eq!(groups[0]["reports"][0]["reporterId"], "erin");
    let resolution = whole_log(&app, "alice", &room).await;
    assert_eq!(resolution[0]["action"], "reportsResolved");
    assert_eq!(resolution[0]["details"]["resolution"], "dismissed");
}

async fn a_reported_message_deleted_by_its_author_leaves_its_reports_resolved(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    let id = app.post("carol", &room, "regrettable").await;
    let other = app.post("carol", &room, "also reported").await;
    assert_status(&report(&app, "bob", &room, &id, "mean").await, StatusCode::CREATED);
    assert_status(&report(&app, "bob", &room, &other, "mean").await, StatusCode::CREATED);
    assert_status(&delete_message(&app, "carol", &room, &id).await, StatusCode::NO_CONTENT);

    let groups = queue(&app, "alice", &room).await;
    let open: Vec<&str> = groups.iter().map(|g| g["messageId"].as_str().unwrap()).collect();
    assert_eq!(open, [other.as_str()]);
    let entries = whole_log(&app, "alice", &room).await;
    assert_eq!(
        entries.len(),
        1,
        "the author's own delete is no moderation: {entries:#?}"
    );
    assert_eq!(entries[0]["action"], "reportsResolved");
    assert_eq!(entries[0]["actorId"], "carol");
    assert_eq!(entries[0]["details"]["resolution"], "messageDeleted");
}

async fn strangers_get_404_and_members_without_manage_messages_403(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    app.grant("alice", &room, "dave", &["ManageMembers"], 10).await;
    let id = app.post("carol", &room, "hello").await;
    report(&app, "eve", &room, &id, "x")
        .await
        .assert_error(404, "NOT_FOUND");
    assert_status(&report(&app, "bob", &room, &id, "x").await, StatusCode::CREATED);
    let reports = format!("/api/rooms/{room}/reports");
    app.call(Method::GET, &reports, Some("eve"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    resolve(&app, "eve", &room, &id, json!({ "action": "dismiss" }))
        .await
        .assert_error(404, "NOT_FOUND");
    for user in ["bob", "dave"] {
        app.call(Method::GET, &reports, Some(user), None)
            .await
            .assert_error(403, "FORBIDDEN");
        resolve(&app, user, &room, &id, json!({ "action": "delete" }))
            .await
            .assert_error(403, "FORBIDDEN");
    }
    app.call(Method::GET, &reports, None, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    // Nothing was resolved on the way.
    assert_eq!(queue(&app, "alice", &room).await.len(), 1);
    assert_status(&get_message(&app, "bob", &room, &id).await, StatusCode::OK);
}

async fn bad_input_on_the_report_routes_is_a_clear_4xx(backend: Backend) {
    let app = spawn_app(&backend);
    let room = room_with_members(&app).await;
    let id = app.post("carol", &room, "hello").await;
    let long = "x".repeat(501);
    for body in [
        json!({ "reason": long }),
        json!({ "reason": "   " }),
        json!({}),
        json!({ "reason": 7 }),
        json!({ "reason": "x", "extra": 1 }),
    ] {
        app.call(Method::POST, &at(&room, &id, "/report"), Some("bob"), Some(body))
            .await
            .assert_error(422, "VALIDATION");
    }
    for unknown in ["0000000000000000001", "not-a-message", "1"] {
        report(&app, "bob", &room, unknown, "x")
            .await
            .assert_error(404, "NOT_FOUND");
        resolve(&app, "alice", &room, unknown, json!({ "action": "dismiss" }))
            .await
            .assert_error(404, "NOT_FOUND");
    }
    report(&app, "bob", "not-a-room", &id, "x")
        .await
        .assert_error(404, "NOT_FOUND");
    // The server's own lines cannot be reported: bob's join line is one.
    let lines = app.read_all("bob", &room, "desc", 50).await;
    let join_line = lines.iter().find(|m| m["type"] == "System").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    report(&app, "bob", &room, &join_line, "x")
        .await
        .assert_error(400, "BAD_REQUEST");
    // A message with no open reports has nothing to resolve.
    resolve(&app, "alice", &room, &id, json!({ "action": "dismiss" }))
        .await
        .assert_error(404, "NOT_FOUND");
    assert_status(&report(&app, "bob", &room, &id, "x").await, StatusCode::CREATED);
    for body in [
        json!({ "action": "ban" }),
        json!({}),
        json!({ "action": "dismiss", "reason": long }),
        json!({ "action": "dismiss", "extra": true }),
    ] {
        resolve(&app, "alice", &room, &id, body)
            .await
            .assert_error(422, "VALIDATION");
    }
    for path in [
        at(&room, &id, "/report"),
        format!("/api/rooms/{room}/reports/{id}/resolve"),
    ] {
        let malformed = app
            .http
            .post(format!("{}{path}", app.base))
            .bearer_auth(token("alice"))
            .header("content-type", "application/json")
            .body("{\"reason\":")
            .send()
            .await
            .unwrap();
        assert_eq!(malformed.status(), StatusCode::BAD_REQUEST, "{path}");
    }
    // Still open, untouched.
    assert_eq!(queue(&app, "alice", &room).await[0]["count"], 1);
}
