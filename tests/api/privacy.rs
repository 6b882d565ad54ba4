//! Private rooms, the directory of public ones, and invitations: a private room answers a
//! stranger exactly as a missing room does, whatever they try; the directory lists public
//! rooms only, searchable by the words of their names; an invitation (for a user, or a code)
//! is the only way into a private room, and a code that is expired, used up or revoked
//! answers exactly as one that never existed.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{forward, get_message, react};
use crate::helpers::{Backend, Reply, TestApp, backend_tests, spawn_app};
use crate::moderation_log::whole_log;

backend_tests!(
    a_private_room_answers_a_stranger_exactly_as_a_missing_room,
    the_directory_lists_public_rooms_by_name_and_finds_them_by_word,
    an_invited_user_joins_a_private_room_and_nobody_else_does,
    a_code_that_is_expired_used_up_or_revoked_answers_as_a_missing_one,
    a_forward_from_a_private_room_shows_its_source_only_to_its_members,
    bad_input_to_the_privacy_routes_gets_its_documented_error,
    accepting_or_redeeming_into_a_private_room_or_a_dm_answers_as_for_a_missing_room,
);

async fn private_room(app: &TestApp, owner: &str, name: &str) -> String {
    let created = app
        .call(Method::POST, "/api/rooms", Some(owner), Some(json!({ "name": name })))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        created.body["visibility"], "private",
        "a new room is private by default"
    );
    created.body["id"].as_str().unwrap().to_owned()
}

