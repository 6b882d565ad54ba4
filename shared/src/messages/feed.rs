//! The change feed's wire types (seed 004): the request, the per-conversation answer and its
//! statuses, one change. Answering it is `crate::service::feed`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Message, MessageType};

pub const MAX_CONVERSATIONS: usize = 100;
pub const DEFAULT_LIMIT: i64 = 100;
pub const MAX_LIMIT: i64 = 200;
/// Changes one request returns at most, over all its conversations.
pub const MAX_CHANGES_PER_REQUEST: usize = 1000;
/// Reads of one conversation before a purge running alongside is reported as busy.
pub(crate) const FLOOR_RACE_ATTEMPTS: usize = 3;

/// The body of a `messageChanges` call: `{ "input": MessageChangesInput }`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageChangesRequest {
    pub input: MessageChangesInput,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageChangesInput {
    /// The deployment's workspace id (`TABLETALK_WORKSPACE_ID`, default `default`).
    pub server_id: String,
    /// At most 100.
    #[schema(max_items = 100)]
    pub conversations: Vec<MessageChangeCursorInput>,
    /// Per conversation; clamped to 1..=200, default 100, lowered so one request returns at
    /// most 1000 changes (never below 1).
    #[serde(default)]
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageChangeCursorInput {
    /// A room id.
    pub conversation_id: String,
    /// A cursor from a previous call for this conversation; null reads from the beginning.
    /// A cursor issued for another conversation is refused (VALIDATION).
    #[serde(default)]
    pub after: Option<String>,
}

/// The answer: `{ "messageChanges": [...] }`, one entry per requested conversation.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageChangesResult {
    pub message_changes: Vec<ConversationChanges>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChangeStatus {
    /// The changes after `after`.
    Ok,
    /// The caller cannot read the conversation: nothing, the cursor echoed. Stop syncing it.
    NoAccess,
    /// The cursor is ahead of the room's counter or below its retention floor: the changes
    /// are read from the floor. Drop the cached copy first.
    Reset,
    /// The conversation could not be read this time (a store error): nothing, the cursor
    /// echoed, no `hasMore`. Keep the cached copy and the cursor, and ask again later.
    Unavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChangeKind {
    Created,
    Edited,
    Deleted,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationChanges {
    pub conversation_id: String,
    /// OK, NO_ACCESS, RESET (seed 004), or UNAVAILABLE: this conversation could not be read
    /// this time (no changes, the cursor echoed, no `hasMore`); the others are answered as
    /// usual. Keep the cached copy and the cursor, and ask again for it later.
    pub status: ChangeStatus,
    /// Store this; pass it back as `after`.
    pub cursor: String,
    /// More changes follow `cursor`: ask again right away.
    pub has_more: bool,
    /// Oldest first, by version.
    pub changes: Vec<MessageChange>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageChange {
    pub kind: ChangeKind,
    /// Decimal; increases with every change of the message.
    pub version: String,
    /// Null for a never-edited message.
    pub edited_at: Option<DateTime<Utc>>,
    pub message: FeedMessage,
}

/// A message as the feed carries it: its current state.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedMessage {
    pub id: String,
    /// The thread's root, for a reply.
    pub thread_id: Option<String>,
    pub author_id: String,
    pub author_name: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// Null for a deleted message.
    pub text: Option<String>,
    pub is_deleted: bool,
    pub sent_at: DateTime<Utc>,
    pub reply_to: Option<String>,
    /// Always empty: tabletalk stores no attachments yet, and a tombstone has none.
    pub attachments: Vec<String>,
}

impl MessageChange {
    pub(crate) fn of(message: Message) -> MessageChange {
        let live = message.is_live();
        let kind = match (live, message.edited_at) {
            (false, _) => ChangeKind::Deleted,
            (true, Some(_)) => ChangeKind::Edited,
            (true, None) => ChangeKind::Created,
        };
        MessageChange {
            kind,
            version: message.version.to_string(),
            edited_at: message.edited_at,
            message: FeedMessage {
                text: live.then_some(message.text),
                is_deleted: !live,
                id: message.id,
                thread_id: message.thread_id,
                author_id: message.author_id,
                author_name: message.author_name,
                kind: message.kind,
                sent_at: message.created_at,
                reply_to: message.reply_to,
                attachments: Vec::new(),
            },
        }
    }
}

/// The per-conversation limit for a request: clamped, then shared so that the request
/// returns at most [`MAX_CHANGES_PER_REQUEST`], never below one per conversation.
pub fn per_conversation_limit(limit: Option<i64>, conversations: usize) -> usize {
    let clamped = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    clamped.min((MAX_CHANGES_PER_REQUEST / conversations.max(1)).max(1))
}

/// An entry with nothing to say: the cursor as it was sent ("0" for none, which every room
/// takes as an initial sync).
pub(crate) fn unchanged(conversation: &MessageChangeCursorInput, status: ChangeStatus) -> ConversationChanges {
    ConversationChanges {
        conversation_id: conversation.conversation_id.clone(),
        status,
        cursor: conversation.after.clone().unwrap_or_else(|| "0".into()),
        has_more: false,
        changes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Chat;
    use crate::error::Error;
    use crate::ids::RoomId;

    #[test]
    fn limits_are_clamped_then_shared() {
        for (limit, expected) in [
            (None, 100),
            (Some(0), 1),
            (Some(1), 1),
            (Some(200), 200),
            (Some(201), 200),
        ] {
            assert_eq!(per_conversation_limit(limit, 1), expected, "{limit:?}");
        }
        assert_eq!(per_conversation_limit(Some(-5), 1), 1);
        assert_eq!(per_conversation_limit(None, 100), 10);
        assert_eq!(per_conversation_limit(Some(200), 7), 142);
        assert_eq!(per_conversation_limit(Some(3), 100), 3);
    }

    use crate::messages::send::NewMessage;
    use crate::rooms::NewRoom;
    use crate::service::testing::{alice, chat_on, store};
    use crate::storage::faults::FaultyTables;
    use crate::storage::{StoreError, Tables};

    fn ask(conversations: &[(&RoomId, Option<&str>)]) -> MessageChangesInput {
        MessageChangesInput {
            server_id: "default".into(),
            conversations: conversations
                .iter()
                .map(|(room, after)| MessageChangeCursorInput {
                    conversation_id: room.to_string(),
                    after: after.map(str::to_owned),
                })
                .collect(),
            limit: None,
        }
    }

    /// A second room alice owns, next to the one `chat_on` made.
    async fn another_room(chat: &Chat) -> RoomId {
        let room = NewRoom {
            name: "other".into(),
            description: None,
        };
        RoomId::parse(&chat.create_room(&alice(), room).await.unwrap().id).unwrap()
    }

    async fn post(chat: &Chat, room: &RoomId, text: &str) {
        chat.send_message(&alice(), room, NewMessage::text(text)).await.unwrap();
    }

    #[tokio::test]
    async fn a_cursor_from_another_conversation_is_refused() {
        let (chat, first) = chat_on(Tables::new(store())).await;
        let second = another_room(&chat).await;
        post(&chat, &first, "one").await;
        post(&chat, &second, "two").await;
        let answer = chat.message_changes(&alice(), ask(&[(&first, None)])).await.unwrap();
        let cursor = answer.message_changes[0].cursor.clone();

        let refused = chat
            .message_changes(&alice(), ask(&[(&second, Some(&cursor))]))
            .await
            .map(|a| a.message_changes[0].status);
        assert!(matches!(refused, Err(Error::Validation(_))), "{refused:?}");
        // The cursor still works where it was issued, and a plain version from before this
        // binding is still taken for whatever conversation it is sent with.
        let own = chat
            .message_changes(&alice(), ask(&[(&first, Some(&cursor))]))
            .await
            .unwrap();
        assert_eq!(own.message_changes[0].status, ChangeStatus::Ok);
        let legacy = chat
            .message_changes(&alice(), ask(&[(&second, Some("1"))]))
            .await
            .unwrap();
        assert_eq!(legacy.message_changes[0].status, ChangeStatus::Ok);
    }

    #[tokio::test]
    async fn a_store_error_in_one_conversation_leaves_the_others_answered() {
        let faults = FaultyTables::new(store());
        let (chat, first) = chat_on(Tables::new(faults.clone())).await;
        let second = another_room(&chat).await;
        post(&chat, &first, "one").await;
        post(&chat, &second, "two").await;
        // One of the two range reads of the feed fails.
        faults.fail_operation(
            "query",
            Some(&chat.store.schema.messages),
            1,
            StoreError::unavailable("injected"),
        );
        let answer = chat
            .message_changes(&alice(), ask(&[(&first, Some("0")), (&second, None)]))
            .await
            .expect("one conversation's failure does not fail the request");
        let entries = &answer.message_changes;
        let statuses: Vec<String> = entries
            .iter()
            .map(|e| serde_json::to_value(e).unwrap()["status"].as_str().unwrap().to_owned())
            .collect();
        let failed = statuses.iter().position(|s| s == "UNAVAILABLE").expect("{statuses:?}");
        let answered = 1 - failed;
        assert_eq!(statuses[answered], "OK", "{statuses:?}");
        assert!(!entries[answered].changes.is_empty());
        // The failed one: nothing, its cursor as sent, and no hasMore to spin on.
        assert!(entries[failed].changes.is_empty() && !entries[failed].has_more);
        assert_eq!(entries[failed].cursor, "0");
        // Asked again, it is answered.
        let again = chat
            .message_changes(&alice(), ask(&[(&[&first, &second][failed], Some("0"))]))
            .await
            .unwrap();
        assert_eq!(again.message_changes[0].status, ChangeStatus::Ok);
    }

    #[tokio::test]
    async fn the_cursor_of_an_initial_sync_of_a_purged_room_is_accepted_by_it() {
        let (chat, room) = chat_on(Tables::new(store())).await;
        post(&chat, &room, "soon gone").await;
        let purged = chat
            .store
            .purge_room(&room, Utc::now() + chrono::Duration::hours(1))
            .await
            .unwrap();
        assert!(purged > 0);
        assert!(chat.store.counter(&room).await.unwrap().floor > 0, "the floor moved up");

        let initial = chat.message_changes(&alice(), ask(&[(&room, None)])).await.unwrap();
        let entry = &initial.message_changes[0];
        assert_eq!((entry.status, entry.changes.len()), (ChangeStatus::Ok, 0));
        let next = chat
            .message_changes(&alice(), ask(&[(&room, Some(&entry.cursor))]))
            .await
            .unwrap();
        assert_eq!(
            next.message_changes[0].status,
            ChangeStatus::Ok,
            "the cursor {:?} was issued by this room",
            entry.cursor
        );
    }
}
