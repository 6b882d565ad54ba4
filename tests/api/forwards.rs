//! Forwards: each target room answers on its own, what may not be forwarded is refused, and a
//! copy keeps the room it came from to itself. A room id is enough to join the room, so a
//! copy shows its source room only to readers who are members of it: in every read, in the
//! answers of operations on it, and never in the live signals to the target room's group.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, forward, get_message, ids, new_poll};
use crate::helpers::{Backend, Reply, TestApp, backend_tests, posts, spawn_app};
use crate::live::{Socket, connect_viewing, next_frame};

backend_tests!(
    a_forward_reports_each_room_on_its_own,
    forwards_to_too_many_or_repeated_rooms_and_of_polls_are_refused,
    a_forwarded_message_shows_its_source_room_only_to_members_of_it,
);

async fn a_forward_reports_each_room_on_its_own(backend: Backend) {
    let app = spawn_app(&backend);
    let mut rooms = Vec::new();
    for _ in 0..3 {
        let room = app.create_room("alice").await;
        app.join("bob", &room).await;
        rooms.push(room);
    }
    let (a, b, c) = (&rooms[0], &rooms[1], &rooms[2]);
    let read_only = app
        .act(
            Method::PATCH,
            "alice",
            &format!("/rooms/{b}"),
            json!({ "readOnly": true }),
        )
        .await;
    assert_status(&read_only, StatusCode::OK);
    let text = "<p>worth sharing</p>";
    let id = app.post("alice", a, text).await;
    let nowhere = uuid::Uuid::new_v4().to_string();

    let outcomes = forward(&app, "bob", a, &id, json!([b, c, nowhere])).await;
    assert_status(&outcomes, StatusCode::OK);
    let outcomes = outcomes.body.as_array().unwrap().clone();
    let rooms_in_order: Vec<&str> = outcomes.iter().map(|o| o["roomId"].as_str().unwrap()).collect();
    assert_eq!(rooms_in_order, [b.as_str(), c.as_str(), nowhere.as_str()]);

    assert_eq!(
        (outcomes[0]["status"].as_u64(), &outcomes[0]["error"]["code"]),
        (Some(403), &json!("FORBIDDEN"))
    );
    assert_eq!(outcomes[1]["status"], 201);
    let copy = &outcomes[1]["message"];
    assert_eq!(copy["text"], text);
    assert_eq!(copy["authorId"], "bob");
    assert_eq!(copy["forwardedFrom"], json!({ "roomId": a, "messageId": id }));
    assert_eq!(
        (outcomes[2]["status"].as_u64(), &outcomes[2]["error"]["code"]),
        (Some(404), &json!("NOT_FOUND"))
    );

    assert_eq!(
        ids(&posts(app.read_all("bob", c, "asc", 50).await)),
        [copy["id"].as_str().unwrap()]
    );
    assert!(posts(app.read_all("bob", b, "asc", 50).await).is_empty());
}

async fn forwards_to_too_many_or_repeated_rooms_and_of_polls_are_refused(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let other = app.create_room("alice").await;
    let id = app.post("alice", &room, "share").await;
    let eleven: Vec<String> = (0..11).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    forward(&app, "alice", &room, &id, json!(eleven))
        .await
        .assert_error(422, "VALIDATION");
    forward(&app, "alice", &room, &id, json!([other, other]))
        .await
        .assert_error(422, "VALIDATION");
    let poll = new_poll(&app, &room, &["yes", "no"]).await;
    forward(&app, "alice", &room, &poll, json!([other]))
        .await
        .assert_error(400, "BAD_REQUEST");
    assert!(
        app.read_all("alice", &other, "asc", 50).await.is_empty(),
        "nothing was forwarded"
    );
}

fn assert_ok(reply: &Reply) {
    assert!(reply.status.is_success(), "{}: {}", reply.status, reply.body);
}

/// The next `message.*` signal about `id` on the socket.
async fn signal_about(socket: &mut Socket, id: &str) -> Value {
    for _ in 0..20 {
        let frame = next_frame(socket).await;
        if frame["data"]["message"]["id"] == id {
            return frame;
        }
    }
    panic!("no signal about {id}");
}

