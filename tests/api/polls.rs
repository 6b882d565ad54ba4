//! Polls and votes: concurrent votes all count, a vote changes and is withdrawn, and what is not
//! a valid poll (or not a poll) is refused.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::messages::{assert_status, at, create_poll, edit, get_message, new_poll, vote};
use crate::helpers::{Backend, backend_tests, spawn_app};

backend_tests!(
    twenty_concurrent_votes_are_all_counted,
    a_vote_can_be_changed_and_withdrawn,
    polls_cannot_be_edited_and_messages_cannot_be_voted_on,
    invalid_polls_are_refused,
);

/// Votes per option id, in option order.
fn tallies(message: &Value) -> Vec<(String, u64)> {
    message["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["id"].as_str().unwrap().to_owned(), o["votes"].as_u64().unwrap()))
        .collect()
}

fn tally(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(id, n)| ((*id).to_owned(), *n)).collect()
}

async fn twenty_concurrent_votes_are_all_counted(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let created = create_poll(&app, "alice", &room, "Lunch?", &["Pizza", "Sushi", "Tacos"]).await;
    assert_status(&created, StatusCode::CREATED);
    assert_eq!(tallies(&created.body), tally(&[("1", 0), ("2", 0), ("3", 0)]));
    let poll = created.body["id"].as_str().unwrap().to_owned();
    let voters: Vec<String> = (0..20).map(|i| format!("u{i}")).collect();
    for voter in &voters {
        app.join(voter, &room).await;
    }

    let mut votes = tokio::task::JoinSet::new();
    for (i, voter) in voters.iter().enumerate() {
        let (http, url, voter) = (
            app.http.clone(),
            format!("{}{}", app.base, at(&room, &poll, "/vote")),
            voter.clone(),
        );
        let option = ["1", "2", "3"][i % 3];
        votes.spawn(async move {
            let response = http
                .put(url)
                .bearer_auth(crate::helpers::token(&voter))
                .json(&json!({ "optionId": option }))
                .send()
                .await
                .unwrap();
            (voter, response.status())
        });
    }
    for (voter, status) in votes.join_all().await {
        assert_eq!(status, StatusCode::OK, "{backend:?}: {voter}'s vote");
    }

    let read = get_message(&app, "u0", &room, &poll).await;
    assert_status(&read, StatusCode::OK);
    assert_eq!(
        tallies(&read.body),
        tally(&[("1", 7), ("2", 7), ("3", 6)]),
        "{backend:?}: every vote counted once"
    );
    assert_eq!(read.body["poll"]["myVote"], "1");
    assert_eq!(read.body["poll"]["question"], "Lunch?");
    let texts: Vec<&str> = read.body["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Pizza", "Sushi", "Tacos"]);
}

async fn a_vote_can_be_changed_and_withdrawn(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let poll = new_poll(&app, &room, &["Pizza", "Sushi"]).await;
    vote(&app, "alice", &room, &poll, json!("1")).await;
    let bobs = vote(&app, "bob", &room, &poll, json!("1")).await;
    assert_eq!(tallies(&bobs.body), tally(&[("1", 2), ("2", 0)]));
    assert_eq!(bobs.body["poll"]["myVote"], "1");

    let changed = vote(&app, "bob", &room, &poll, json!("2")).await;
    assert_eq!(tallies(&changed.body), tally(&[("1", 1), ("2", 1)]));
    assert_eq!(changed.body["poll"]["myVote"], "2");

    let withdrawn = vote(&app, "bob", &room, &poll, Value::Null).await;
    assert_status(&withdrawn, StatusCode::OK);
    assert_eq!(tallies(&withdrawn.body), tally(&[("1", 1), ("2", 0)]));
    assert!(withdrawn.body["poll"].get("myVote").is_none(), "{}", withdrawn.body);
    let read = get_message(&app, "bob", &room, &poll).await;
    assert!(read.body["poll"].get("myVote").is_none(), "{}", read.body);
    assert_eq!(
        get_message(&app, "alice", &room, &poll).await.body["poll"]["myVote"],
        "1"
    );

    vote(&app, "bob", &room, &poll, json!("9"))
        .await
        .assert_error(422, "VALIDATION");
}

async fn polls_cannot_be_edited_and_messages_cannot_be_voted_on(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let poll = new_poll(&app, &room, &["Pizza", "Sushi"]).await;
    edit(&app, "alice", &room, &poll, "x")
        .await
        .assert_error(400, "BAD_REQUEST");
    let message = app.post("alice", &room, "not a poll").await;
    vote(&app, "alice", &room, &message, json!("1"))
        .await
        .assert_error(400, "BAD_REQUEST");
}

async fn invalid_polls_are_refused(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let eleven: Vec<String> = (1..=11).map(|i| format!("option {i}")).collect();
    let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
    for (question, options) in [
        ("One?", &["only"][..]),
        ("Twice?", &["same", "same"][..]),
        ("   ", &["a", "b"][..]),
        ("Eleven?", &eleven[..]),
    ] {
        create_poll(&app, "alice", &room, question, options)
            .await
            .assert_error(422, "VALIDATION");
    }
    assert!(app.read_all("alice", &room, "asc", 50).await.is_empty());
}
