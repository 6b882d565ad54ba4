//! The permission matrix, driven by the operation map itself: for every message type, every
//! operation and every kind of caller, the HTTP answer is what `who_may` says — 400 when the
//! type does not support the operation (for everyone), 403 when the caller may not, success
//! otherwise.

use reqwest::{Method, StatusCode};
use serde_json::json;
use tabletalk::messages::MessageType;
use tabletalk::messages::operations::{Operation, Who, who_may};
use tabletalk::service::send::Submission;

use crate::helpers::{Backend, TestApp, backend_tests, principal, spawn_app};

backend_tests!(
    every_type_operation_and_caller_answers_as_the_map_says,
    members_create_only_messages_and_polls,
);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Caller {
    Author,
    Member,
    Moderator,
    Owner,
}

impl Caller {
    fn user(self) -> &'static str {
        match self {
            Caller::Author => "author",
            Caller::Member => "member",
            Caller::Moderator => "moderator",
            Caller::Owner => "owner",
        }
    }

    /// Whether the map lets this caller perform an operation whose rule is `who`.
    fn allowed(self, who: Who) -> bool {
        match who {
            Who::AnyMember => true,
            Who::Author => self != Caller::Member,
            Who::ManageMessages => matches!(self, Caller::Moderator | Caller::Owner),
        }
    }
}

/// A fresh message of `kind` by "author": members' types over HTTP, the server's and
/// webhooks' through the service, as the server itself writes them.
async fn message_of(app: &TestApp, backend: &Backend, room: &str, kind: MessageType) -> String {
    let body = match kind {
        MessageType::Message => json!({ "text": "hello" }),
        MessageType::Poll => json!({ "type": "Poll", "poll": { "question": "?", "options": ["a", "b"] } }),
        _ => {
            let chat = backend.chat().await;
            let room = tabletalk::ids::RoomId::parse(room).unwrap();
            let line = chat
                .sending
                .submit(&room, Submission::line(kind, &principal("author"), "a line"))
                .await
                .unwrap();
            return line.message.id;
        }
    };
    let reply = app
        .act(Method::POST, "author", &format!("/rooms/{room}/messages"), body)
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// Performs `operation` and returns the status that counts: for a forward, the one room's.
async fn perform(app: &TestApp, user: &str, room: &str, other: &str, id: &str, operation: Operation) -> u16 {
    let at = format!("/rooms/{room}/messages/{id}");
    let reply = match operation {
        Operation::Edit => app.act(Method::PATCH, user, &at, json!({ "text": "edited" })).await,
        Operation::Delete => app.call(Method::DELETE, &format!("/api{at}"), Some(user), None).await,
        Operation::Pin => app.call(Method::POST, &format!("/api{at}/pin"), Some(user), None).await,
        Operation::Vote => {
            app.act(Method::PUT, user, &format!("{at}/vote"), json!({ "optionId": "1" }))
                .await
        }
        Operation::React => {
            let path = format!("/api{at}/reactions/%F0%9F%91%8D");
            app.call(Method::PUT, &path, Some(user), None).await
        }
        Operation::Reply => {
            let body = json!({ "text": "re", "replyTo": id });
            app.act(Method::POST, user, &format!("/rooms/{room}/messages"), body)
                .await
        }
        Operation::Forward => {
            let reply = app
                .act(
                    Method::POST,
                    user,
                    &format!("{at}/forward"),
                    json!({ "roomIds": [other] }),
                )
                .await;
            if reply.status == StatusCode::OK {
                return reply.body[0]["status"].as_u64().unwrap() as u16;
            }
            reply
        }
        Operation::Report => {
            app.act(Method::POST, user, &format!("{at}/report"), json!({ "reason": "spam" }))
                .await
        }
    };
    if !reply.status.is_success() {
        let code = reply.body["code"].as_str().unwrap_or_default();
        assert!(
            matches!(code, "BAD_REQUEST" | "FORBIDDEN"),
            "{operation:?}: {}",
            reply.body
        );
    }
    reply.status.as_u16()
}

async fn every_type_operation_and_caller_answers_as_the_map_says(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    let other = app.create_room("owner").await;
    for user in ["author", "member", "moderator"] {
        app.join(user, &room).await;
        app.join(user, &other).await;
    }
    app.grant("owner", &room, "moderator", &["ManageMessages"], 10).await;

    let mut checked = 0;
    for kind in MessageType::ALL {
        for operation in Operation::ALL {
            for caller in [Caller::Author, Caller::Member, Caller::Moderator, Caller::Owner] {
                let id = message_of(&app, &backend, &room, kind).await;
                let status = perform(&app, caller.user(), &room, &other, &id, operation).await;
                let expected = match who_may(kind, operation) {
                    None => 400,
                    Some(who) if !caller.allowed(who) => 403,
                    Some(_) => match operation {
                        Operation::Delete => 204,
                        Operation::Reply | Operation::Forward | Operation::Report => 201,
                        _ => 200,
                    },
                };
                assert_eq!(status, expected, "{backend:?}: {kind:?} × {operation:?} × {caller:?}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 7 * 8 * 4);
}

async fn members_create_only_messages_and_polls(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("owner").await;
    for kind in MessageType::ALL {
        let body = match kind {
            MessageType::Poll => json!({ "type": "Poll", "poll": { "question": "?", "options": ["a", "b"] } }),
            other => json!({ "type": other.as_str(), "text": "I joined, honest" }),
        };
        let reply = app
            .act(Method::POST, "owner", &format!("/rooms/{room}/messages"), body)
            .await;
        match kind {
            MessageType::Message | MessageType::Poll => assert_eq!(reply.status, StatusCode::CREATED),
            _ => reply.assert_error(403, "FORBIDDEN"),
        }
    }
}
