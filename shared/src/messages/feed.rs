//! `messageChanges`, the change feed, exactly as seed 004 specifies: what changed in these
//! conversations since the cursors a client stored, oldest first by version, one entry per
//! message at its newest version.
//!
//! Each conversation is answered on its own — OK, NO_ACCESS (not a member, or no such room:
//! nothing, cursor echoed) or RESET (the cursor is ahead of the room's counter, or below its
//! retention floor: read again from the floor) — so one conversation never stalls the others.
//! A null cursor is an initial sync: OK, from the floor (nothing live is below it).
//! A conversation costs a membership check, a counter read and one range read of its feed rows
//! (`versions`), whatever its size.
//!
//! The client's side (catch-up): store each conversation's `cursor`; after a reconnect, or when
//! a live signal arrives, call with the stored cursors and follow `hasMore`; apply every change
//! as an upsert keyed by message id, keeping the higher version; on RESET drop the cached copy
//! of that conversation first. docs/CATCHUP.md has the whole algorithm.

use std::ops::Bound;

use chrono::{DateTime, Utc};
use futures::future::try_join_all;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::versions::{feed_key, feed_version};
use super::{Message, MessageType};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::schema::FEED_PREFIX;
use crate::service::Chat;
use crate::storage::RangeQuery;

pub const MAX_CONVERSATIONS: usize = 100;
pub const DEFAULT_LIMIT: i64 = 100;
pub const MAX_LIMIT: i64 = 200;
/// Changes one request returns at most, over all its conversations.
pub const MAX_CHANGES_PER_REQUEST: usize = 1000;
/// Reads of one conversation before a purge running alongside is reported as busy.
const FLOOR_RACE_ATTEMPTS: usize = 3;

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
    /// A cursor from a previous call; null reads from the beginning.
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
    Ok,
    NoAccess,
    Reset,
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
    fn of(message: Message) -> MessageChange {
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

/// A cursor this API issues: a version, in decimal.
fn parse_cursor(text: &str) -> Result<u64> {
    let valid = !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit());
    valid
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| Error::validation(format!("{text:?} is not a cursor this API issued")))
}

/// The per-conversation limit for a request: clamped, then shared so that the request
/// returns at most [`MAX_CHANGES_PER_REQUEST`], never below one per conversation.
pub fn per_conversation_limit(limit: Option<i64>, conversations: usize) -> usize {
    let clamped = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    clamped.min((MAX_CHANGES_PER_REQUEST / conversations.max(1)).max(1))
}

impl Chat {
    pub async fn message_changes(&self, who: &Principal, input: MessageChangesInput) -> Result<MessageChangesResult> {
        if input.server_id != *self.workspace_id {
            return Err(Error::Forbidden(format!("no workspace {:?} here", input.server_id)));
        }
        if input.conversations.len() > MAX_CONVERSATIONS {
            return Err(Error::validation(format!(
                "at most {MAX_CONVERSATIONS} conversations per request"
            )));
        }
        let afters = input
            .conversations
            .iter()
            .map(|c| c.after.as_deref().map(parse_cursor).transpose())
            .collect::<Result<Vec<_>>>()?;
        let limit = per_conversation_limit(input.limit, input.conversations.len());
        let answers = input
            .conversations
            .iter()
            .zip(afters)
            .map(|(conversation, after)| self.conversation_changes(who, conversation, after, limit));
        Ok(MessageChangesResult {
            message_changes: try_join_all(answers).await?,
        })
    }

    async fn conversation_changes(
        &self,
        who: &Principal,
        conversation: &MessageChangeCursorInput,
        after: Option<u64>,
        limit: usize,
    ) -> Result<ConversationChanges> {
        // Nothing to say: the cursor as it was sent ("0" for none).
        let unchanged = |status| ConversationChanges {
            conversation_id: conversation.conversation_id.clone(),
            status,
            cursor: conversation.after.clone().unwrap_or_else(|| "0".into()),
            has_more: false,
            changes: Vec::new(),
        };
        let Ok(room) = RoomId::parse(&conversation.conversation_id) else {
            return Ok(unchanged(ChangeStatus::NoAccess));
        };
        match self.access(&room, &who.user_id).await {
            Ok(_) => {}
            Err(Error::NotFound(_)) => return Ok(unchanged(ChangeStatus::NoAccess)),
            Err(e) => return Err(e),
        }
        // A purge that lands between the counter read and the range read would move the floor
        // past a cursor answered as OK: read the counter again, and start over if it moved.
        for _ in 0..FLOOR_RACE_ATTEMPTS {
            let counter = self.counter(&room).await?;
            let (status, from) = match after {
                None => (ChangeStatus::Ok, counter.floor),
                Some(after) if after > counter.version || after < counter.floor => (ChangeStatus::Reset, counter.floor),
                Some(after) => (ChangeStatus::Ok, after),
            };
            let query = RangeQuery::partition(room.as_str(), limit + 1)
                .from(Bound::Excluded(feed_key(from)))
                .to(Bound::Excluded(feed_end()));
            let (rows, has_more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
            if self.counter(&room).await?.floor != counter.floor {
                continue;
            }
            if rows.is_empty() && status == ChangeStatus::Ok {
                return Ok(unchanged(status));
            }
            let mut cursor = from;
            let mut changes = Vec::with_capacity(rows.len());
            for row in &rows {
                cursor = feed_version(&row.row_key).unwrap_or(cursor);
                changes.push(MessageChange::of(Message::from_feed_entity(&room, row)?));
            }
            return Ok(ConversationChanges {
                conversation_id: conversation.conversation_id.clone(),
                status,
                cursor: cursor.to_string(),
                has_more,
                changes,
            });
        }
        Err(Error::Unavailable("the room is being purged; try again".into()))
    }
}

/// The first key after every feed row.
fn feed_end() -> String {
    let mut end = FEED_PREFIX.to_owned();
    end.pop();
    end.push(';');
    end
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

    #[test]
    fn cursors_are_versions() {
        assert_eq!(parse_cursor("0").unwrap(), 0);
        assert_eq!(parse_cursor("42").unwrap(), 42);
        for forged in ["", "-1", "4.2", "abc", "99999999999999999999999", " 1"] {
            assert!(matches!(parse_cursor(forged), Err(Error::Validation(_))), "{forged:?}");
        }
        assert!(feed_key(7) < feed_end() && feed_key(u64::MAX) < feed_end());
    }
}
