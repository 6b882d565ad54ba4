//! Companion rows of messages in `MessagesMetadata`: one row per (message, emoji, user) for a
//! reaction, `<message key>:r:<emoji>:<user>`, and one per (message, user) for a poll vote,
//! `<message key>:v:<user>`. Because every row starts with its message's fixed-width key, the
//! rows of a whole page of messages are one range read, and a message's own are one prefix.
//! A message's link preview (`store::previews`) and its images' thumbnails,
//! `<message key>:t:<attachment id>`, are companion rows too.

use std::ops::Bound;

use super::error::Result;
use super::schema::{reaction_key, thumbnail_row_key, vote_key};
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::keys::MessageKey;
use tabletalk_tables::{Entity, RangeQuery, UpdateMode, Value};

/// A member's mark on a message.
#[derive(Debug, Clone, Copy)]
pub enum Companion<'a> {
    Reaction { emoji: &'a str },
    Vote { option_id: &'a str },
}

/// A companion row as read back.
#[derive(Debug, Clone)]
pub struct CompanionRow {
    pub message_id: String,
    pub user_id: Option<String>,
    pub kind: CompanionKind,
}

#[derive(Debug, Clone)]
pub enum CompanionKind {
    Reaction {
        emoji: String,
    },
    Vote {
        option_id: String,
    },
    /// The message's link preview (`None`: its author removed it); see `store::previews`.
    Preview(Option<tabletalk_domain::messages::previews::LinkPreview>),
    /// The thumbnail of one of its image attachments was made: the image's size.
    Thumbnail {
        attachment_id: String,
        width: u32,
        height: u32,
    },
}

/// Every companion row of one message.
pub fn companion_rows(room: &RoomId, message: &MessageKey) -> RangeQuery {
    RangeQuery::prefix(room.as_str(), &format!("{}:", message.as_str()), 1000)
}

fn key_of(message: &MessageKey, user: &UserId, companion: Companion<'_>) -> String {
    match companion {
        Companion::Reaction { emoji } => reaction_key(message, emoji, user),
        Companion::Vote { .. } => vote_key(message, user),
    }
}

/// Reactions and poll votes, the companion rows of messages. Holds the tables it uses and, as
/// fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct CompanionStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl CompanionStore {
    /// Writes `user`'s companion of a message (again is a no-op; a vote replaces their vote).
    pub async fn put_companion(
        &self,
        room: &RoomId,
        message: &MessageKey,
        user: &UserId,
        companion: Companion<'_>,
    ) -> Result<()> {
        let mut row = Entity::new(room.as_str(), key_of(message, user, companion))
            .with("userId", Value::String(user.to_string()));
        match companion {
            Companion::Reaction { emoji } => row.set("emoji", Value::String(emoji.to_owned())),
            Companion::Vote { option_id } => row.set("optionId", Value::String(option_id.to_owned())),
        }
        self.tables
            .upsert(&self.schema.metadata, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Removes `user`'s companion of a message (absent is a no-op); for a vote, `companion`
    /// names no option.
    pub async fn delete_companion(
        &self,
        room: &RoomId,
        message: &MessageKey,
        user: &UserId,
        companion: Companion<'_>,
    ) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.metadata,
            room.as_str(),
            &key_of(message, user, companion),
        )
        .await
    }

    /// Records that the thumbnail of the message's attachment `attachment` is made, with the
    /// image's size (again is a no-op).
    pub async fn attach_thumbnail(
        &self,
        room: &RoomId,
        message: &MessageKey,
        attachment: &str,
        width: u32,
        height: u32,
    ) -> Result<()> {
        let row = Entity::new(room.as_str(), thumbnail_row_key(message, attachment))
            .with("width", Value::Int64(i64::from(width)))
            .with("height", Value::Int64(i64::from(height)));
        self.tables
            .upsert(&self.schema.metadata, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Forgets the thumbnail of the message's attachment `attachment` (absent is a no-op).
    pub async fn detach_thumbnail(&self, room: &RoomId, message: &MessageKey, attachment: &str) -> Result<()> {
        let key = thumbnail_row_key(message, attachment);
        crate::delete_if_present(&self.tables, &self.schema.metadata, room.as_str(), &key).await
    }

    /// Deletes every companion row of a message.
    pub async fn delete_companions(&self, room: &RoomId, message: &MessageKey) -> Result<()> {
        self.tables
            .delete_range(&self.schema.metadata, &companion_rows(room, message))
            .await?;
        Ok(())
    }

    /// The companion rows of every message whose id lies in `low..=high`, up to `max`.
    pub async fn companions(&self, room: &RoomId, low: &str, high: &str, max: usize) -> Result<Vec<CompanionRow>> {
        // Every companion row of a message is `<key>:…`, and ';' follows ':'.
        let query = RangeQuery::partition(room.as_str(), 1000)
            .from(Bound::Included(format!("{low}:")))
            .to(Bound::Excluded(format!("{high};")));
        let (rows, _) = self.tables.query_up_to(&self.schema.metadata, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let (message_id, rest) = row.row_key.split_once(':')?;
                let kind = if rest.starts_with("r:") {
                    CompanionKind::Reaction {
                        emoji: row.str("emoji")?.to_owned(),
                    }
                } else if rest.starts_with("v:") {
                    CompanionKind::Vote {
                        option_id: row.str("optionId")?.to_owned(),
                    }
                } else if rest == "p" {
                    CompanionKind::Preview(super::previews::preview_of(row))
                } else if let Some(attachment_id) = rest.strip_prefix("t:") {
                    CompanionKind::Thumbnail {
                        attachment_id: attachment_id.to_owned(),
                        width: u32::try_from(row.i64("width")?).ok()?,
                        height: u32::try_from(row.i64("height")?).ok()?,
                    }
                } else {
                    return None;
                };
                Some(CompanionRow {
                    message_id: message_id.to_owned(),
                    user_id: row.str("userId").map(str::to_owned),
                    kind,
                })
            })
            .collect())
    }
}
