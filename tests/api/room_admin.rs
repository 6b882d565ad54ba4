//! Running a room: settings, roles and their ranks, moderation, and deleting a room with every
//! row it has.

use reqwest::{Method, StatusCode};
use serde_json::json;
use tabletalk::storage::RangeQuery;

use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    settings_need_manage_room_and_a_rename_is_announced,
    members_act_only_below_their_rank,
    deleting_a_room_leaves_no_row_of_it_in_any_table,
    members_keep_their_own_settings,
    changing_or_deleting_a_role_changes_what_its_members_may_do,
    a_timeout_outlives_leaving_rejoining_and_a_kick,
);

async fn settings_need_manage_room_and_a_rename_is_announced(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    app.join("ann", &room).await;
    app.act(
        Method::PATCH,
        "bob",
        &format!("/rooms/{room}"),
        json!({ "name": "mine" }),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    app.grant("owner", &room, "ann", &["ManageRoom"], 5).await;
    let renamed = app
        .act(
            Method::PATCH,
            "ann",
            &format!("/rooms/{room}"),
            json!({ "name": "<b>lunch</b>", "description": "food", "slowmodeSeconds": 30 }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    assert_eq!(renamed.body["name"], "<b>lunch</b>");
    assert_eq!(renamed.body["slowmodeSeconds"], 30);
    // ManageRoom does not include handing out permissions.
    app.act(
        Method::PATCH,
        "ann",
        &format!("/rooms/{room}"),
        json!({ "everyonePermissions": [] }),
    )
    .await
    .assert_error(403, "FORBIDDEN");

    let lines = app.read_all("bob", &room, "desc", 50).await;
    let rename = lines
        .iter()
        .find(|m| m["type"] == "EditRoom")
        .expect("an EditRoom line");
    // Names are carried as text, verbatim; only Message and Webhook text is HTML.
    assert_eq!(rename["text"], "ann (test) renamed the room to <b>lunch</b>.");
    let joins = lines.iter().filter(|m| m["type"] == "System").count();
    assert_eq!(joins, 2, "one line per join");
}

async fn members_act_only_below_their_rank(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    for user in ["mod1", "mod2", "bob"] {
        app.join(user, &room).await;
    }
    let both = ["ManageMembers", "ManageRoles"];
    let role = app.grant("owner", &room, "mod1", &both, 10).await;
    let same = app
        .act(
            Method::PUT,
            "owner",
            &format!("/rooms/{room}/members/mod2/roles"),
            json!({ "roleIds": [role] }),
        )
        .await;
    assert_eq!(same.status, StatusCode::OK);
    let kick = |by: &'static str, who: &'static str| {
        let path = format!("/api/rooms/{room}/members/{who}/kick");
        let app = &app;
        async move { app.call(Method::POST, &path, Some(by), None).await }
    };
    kick("mod1", "mod2").await.assert_error(403, "FORBIDDEN"); // an equal rank
    kick("mod1", "owner").await.assert_error(403, "FORBIDDEN");
    kick("bob", "mod1").await.assert_error(403, "FORBIDDEN"); // no permission
    // Roles at or above one's own rank, or with permissions one lacks, are out of reach.
    let roles = format!("/rooms/{room}/roles");
    app.act(Method::POST, "mod1", &roles, json!({ "name": "x", "position": 10 }))
        .await
        .assert_error(403, "FORBIDDEN");
    app.act(
        Method::POST,
        "mod1",
        &roles,
        json!({ "name": "x", "position": 3, "permissions": ["ManageRoom"] }),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    let lower = app
        .act(Method::POST, "mod1", &roles, json!({ "name": "helper", "position": 3 }))
        .await;
    assert_eq!(lower.status, StatusCode::CREATED, "{}", lower.body);

    // Nor can a role manager assign themselves a lower role that grants more than they hold.
    let owners = app
        .act(
            Method::POST,
            "owner",
            &roles,
            json!({ "name": "admins", "position": 5, "permissions": ["ManageRoom"] }),
        )
        .await;
    let admins = owners.body["id"].as_str().unwrap().to_owned();
    let mine = json!({ "roleIds": [role, admins] });
    app.act(Method::PUT, "mod1", &format!("/rooms/{room}/members/mod1/roles"), mine)
        .await
        .assert_error(403, "FORBIDDEN");
    app.act(
        Method::PATCH,
        "mod1",
        &format!("/rooms/{room}"),
        json!({ "name": "mine now" }),
    )
    .await
    .assert_error(403, "FORBIDDEN");

    assert_eq!(kick("mod1", "bob").await.status, StatusCode::NO_CONTENT);
    assert!(app.member("owner", &room, "bob").await.is_none(), "bob was removed");
    let bobs_rooms = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    assert_eq!(bobs_rooms.body, json!([]));
    app.send("bob", &room, "hi", None).await.assert_error(404, "NOT_FOUND");
    let lines = app.read_all("owner", &room, "desc", 50).await;
    assert!(
        lines
            .iter()
            .any(|m| m["type"] == "System" && m["text"] == "bob (test) was removed from the room.")
    );
    app.join("bob", &room).await; // a kick is not a ban
}

async fn deleting_a_room_leaves_no_row_of_it_in_any_table(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    let users = ["owner", "bob", "ann", "eve"];
    for user in &users[1..] {
        app.join(user, &room).await;
    }
    app.grant("owner", &room, "ann", &["ManageMessages"], 4).await;
    let ban = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/eve/ban"),
            json!({}),
        )
        .await;
    assert_eq!(ban.status, StatusCode::NO_CONTENT);
    let root = app.post("bob", &room, "root").await;
    for i in 0..150 {
        app.send("ann", &room, &format!("m{i}"), Some(&format!("c{i}"))).await;
    }
    let reply = json!({ "text": "reply", "replyTo": root });
    app.act(Method::POST, "ann", &format!("/rooms/{room}/messages"), reply)
        .await;
    let poll = json!({ "type": "Poll", "poll": { "question": "q", "options": ["a", "b"] } });
    let poll = app
        .act(Method::POST, "bob", &format!("/rooms/{room}/messages"), poll)
        .await;
    let poll = poll.body["id"].as_str().unwrap().to_owned();
    app.act(
        Method::PUT,
        "ann",
        &format!("/rooms/{room}/messages/{poll}/vote"),
        json!({ "optionId": "1" }),
    )
    .await;
    app.call(
        Method::PUT,
        &format!("/api/rooms/{room}/messages/{root}/reactions/ok"),
        Some("ann"),
        None,
    )
    .await;
    app.call(
        Method::POST,
        &format!("/api/rooms/{room}/messages/{root}/pin"),
        Some("bob"),
        None,
    )
    .await;

    let chat = backend.chat().await;
    let rows_of_room = || async {
        let mut rows = Vec::new();
        for table in chat.store().schema().all() {
            let query = RangeQuery::partition(room.clone(), 1000);
            let (found, _) = chat.store().tables().query_up_to(table, &query, 100_000).await.unwrap();
            rows.extend(found.into_iter().map(|e| format!("{table}/{}", e.row_key)));
        }
        for user in users {
            let index = chat
                .store()
                .tables()
                .get(&chat.store().schema().user_rooms, user, &room)
                .await
                .unwrap();
            rows.extend(index.map(|_| format!("UserRooms/{user}")));
        }
        rows
    };
    assert!(
        rows_of_room().await.len() > 300,
        "the room has rows in every table first"
    );

    app.call(Method::DELETE, &format!("/api/rooms/{room}"), Some("ann"), None)
        .await
        .assert_error(403, "FORBIDDEN");
    let deleted = app
        .call(Method::DELETE, &format!("/api/rooms/{room}"), Some("owner"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    assert_eq!(rows_of_room().await, Vec::<String>::new(), "{backend:?}");
    app.call(Method::GET, &format!("/api/rooms/{room}"), Some("owner"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.call(Method::POST, &format!("/api/rooms/{room}/join"), Some("bob"), None)
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn members_keep_their_own_settings(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    let change = json!({ "nickname": "Bobby", "notifications": "Mentions", "muted": true });
    let mine = app
        .act(Method::PATCH, "bob", &format!("/rooms/{room}/members/me"), change)
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
    assert_eq!(
        (&mine.body["nickname"], &mine.body["notifications"], &mine.body["muted"]),
        (&json!("Bobby"), &json!("Mentions"), &json!(true))
    );
    let listed = app.call(Method::GET, "/api/rooms", Some("bob"), None).await;
    assert_eq!(listed.body[0]["notifications"], "Mentions");
    assert_eq!(listed.body[0]["muted"], true);
    let bob = app.member("owner", &room, "bob").await.expect("bob is a member");
    assert_eq!(bob["nickname"], "Bobby");
    assert!(bob.get("muted").is_none(), "others' settings are private: {bob}");
    let sent = app.send("bob", &room, "hi", None).await;
    assert_eq!(sent.body["authorName"], "Bobby");
    // Absent fields stay; an empty nickname clears it.
    let cleared = app
        .act(
            Method::PATCH,
            "bob",
            &format!("/rooms/{room}/members/me"),
            json!({ "nickname": "" }),
        )
        .await;
    assert!(cleared.body.get("nickname").is_none());
    assert_eq!(cleared.body["notifications"], "Mentions");
}

async fn changing_or_deleting_a_role_changes_what_its_members_may_do(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    app.join("ann", &room).await;
    let role = app.grant("owner", &room, "ann", &["ManageMessages"], 5).await;
    let bobs = app.post("bob", &room, "bob's").await;
    let edit = |text: &'static str| {
        let path = format!("/rooms/{room}/messages/{bobs}");
        let app = &app;
        async move { app.act(Method::PATCH, "ann", &path, json!({ "text": text })).await }
    };
    assert_eq!(edit("moderated").await.status, StatusCode::OK);

    let changed = app
        .act(
            Method::PATCH,
            "owner",
            &format!("/rooms/{room}/roles/{role}"),
            json!({ "permissions": [] }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["permissions"], json!([]));
    assert_eq!(changed.body["position"], 5, "absent fields stay");
    edit("again").await.assert_error(403, "FORBIDDEN");

    app.act(
        Method::PATCH,
        "owner",
        &format!("/rooms/{room}/roles/{role}"),
        json!({ "permissions": ["ManageMessages"] }),
    )
    .await;
    assert_eq!(edit("and again").await.status, StatusCode::OK);
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/roles/{role}"),
            Some("owner"),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    edit("once more").await.assert_error(403, "FORBIDDEN");
    let roles = app
        .call(Method::GET, &format!("/api/rooms/{room}/roles"), Some("bob"), None)
        .await;
    assert_eq!(roles.body, json!([]));
}

/// A timeout is not shed by leaving and rejoining (nor by being kicked and rejoining): the
/// rejoined member is still timed out, until the timeout's own end.
async fn a_timeout_outlives_leaving_rejoining_and_a_kick(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    app.join("bob", &room).await;
    let until = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let timed_out = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/bob/timeout"),
            json!({ "until": until }),
        )
        .await;
    assert!(timed_out.status.is_success(), "{}", timed_out.body);
    app.send("bob", &room, "before", None)
        .await
        .assert_error(403, "FORBIDDEN");

    let leave = app
        .call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("bob"), None)
        .await;
    assert!(leave.status.is_success(), "{}", leave.body);
    app.join("bob", &room).await;
    app.send("bob", &room, "after rejoining", None)
        .await
        .assert_error(403, "FORBIDDEN");
    let member = app.member("owner", &room, "bob").await.expect("bob is a member again");
    assert!(member["timeoutUntil"].is_string(), "{member}");

    let kicked = app
        .act(
            Method::POST,
            "owner",
            &format!("/rooms/{room}/members/bob/kick"),
            json!({}),
        )
        .await;
    assert!(kicked.status.is_success(), "{}", kicked.body);
    app.join("bob", &room).await;
    app.send("bob", &room, "after a kick", None)
        .await
        .assert_error(403, "FORBIDDEN");

    // Another member who never had a timeout joins, leaves and rejoins free to talk.
    app.join("ann", &room).await;
    app.call(Method::POST, &format!("/api/rooms/{room}/leave"), Some("ann"), None)
        .await;
    app.join("ann", &room).await;
    assert_eq!(app.send("ann", &room, "hello", None).await.status.as_u16(), 201);
}
