//! A room's own slash commands: `slash:<name>` in the room's `Rooms` partition, holding the
//! handler's URL, the description, who made it and when, and the signing secret sealed
//! (`adapters/outgoing.rs`; never in the clear). The moderation log shares the partition, so
//! each change commits with its log line.

use super::error::Result;
use super::moderation_log::log_op;
use super::schema::{SLASH_PREFIX, later_answers_key, slash_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::slash::{LaterAnswers, MAX_PER_ROOM, SlashCommand, later_answer_url_unknown};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Tries at taking one of a `response_url`'s answers against others taken at once.
const TAKE_TRIES: usize = 5;

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

    /// Grants a command run's later answers, at the digest of its `response_url`'s token (in
    /// the room's `Messages` partition, swept with the idempotency records).
    pub async fn grant_later_answers(&self, room: &RoomId, token_hash: &str, grant: &LaterAnswers) -> Result<()> {
        let row = Entity::new(room.as_str(), later_answers_key(token_hash))
            .with("command", Value::String(grant.command.clone()))
            .with("commandCreatedAt", Value::datetime(grant.command_created_at))
            .with("caller", Value::String(grant.caller.clone()))
            .with("createdAt", Value::datetime(grant.granted_at))
            .with("used", Value::Int64(grant.used));
        self.tables.insert(&self.schema.messages, &row).await?;
        Ok(())
    }

    /// Takes one later answer of the run whose token digests to `token_hash`, if it may still
    /// give one at `now` (`LaterAnswers::check`): counted before the answer is shown, so at
    /// most the limit are shown however many arrive at once. What it was granted for.
    pub async fn take_later_answer(
        &self,
        room: &RoomId,
        token_hash: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<LaterAnswers> {
        let key = later_answers_key(token_hash);
        for _ in 0..TAKE_TRIES {
            let row = self.tables.get(&self.schema.messages, room.as_str(), &key).await?;
            let Some(mut row) = row else {
                return Err(later_answer_url_unknown().into());
            };
            let grant = LaterAnswers {
                command: row.str("command").unwrap_or("").to_owned(),
                command_created_at: row.datetime("commandCreatedAt").unwrap_or_default(),
                caller: row.str("caller").unwrap_or("").to_owned(),
                granted_at: row.datetime("createdAt").unwrap_or_default(),
                used: row.i64("used").unwrap_or(i64::MAX),
            };
            grant.check(now)?;
            let etag = row
                .etag()
                .cloned()
                .ok_or_else(|| Error::Internal("a read row has no ETag".into()))?;
            row.set("used", Value::Int64(grant.used + 1));
            match self
                .tables
                .update(&self.schema.messages, &row, UpdateMode::Replace, &IfMatch::Etag(etag))
                .await
            {
                Ok(_) => return Ok(grant),
                Err(e) if e.is(ErrorKind::PreconditionFailed) => continue,
                Err(e) if e.is(ErrorKind::NotFound) => return Err(later_answer_url_unknown().into()),
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Unavailable("too many answers at once at this response_url; try again".into()).into())
    }
}