async fn public_room(app: &TestApp, owner: &str, name: &str) -> String {
    let created = app
        .call(
            Method::POST,
            "/api/rooms",
            Some(owner),
            Some(json!({ "name": name, "visibility": "public" })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    created.body["id"].as_str().unwrap().to_owned()
}

/// The names the directory lists for `query` (`q`, `limit`, `cursor` as given), and its cursor.
async fn directory(app: &TestApp, user: &str, query: &str) -> (Vec<String>, Option<String>) {
    let reply = app
        .call(Method::GET, &format!("/api/rooms/directory?{query}"), Some(user), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let names = reply.body["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    (names, reply.body["cursor"].as_str().map(str::to_owned))
}

async fn invite(app: &TestApp, user: &str, room: &str, body: Value) -> Reply {
    app.act(Method::POST, user, &format!("/rooms/{room}/invites"), body)
        .await
}

async fn redeem(app: &TestApp, user: &str, code: &str) -> Reply {
    app.act(Method::POST, user, "/invites/redeem", json!({ "code": code }))
        .await
}

/// Status and body, for comparing two answers.
fn answer(reply: &Reply) -> (StatusCode, Value) {
    (reply.status, reply.body.clone())
}

async fn a_private_room_answers_a_stranger_exactly_as_a_missing_room(backend: Backend) {
    let app = spawn_app(&backend);
    let room = private_room(&app, "alice", "secret plans").await;
    let message = app.post("alice", &room, "the plan").await;
    let missing = uuid::Uuid::new_v4().to_string();

    let tries = |room: String| {
        let message = message.clone();
        let app = &app;
        async move {
            vec![
                app.call(Method::POST, &format!("/api/rooms/{room}/join"), Some("carol"), None)
                    .await,
                app.call(Method::GET, &format!("/api/rooms/{room}"), Some("carol"), None)
                    .await,
                app.call(Method::GET, &format!("/api/rooms/{room}/messages"), Some("carol"), None)
                    .await,
                get_message(app, "carol", &room, &message).await,
                react(app, Method::PUT, "carol", &room, &message, "👍").await,
                app.send("carol", &room, "let me in", None).await,
            ]
        }
    };
    let stranger = tries(room.clone()).await;
    let nothing = tries(missing).await;
    for (seen, expected) in stranger.iter().zip(&nothing) {
        assert_eq!(seen.status, StatusCode::NOT_FOUND, "{backend:?}: {}", seen.body);
        assert_eq!(
            answer(seen),
            answer(expected),
            "{backend:?}: the private room is told apart"
        );
    }
    let (listed, _) = directory(&app, "carol", "q=secret").await;
    assert!(
        listed.is_empty(),
        "{backend:?}: a private room is not listed: {listed:?}"
    );
    let seen = get_message(&app, "alice", &room, &message).await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
    assert!(
        !seen.body.to_string().contains("👍"),
        "{backend:?}: carol's reaction landed"
    );
    let page = app
        .call(Method::GET, &format!("/api/rooms/{room}/messages"), Some("alice"), None)
        .await;
    assert!(
        !page.body.to_string().contains("let me in"),
        "{backend:?}: carol's send landed"
    );
}

async fn the_directory_lists_public_rooms_by_name_and_finds_them_by_word(backend: Backend) {
    let app = spawn_app(&backend);
    let general = public_room(&app, "alice", "General chat").await;
    let music = public_room(&app, "alice", "Music lovers").await;
    public_room(&app, "bob", "Café corner").await;
    private_room(&app, "alice", "Generally secret").await;

    let (all, cursor) = directory(&app, "carol", "").await;
    assert_eq!(all, ["Café corner", "General chat", "Music lovers"], "{backend:?}");
    assert_eq!(cursor, None, "{backend:?}: the whole directory fits one page");
    assert_eq!(
        directory(&app, "carol", "q=gen").await.0,
        ["General chat"],
        "{backend:?}"
    );
    assert_eq!(directory(&app, "carol", "q=CHAT%20gen").await.0, ["General chat"]);
    assert_eq!(
        directory(&app, "carol", "q=cafe").await.0,
        ["Café corner"],
        "normalised"
    );
    assert!(
        directory(&app, "carol", "q=eneral").await.0.is_empty(),
        "words begin with the query"
    );

    // One room per page: the cursors walk the whole directory once.
    let mut walked = Vec::new();
    let mut query = "limit=1".to_owned();
    loop {
        let (page, cursor) = directory(&app, "carol", &query).await;
        walked.extend(page);
        match cursor {
            Some(cursor) => query = format!("limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(walked, all, "{backend:?}: paging lists each room once");

    // A public room anyone may join by id; made private, it leaves the directory and the id
    // no longer lets anyone in.
    app.join("carol", &general).await;
    let private = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{music}"),
            json!({ "visibility": "private" }),
        )
        .await;
    assert_eq!(private.status, StatusCode::OK, "{}", private.body);
    assert_eq!(directory(&app, "carol", "").await.0, ["Café corner", "General chat"]);
    let join = app
        .call(Method::POST, &format!("/api/rooms/{music}/join"), Some("dave"), None)
        .await;
    join.assert_error(404, "NOT_FOUND");

    // Renamed, it is listed once, under its new name.
    let renamed = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{general}"),
            json!({ "name": "Lounge" }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    assert_eq!(
        directory(&app, "carol", "").await.0,
        ["Café corner", "Lounge"],
        "{backend:?}"
    );
    assert!(directory(&app, "carol", "q=general").await.0.is_empty());

    // Deleted, it is gone from the directory.
    let deleted = app
        .call(Method::DELETE, &format!("/api/rooms/{general}"), Some("alice"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    assert_eq!(directory(&app, "carol", "").await.0, ["Café corner"], "{backend:?}");
}

async fn an_invited_user_joins_a_private_room_and_nobody_else_does(backend: Backend) {
    let app = spawn_app(&backend);
    let room = private_room(&app, "alice", "team").await;

    let invited = invite(&app, "alice", &room, json!({ "userId": "bob" })).await;
    assert_eq!(invited.status, StatusCode::CREATED, "{}", invited.body);
    assert_eq!(invited.body["userId"], "bob");
    assert!(invited.body.get("code").is_none(), "a user's invitation has no code");
    let pending = app.call(Method::GET, "/api/invites", Some("bob"), None).await;
    assert_eq!(pending.body.as_array().unwrap().len(), 1, "{}", pending.body);
    assert_eq!(pending.body[0]["roomId"], room.as_str());
    assert_eq!(pending.body[0]["roomName"], "team");
    assert_eq!(pending.body[0]["invitedBy"], "alice");
    let nothing_for_carol = app.call(Method::GET, "/api/invites", Some("carol"), None).await;
    assert_eq!(nothing_for_carol.body, json!([]), "only bob sees bob's invitation");

    // carol cannot take bob's invitation; bob can.
    let carol = app
        .call(
            Method::POST,
            &format!("/api/invites/{room}/accept"),
            Some("carol"),
            None,
        )
        .await;
    carol.assert_error(404, "NOT_FOUND");
    let accepted = app
        .call(Method::POST, &format!("/api/invites/{room}/accept"), Some("bob"), None)
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    assert_eq!(accepted.body["id"], room.as_str());
    app.post("bob", &room, "hello team").await;
    let used = app.call(Method::GET, "/api/invites", Some("bob"), None).await;
    assert_eq!(used.body, json!([]), "{backend:?}: an accepted invitation is gone");

    // A declined invitation lets nobody in.
    invite(&app, "alice", &room, json!({ "userId": "dave" })).await;
    let declined = app
        .call(
            Method::POST,
            &format!("/api/invites/{room}/decline"),
            Some("dave"),
            None,
        )
        .await;
    assert_eq!(declined.status, StatusCode::NO_CONTENT, "{}", declined.body);
    let late = app
        .call(Method::POST, &format!("/api/invites/{room}/accept"), Some("dave"), None)
        .await;
    late.assert_error(404, "NOT_FOUND");

    // A ban outlasts an invitation.
    let banned = app
        .act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/members/erin/ban"),
            json!({}),
        )
        .await;
    assert!(banned.status.is_success(), "{}", banned.body);
    let code = invite(&app, "alice", &room, json!({})).await.body["code"]
        .as_str()
        .unwrap()
        .to_owned();
    redeem(&app, "erin", &code).await.assert_error(403, "FORBIDDEN");

    // A member without ManageMembers lists and revokes only their own invitations.
    let bobs = invite(&app, "bob", &room, json!({ "maxUses": 5 })).await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/invites"), Some("bob"), None)
        .await;
    let ids: Vec<&str> = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [bobs.body["id"].as_str().unwrap()], "{}", listed.body);
    let everything = app
        .call(Method::GET, &format!("/api/rooms/{room}/invites"), Some("alice"), None)
        .await;
    assert_eq!(everything.body.as_array().unwrap().len(), 2, "{}", everything.body);
    assert!(!everything.body.to_string().contains(&code), "a code is never listed");
    let alices = everything
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["createdBy"] == "alice")
        .unwrap();
    let revoke = |user: &'static str, id: String| {
        let app = &app;
        let room = room.clone();
        async move {
            app.call(
                Method::DELETE,
                &format!("/api/rooms/{room}/invites/{id}"),
                Some(user),
                None,
            )
            .await
        }
    };
    revoke("bob", alices["id"].as_str().unwrap().to_owned())
        .await
        .assert_error(403, "FORBIDDEN");
    let own = revoke("bob", bobs.body["id"].as_str().unwrap().to_owned()).await;
    assert_eq!(own.status, StatusCode::NO_CONTENT, "{}", own.body);

    // The revocation is in the moderation log, with who did it.
    let log = whole_log(&app, "alice", &room).await;
    let revocations: Vec<&Value> = log.iter().filter(|e| e["action"] == "invitationRevoked").collect();
    assert_eq!(revocations.len(), 1, "{backend:?}: {log:?}");
    assert_eq!(revocations[0]["actorId"], "bob");
    assert_eq!(revocations[0]["details"]["invitationId"], bobs.body["id"]);
}

async fn a_code_that_is_expired_used_up_or_revoked_answers_as_a_missing_one(backend: Backend) {
    let app = spawn_app(&backend);
    let room = private_room(&app, "alice", "club").await;
    let code = |body: Value| {
        let app = &app;
        let room = room.clone();
        async move {
            let made = invite(app, "alice", &room, body).await;
            assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
            (
                made.body["code"].as_str().unwrap().to_owned(),
                made.body["id"].as_str().unwrap().to_owned(),
            )
        }
    };
    let (once, _) = code(json!({ "maxUses": 1 })).await;
    let (soon, _) = code(json!({ "expiresInSeconds": 1 })).await;
    let (revoked, revoked_id) = code(json!({})).await;

    let joined = redeem(&app, "bob", &once).await;
    assert_eq!(joined.status, StatusCode::OK, "{}", joined.body);
    assert_eq!(joined.body["id"], room.as_str());
    let again = redeem(&app, "bob", &once).await;
    assert_eq!(
        again.status,
        StatusCode::OK,
        "joining twice is a no-op and uses nothing"
    );
    let removed = app
        .call(
            Method::DELETE,
            &format!("/api/rooms/{room}/invites/{revoked_id}"),
            Some("alice"),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.body);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    // A code that never existed, for comparison: same room, random secret.
    let (never, _) = {
        let made = invite(&app, "alice", &room, json!({})).await;
        let real = made.body["code"].as_str().unwrap().to_owned();
        let id = made.body["id"].as_str().unwrap().to_owned();
        app.call(
            Method::DELETE,
            &format!("/api/rooms/{room}/invites/{id}"),
            Some("alice"),
            None,
        )
        .await;
        (real, id)
    };
    let expected = answer(&redeem(&app, "carol", &never).await);
    assert_eq!(expected.0, StatusCode::NOT_FOUND, "{}", expected.1);
    for (what, code) in [("used up", &once), ("expired", &soon), ("revoked", &revoked)] {
        let seen = redeem(&app, "carol", code).await;
        assert_eq!(answer(&seen), expected, "{backend:?}: a {what} code is told apart");
    }
    let members = app
        .call(Method::GET, &format!("/api/rooms/{room}/members"), Some("alice"), None)
        .await;
    assert_eq!(
        members.body.as_array().unwrap().len(),
        2,
        "alice and bob only: {}",
        members.body
    );
}

async fn a_forward_from_a_private_room_shows_its_source_only_to_its_members(backend: Backend) {
    let app = spawn_app(&backend);
    let private = private_room(&app, "alice", "board").await;
    let public = public_room(&app, "alice", "everyone").await;
    app.join("bob", &public).await;
    let original = app.post("alice", &private, "minutes").await;
    let forwarded = forward(&app, "alice", &private, &original, json!([public])).await;
    assert_eq!(forwarded.status, StatusCode::OK, "{}", forwarded.body);
    let copy = forwarded.body[0]["message"]["id"].as_str().unwrap().to_owned();

    let bob = get_message(&app, "bob", &public, &copy).await;
    assert_eq!(
        bob.body["forwardedFrom"],
        json!({ "messageId": original }),
        "{backend:?}"
    );
    let page = app
        .call(Method::GET, &format!("/api/rooms/{public}/messages"), Some("bob"), None)
        .await;
    assert!(!page.body.to_string().contains(&private), "{backend:?}: {}", page.body);
    let alice = get_message(&app, "alice", &public, &copy).await;
    assert_eq!(
        alice.body["forwardedFrom"]["roomId"],
        private.as_str(),
        "a member sees it"
    );
}

async fn bad_input_to_the_privacy_routes_gets_its_documented_error(backend: Backend) {
    let app = spawn_app(&backend);
    let room = private_room(&app, "alice", "r").await;
    let missing = uuid::Uuid::new_v4();
    let cases: Vec<(Method, String, Option<Value>, u16, &str)> = vec![
        (
            Method::POST,
            "/api/rooms".into(),
            Some(json!({ "name": "x", "visibility": "secret" })),
            422,
            "VALIDATION",
        ),
        (
            Method::PATCH,
            format!("/api/rooms/{room}"),
            Some(json!({ "visibility": 3 })),
            422,
            "VALIDATION",
        ),
        (
            Method::GET,
            "/api/rooms/directory?limit=0".into(),
            None,
            422,
            "VALIDATION",
        ),
        (
            Method::GET,
            "/api/rooms/directory?limit=101".into(),
            None,
            422,
            "VALIDATION",
        ),
        (
            Method::GET,
            "/api/rooms/directory?limit=many".into(),
            None,
            400,
            "BAD_REQUEST",
        ),
        (
            Method::GET,
            format!("/api/rooms/directory?q={}", "x".repeat(101)),
            None,
            422,
            "VALIDATION",
        ),
        (
            Method::GET,
            "/api/rooms/directory?cursor=bm90LWEta2V5".into(),
            None,
            422,
            "VALIDATION",
        ),
        (
            Method::GET,
            "/api/rooms/directory?cursor=%25%25".into(),
            None,
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "maxUses": 0 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "maxUses": 10001 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "expiresInSeconds": 0 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "expiresInSeconds": 2592001 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "userId": "" })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "userId": "bob", "maxUses": 2 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "userId": "alice" })),
            409,
            "CONFLICT",
        ),
        (
            Method::POST,
            format!("/api/rooms/{room}/invites"),
            Some(json!({ "surprise": 1 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            format!("/api/rooms/{missing}/invites"),
            Some(json!({})),
            404,
            "NOT_FOUND",
        ),
        (
            Method::GET,
            format!("/api/rooms/{missing}/invites"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            Method::DELETE,
            format!("/api/rooms/{room}/invites/not-an-id"),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            Method::DELETE,
            format!("/api/rooms/{room}/invites/{}", "0".repeat(32)),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            Method::POST,
            "/api/invites/not-a-room/accept".into(),
            None,
            404,
            "NOT_FOUND",
        ),
        (
            Method::POST,
            "/api/invites/redeem".into(),
            Some(json!({ "code": "garbage" })),
            404,
            "NOT_FOUND",
        ),
        (
            Method::POST,
            "/api/invites/redeem".into(),
            Some(json!({ "code": 5 })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            "/api/invites/redeem".into(),
            Some(json!({})),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            "/api/dms".into(),
            Some(json!({ "userId": "" })),
            422,
            "VALIDATION",
        ),
        (
            Method::POST,
            "/api/dms".into(),
            Some(json!({ "userId": "alice" })),
            422,
            "VALIDATION",
        ),
        (Method::POST, "/api/dms".into(), Some(json!({})), 422, "VALIDATION"),
    ];
    for (method, path, body, status, code) in cases {
        let reply = app.call(method.clone(), &path, Some("alice"), body.clone()).await;
        assert_eq!(
            (reply.status.as_u16(), reply.body["code"].as_str()),
            (status, Some(code)),
            "{backend:?}: {method} {path} {body:?}: {}",
            reply.body
        );
    }
    // Someone with no invitation, accepting or declining one.
    for action in ["accept", "decline"] {
        let reply = app
            .call(
                Method::POST,
                &format!("/api/invites/{room}/{action}"),
                Some("zed"),
                None,
            )
            .await;
        reply.assert_error(404, "NOT_FOUND");
    }
    for path in ["/api/rooms/directory", "/api/invites", "/api/dms"] {
        let method = if path == "/api/dms" { Method::POST } else { Method::GET };
        app.call(method, path, None, Some(json!({})))
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    let listed = app
        .call(Method::GET, &format!("/api/rooms/{room}/invites"), Some("alice"), None)
        .await;
    assert_eq!(
        listed.body,
        json!([]),
        "{backend:?}: no bad request left an invitation behind"
    );
}

/// A code made by hand for `room`: its id's bytes and a secret nobody was given.
fn forged_code(room: &str) -> String {
    use base64::Engine as _;
    let mut bytes = uuid::Uuid::parse_str(room).unwrap().into_bytes().to_vec();
    bytes.extend_from_slice(&rand::random::<[u8; 16]>());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

async fn accepting_or_redeeming_into_a_private_room_or_a_dm_answers_as_for_a_missing_room(backend: Backend) {
    let app = spawn_app(&backend);
    let room = private_room(&app, "alice", "hidden").await;
    // A direct conversation's id follows from the pair, so anyone can work it out.
    let dm = app.act(Method::POST, "alice", "/dms", json!({ "userId": "bob" })).await;
    let dm = dm.body["id"].as_str().unwrap().to_owned();
    let missing = uuid::Uuid::new_v4().to_string();

    let tries = |room: String| {
        let app = &app;
        async move {
            vec![
                app.call(
                    Method::POST,
                    &format!("/api/invites/{room}/accept"),
                    Some("carol"),
                    None,
                )
                .await,
                app.call(
                    Method::POST,
                    &format!("/api/invites/{room}/decline"),
                    Some("carol"),
                    None,
                )
                .await,
                redeem(app, "carol", &forged_code(&room)).await,
            ]
        }
    };
    let nothing = tries(missing).await;
    for existing in [room, dm] {
        let seen = tries(existing.clone()).await;
        for (seen, expected) in seen.iter().zip(&nothing) {
            assert_eq!(seen.status, StatusCode::NOT_FOUND, "{backend:?}: {}", seen.body);
            assert_eq!(
                answer(seen),
                answer(expected),
                "{backend:?}: {existing} is told apart from a missing room"
            );
        }
    }
}
