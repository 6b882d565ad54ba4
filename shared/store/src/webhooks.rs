//! Inbound webhook rows: `hook:<webhook id>` in the room's `Rooms` partition, holding the
//! name, who made it and when, and the SHA-256 of its current token (never the token). The
//! moderation log shares the partition, so each change commits with its log line.

use super::error::{Result, settle};
use super::moderation_log::log_op;
use super::schema::{WEBHOOK_PREFIX, webhook_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::webhooks::{MAX_WEBHOOKS_PER_ROOM, Webhook, missing};
use tabletalk_tables::conditional::update_conditionally_with;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, UpdateMode, Value};

fn webhook_row(hook: &Webhook) -> Entity {
    Entity::new(&hook.room_id, webhook_key(&hook.id))
        .with("name", Value::String(hook.name.clone()))
        .with("createdBy", Value::String(hook.created_by.clone()))
        .with("createdAt", Value::datetime(hook.created_at))
        .with("tokenHash", Value::String(hook.token_hash.clone()))
        .with("automation", Value::Bool(hook.automation))
}

fn parse_webhook(row: &Entity) -> Option<Webhook> {
    Some(Webhook {
        id: row.row_key.strip_prefix(WEBHOOK_PREFIX)?.to_owned(),
        room_id: row.partition_key.clone(),
        name: row.str("name")?.to_owned(),
        created_by: row.str("createdBy")?.to_owned(),
        created_at: row.datetime("createdAt")?,
        token_hash: row.str("tokenHash")?.to_owned(),
        automation: row.bool("automation").unwrap_or(false),
    })
}

/// Inbound webhooks. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct WebhookStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl WebhookStore {
    /// Stores a new webhook with its log line, in one transaction (its id is fresh: an
    /// existing one is a conflict).
    pub async fn insert_webhook(&self, hook: &Webhook, logged: &ModerationEntry) -> Result<()> {
        let room = RoomId::parse(&hook.room_id)?;
        let ops = [BatchOp::Insert(webhook_row(hook)), log_op(&room, logged)];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => {
                Err(Error::Conflict("that webhook id is taken; try again".into()).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    pub async fn webhook(&self, room: &RoomId, id: &str) -> Result<Option<Webhook>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &webhook_key(id))
            .await?;
        Ok(row.as_ref().and_then(parse_webhook))
    }

    /// A room's webhooks, up to [`MAX_WEBHOOKS_PER_ROOM`] and one more (so a caller can tell
    /// the room is full).
    pub async fn webhooks(&self, room: &RoomId) -> Result<Vec<Webhook>> {
        let query = RangeQuery::prefix(room.as_str(), WEBHOOK_PREFIX, 100);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_WEBHOOKS_PER_ROOM + 1)
            .await?;
        Ok(rows.iter().filter_map(parse_webhook).collect())
    }

    /// Changes a webhook conditionally on the row as read, with its log line in the same
    /// transaction; a missing one answers 404.
    pub async fn update_webhook(
        &self,
        room: &RoomId,
        id: &str,
        mut change: impl FnMut(&mut Webhook),
        logged: &ModerationEntry,
    ) -> Result<Webhook> {
        let write = |next: Entity, seen: ETag| async move {
            let ops = [
                BatchOp::Update {
                    entity: next,
                    mode: UpdateMode::Replace,
                    if_match: IfMatch::Etag(seen),
                },
                log_op(room, logged),
            ];
            let etags = self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await?;
            etags
                .first()
                .cloned()
                .flatten()
                .ok_or_else(|| StoreError::internal("a webhook's transaction answered no ETag"))
        };
        let row = update_conditionally_with(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            &webhook_key(id),
            None,
            |row| {
                let mut hook = parse_webhook(&row).ok_or_else(missing)?;
                change(&mut hook);
                Ok(webhook_row(&hook))
            },
            write,
        )
        .await
        .map_err(|e| settle(e, "webhook not found"))?;
        parse_webhook(&row).ok_or_else(|| Error::Internal("a webhook row did not read back".into()).into())
    }

    /// Deletes a webhook with its log line, in one transaction; a missing one answers 404
    /// and logs nothing.
    pub async fn delete_webhook(&self, room: &RoomId, id: &str, logged: &ModerationEntry) -> Result<()> {
        let ops = [
            BatchOp::Delete {
                partition_key: room.to_string(),
                row_key: webhook_key(id),
                if_match: IfMatch::Any,
            },
            log_op(room, logged),
        ];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) => Err(missing().into()),
            Err(e) => Err(e.into()),
        }
    }
}
