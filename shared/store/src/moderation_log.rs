//! Moderation log rows: `log:<entry id>` in the room's `Rooms` partition, newest first. The
//! rows of the actions they record (members, bans, roles, the room row, report groups) share
//! that partition, so each action's store call writes its log rows in the action's own entity
//! group transaction: no action commits without its line, and no line without its action.
//!
//! To log a new kind of action: add its variant to `ModerationAction`, build the entry with
//! `ModerationEntry::by(..)`, and either pass [`log_op`] in the action's own transaction (its
//! rows are in the `Rooms` partition) or call [`Store::append_log`] after it (they are not).

use std::ops::Bound;
use std::sync::Mutex;

use super::error::{Result, settle};
use super::schema::{LOG_PREFIX, log_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_tables::conditional::update_conditionally_with;
use tabletalk_tables::{BatchOp, ETag, Entity, IfMatch, RangeQuery, StoreError, UpdateMode, Value};

/// The row of a log entry. The entry is kept whole as JSON; its action, actor and time are
/// columns of their own, for whoever reads the table directly.
pub fn entry_row(room: &RoomId, entry: &ModerationEntry) -> Entity {
    let json = serde_json::to_string(entry).unwrap_or_default();
    let action = serde_json::to_value(entry.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    Entity::new(room.as_str(), log_key(&entry.id))
        .with("action", Value::String(action))
        .with("actorId", Value::String(entry.actor_id.clone().unwrap_or_default()))
        .with("at", Value::datetime(entry.at))
        .with("entry", Value::String(json))
}

/// The operation that writes `entry` in a transaction of the room's `Rooms` partition. An
/// upsert: an entry's id is fixed when it is made, so writing it again writes the same row.
pub fn log_op(room: &RoomId, entry: &ModerationEntry) -> BatchOp {
    BatchOp::Upsert {
        entity: entry_row(room, entry),
        mode: UpdateMode::Replace,
    }
}

fn parse_entry(entity: &Entity) -> tabletalk_domain::error::Result<ModerationEntry> {
    let broken = || Error::Internal(format!("log row {}/{} is broken", entity.partition_key, entity.row_key));
    serde_json::from_str(entity.str("entry").ok_or_else(broken)?).map_err(|_| broken())
}

/// The moderation log, written with the change it records. Holds the tables it uses and, as fields,
/// the surfaces it calls.
#[derive(Debug, Clone)]
pub struct ModerationLogStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl ModerationLogStore {
    /// Writes log entries on their own, for an action whose rows live elsewhere (a moderated
    /// delete commits in `Messages`).
    pub async fn append_log(&self, room: &RoomId, entries: &[ModerationEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let ops: Vec<BatchOp> = entries.iter().map(|e| log_op(room, e)).collect();
        self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await?;
        Ok(())
    }

    /// Up to `limit` entries newest first, after the entry `after`, and whether more follow.
    pub async fn moderation_log(
        &self,
        room: &RoomId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<ModerationEntry>, bool)> {
        let mut query = RangeQuery::prefix(room.as_str(), LOG_PREFIX, limit + 1);
        if let Some(after) = after {
            query = query.from(Bound::Excluded(log_key(after)));
        }
        let (rows, more) = self.tables.query_up_to(&self.schema.rooms, &query, limit).await?;
        let entries = rows
            .iter()
            .map(parse_entry)
            .collect::<tabletalk_domain::error::Result<_>>()?;
        Ok((entries, more))
    }

    /// Rewrites one row of the room's `Rooms` partition through the conditional-write helper,
    /// with the log entries `log` makes of the row before and after `change`, in the same
    /// transaction. `change` and `log` run again on every lost race, on the row as it is then;
    /// `log` answering nothing writes the row alone.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_logged<T: Clone>(
        &self,
        room: &RoomId,
        row_key: &str,
        missing: &str,
        parse: impl Fn(&Entity) -> tabletalk_domain::error::Result<T>,
        row: impl Fn(&T) -> Entity,
        mut change: impl FnMut(&mut T) -> tabletalk_domain::error::Result<()>,
        log: impl Fn(&T, &T) -> Vec<ModerationEntry>,
    ) -> Result<T> {
        let pending: Mutex<Vec<ModerationEntry>> = Mutex::default();
        let apply = |entity: Entity| {
            let before = parse(&entity)?;
            let mut after = before.clone();
            change(&mut after)?;
            *pending.lock().unwrap_or_else(|p| p.into_inner()) = log(&before, &after);
            Ok::<_, Error>(row(&after))
        };
        let write = |next: Entity, seen: ETag| {
            let entries = pending.lock().unwrap_or_else(|p| p.into_inner()).clone();
            async move {
                let mut ops = vec![BatchOp::Update {
                    entity: next,
                    mode: UpdateMode::Replace,
                    if_match: IfMatch::Etag(seen),
                }];
                ops.extend(entries.iter().map(|e| log_op(room, e)));
                let etags = self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await?;
                etags
                    .into_iter()
                    .next()
                    .flatten()
                    .ok_or_else(|| StoreError::internal("a transaction answered no ETag for its update"))
            }
        };
        let entity = update_conditionally_with(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            row_key,
            None,
            apply,
            write,
        )
        .await
        .map_err(|e| settle(e, missing))?;
        Ok(parse(&entity)?)
    }
}
