//! A room's own emoji: `emoji:<name>` in the room's `Rooms` partition, naming the attachment
//! that is its image (claimed for the emoji, so no message carries it) and who made it when.
//! The moderation log shares the partition, so each change commits with its log line.

use super::error::Result;
use super::moderation_log::log_op;
use super::schema::{EMOJI_PREFIX, emoji_key};
use tabletalk_domain::attachments::attachment_url;
use tabletalk_domain::emoji::{CustomEmoji, MAX_CUSTOM_PER_ROOM};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, Value};

fn parse(room: &RoomId, row: &Entity) -> Option<CustomEmoji> {
    let attachment_id = row.str("attachmentId")?.to_owned();
    Some(CustomEmoji {
        name: row.row_key.strip_prefix(EMOJI_PREFIX)?.to_owned(),
        url: attachment_url(room, &attachment_id),
        attachment_id,
        created_by: row.str("createdBy")?.to_owned(),
        created_at: row.datetime("createdAt")?,
    })
}

/// A room's own emoji. Holds the tables it uses.
#[derive(Debug, Clone)]
pub struct RoomEmojiStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl RoomEmojiStore {
    /// Stores a new emoji with its log line, in one transaction: a name taken is a 409.
    pub async fn insert(&self, room: &RoomId, emoji: &CustomEmoji, logged: &ModerationEntry) -> Result<()> {
        let row = Entity::new(room.as_str(), emoji_key(&emoji.name))
            .with("attachmentId", Value::String(emoji.attachment_id.clone()))
            .with("createdBy", Value::String(emoji.created_by.clone()))
            .with("createdAt", Value::datetime(emoji.created_at));
        let ops = [BatchOp::Insert(row), log_op(room, logged)];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => {
                Err(Error::Conflict(format!("the room has a :{}: already", emoji.name)).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The room's emoji `name`, if it has one, and the version of its row.
    pub async fn get(&self, room: &RoomId, name: &str) -> Result<Option<(CustomEmoji, ETag)>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &emoji_key(name))
            .await?;
        Ok(row.and_then(|row| Some((parse(room, &row)?, row.etag()?.clone()))))
    }

    /// The room's emoji, by name (at most [`MAX_CUSTOM_PER_ROOM`] and one more, to tell a full
    /// room): one range read.
    pub async fn list(&self, room: &RoomId) -> Result<Vec<CustomEmoji>> {
        let query = RangeQuery::prefix(room.as_str(), EMOJI_PREFIX, MAX_CUSTOM_PER_ROOM + 1);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_CUSTOM_PER_ROOM + 1)
            .await?;
        Ok(rows.iter().filter_map(|row| parse(room, row)).collect())
    }

    /// Deletes the room's emoji `name` at `version` with its log line; a missing one (or one
    /// made again under its name since) is a 404.
    pub async fn delete(&self, room: &RoomId, name: &str, version: ETag, logged: &ModerationEntry) -> Result<()> {
        let ops = [
            BatchOp::Delete {
                partition_key: room.to_string(),
                row_key: emoji_key(name),
                if_match: IfMatch::Etag(version),
            },
            log_op(room, logged),
        ];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) || e.is(ErrorKind::PreconditionFailed) => {
                Err(Error::not_found(format!("the room has no :{name}:")).into())
            }
            Err(e) => Err(e.into()),
        }
    }
}
