//! A room's own slash commands: `slash:<name>` in the room's `Rooms` partition, holding the
//! handler's URL, the description, who made it and when, and the signing secret sealed
//! (`adapters/outgoing.rs`; never in the clear). The moderation log shares the partition, so
//! each change commits with its log line.

use super::error::Result;
use super::moderation_log::log_op;
use super::schema::{SLASH_PREFIX, slash_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::slash::{MAX_PER_ROOM, SlashCommand};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, Value};

/// A command as stored: what is listed, and its sealed secret.
#[derive(Debug, Clone)]
pub struct StoredSlash {
    pub command: SlashCommand,
    pub sealed_secret: String,
}

fn parse(row: &Entity) -> Option<StoredSlash> {
    Some(StoredSlash {
        command: SlashCommand {
            name: row.row_key.strip_prefix(SLASH_PREFIX)?.to_owned(),
            url: row.str("url")?.to_owned(),
            description: row.str("description").unwrap_or("").to_owned(),
            created_by: row.str("createdBy")?.to_owned(),
            created_at: row.datetime("createdAt")?,
        },
        sealed_secret: row.str("sealedSecret")?.to_owned(),
    })
}

/// A room's own slash commands. Holds the tables it uses.
#[derive(Debug, Clone)]
pub struct SlashStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl SlashStore {
    /// Stores a new command with its log line, in one transaction: a name taken is a 409.
    pub async fn insert(&self, room: &RoomId, stored: &StoredSlash, logged: &ModerationEntry) -> Result<()> {
        let command = &stored.command;
        let row = Entity::new(room.as_str(), slash_key(&command.name))
            .with("url", Value::String(command.url.clone()))
            .with("description", Value::String(command.description.clone()))
            .with("createdBy", Value::String(command.created_by.clone()))
            .with("createdAt", Value::datetime(command.created_at))
            .with("sealedSecret", Value::String(stored.sealed_secret.clone()));
        let ops = [BatchOp::Insert(row), log_op(room, logged)];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => {
                Err(Error::Conflict(format!("the room has a /{} already", command.name)).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The room's command `name`, if it has one.
    pub async fn get(&self, room: &RoomId, name: &str) -> Result<Option<StoredSlash>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &slash_key(name))
            .await?;
        row.map(|row| parse(&row).ok_or_else(|| Error::Internal("a slash command row did not read back".into()).into()))
            .transpose()
    }

    /// The room's commands, by name (at most [`MAX_PER_ROOM`] and one more, to tell a full room).
    pub async fn list(&self, room: &RoomId) -> Result<Vec<StoredSlash>> {
        let query = RangeQuery::prefix(room.as_str(), SLASH_PREFIX, MAX_PER_ROOM + 1);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_PER_ROOM + 1)
            .await?;
        Ok(rows.iter().filter_map(parse).collect())
    }

    /// Deletes the room's command `name` with its log line; a missing one is a 404.
    pub async fn delete(&self, room: &RoomId, name: &str, logged: &ModerationEntry) -> Result<()> {
        let ops = [
            BatchOp::Delete {
                partition_key: room.to_string(),
                row_key: slash_key(name),
                if_match: IfMatch::Any,
            },
            log_op(room, logged),
        ];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) => Err(Error::not_found(format!("the room has no /{name}")).into()),
            Err(e) => Err(e.into()),
        }
    }
}