/// Every answer carol gets about the copy, through every way a message is returned.
async fn what_carol_sees(app: &TestApp, target: &str, copy: &str) -> Vec<(&'static str, Reply)> {
    let message = format!("/api/rooms/{target}/messages/{copy}");
    let call = |method: Method, path: String| async move { app.call(method, &path, Some("carol"), None).await };
    vec![
        (
            "readMessages",
            call(Method::GET, format!("/api/rooms/{target}/messages?order=asc")).await,
        ),
        (
            "readMessages desc",
            call(Method::GET, format!("/api/rooms/{target}/messages")).await,
        ),
        ("getMessage", call(Method::GET, message.clone()).await),
        ("readThread", call(Method::GET, format!("{message}/thread")).await),
        ("pinMessage", call(Method::POST, format!("{message}/pin")).await),
        ("unpinMessage", call(Method::DELETE, format!("{message}/pin")).await),
        (
            "editMessage",
            app.act(
                Method::PATCH,
                "carol",
                &format!("/rooms/{target}/messages/{copy}"),
                json!({ "text": "moderated" }),
            )
            .await,
        ),
        ("messageChanges", app.changes("carol", &[(target, None)], None).await),
        ("followThread", call(Method::PUT, format!("{message}/follow")).await),
        ("listMyThreads", call(Method::GET, "/api/threads".into()).await),
    ]
}

async fn a_forwarded_message_shows_its_source_room_only_to_members_of_it(backend: Backend) {
    let app = spawn_app(&backend);
    let source = app.create_room("alice").await;
    let target = app.create_room("alice").await;
    for room in [&source, &target] {
        app.join("bob", room).await;
    }
    app.join("carol", &target).await;
    // carol moderates the target room: she may pin and edit anything in it.
    app.grant("alice", &target, "carol", &["ManageMessages"], 10).await;

    // carol listens to the target room's group.
    let (mut socket, _) = connect_viewing(&app, "carol", &target).await;

    let original = app.post("alice", &source, "<p>between us</p>").await;
    let body = json!({ "roomIds": [target] });
    let path = format!("/api/rooms/{source}/messages/{original}/forward");
    let forwarded = app.call(Method::POST, &path, Some("bob"), Some(body)).await;
    assert_ok(&forwarded);
    let copy = &forwarded.body[0]["message"];
    // bob forwarded it from a room he is in: his answer names that room.
    assert_eq!(
        copy["forwardedFrom"],
        json!({ "roomId": source, "messageId": original })
    );
    let copy = copy["id"].as_str().unwrap().to_owned();

    // The signal goes to every member of the target room: it never names the source.
    let created = signal_about(&mut socket, &copy).await;
    assert_eq!(created["data"]["type"], "message.created");
    assert_eq!(
        created["data"]["message"]["forwardedFrom"],
        json!({ "messageId": original })
    );
    let edit = json!({ "text": "still between us" });
    let edited = app
        .act(Method::PATCH, "bob", &format!("/rooms/{target}/messages/{copy}"), edit)
        .await;
    assert_ok(&edited);
    assert_eq!(
        edited.body["forwardedFrom"]["roomId"],
        source.as_str(),
        "bob may see it"
    );
    let updated = signal_about(&mut socket, &copy).await;
    assert_eq!(updated["data"]["type"], "message.updated");
    assert!(!updated.to_string().contains(&source), "{updated}");

    // carol is not in the source room: no answer she gets names it.
    for (what, reply) in what_carol_sees(&app, &target, &copy).await {
        assert_ok(&reply);
        assert!(
            !reply.body.to_string().contains(&source),
            "{backend:?}: {what} shows carol the source room: {}",
            reply.body
        );
    }
    let seen = get_message(&app, "carol", &target, &copy).await;
    assert_eq!(seen.body["forwardedFrom"], json!({ "messageId": original }));
    let threads = app.call(Method::GET, "/api/threads", Some("carol"), None).await;
    assert_eq!(
        threads.body[0]["root"]["forwardedFrom"],
        json!({ "messageId": original })
    );

    // Once she is a member of it, she sees where the copy came from.
    app.join("carol", &source).await;
    let seen = get_message(&app, "carol", &target, &copy).await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
    assert_eq!(seen.body["forwardedFrom"]["roomId"], source.as_str());
}
