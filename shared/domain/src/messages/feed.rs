//! The change feed's wire types (docs/CATCHUP.md): the request, the per-conversation answer and its
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
pub const FLOOR_RACE_ATTEMPTS: usize = 3;

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
    /// OK, NO_ACCESS, RESET (docs/CATCHUP.md), or UNAVAILABLE: this conversation could not be read
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
    /// Who wrote it (see `Message::origin`): a client decides from it, as from a read's copy,
    /// what the author may do to it.
    pub origin: crate::messages::Origin,
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// Null for a deleted message.
    pub text: Option<String>,
    /// The Markdown `text` was rendered from (see `Message::source`); absent for HTML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub is_deleted: bool,
    /// True when someone other than the author deleted it (a moderator).
    pub moderated: bool,
    pub sent_at: DateTime<Utc>,
    pub reply_to: Option<String>,
    /// The message's files; none on a tombstone.
    pub attachments: Vec<crate::attachments::Attachment>,
}

impl MessageChange {
    pub fn of(message: Message) -> MessageChange {
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
                source: message.source.filter(|_| live),
                is_deleted: !live,
                moderated: message.moderated,
                id: message.id,
                thread_id: message.thread_id,
                author_id: message.author_id,
                author_name: message.author_name,
                origin: message.origin,
                kind: message.kind,
                sent_at: message.created_at,
                reply_to: message.reply_to,
                attachments: message.attachments,
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
pub fn unchanged(conversation: &MessageChangeCursorInput, status: ChangeStatus) -> ConversationChanges {
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
}
