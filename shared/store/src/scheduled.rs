//! Scheduled message rows, in the `Housekeeping` table's `scheduled` partition: one item row
//! per message (`item:<room>:<user>:<id>`) and, while it is pending, one due-time index row
//! (`due:<Unix ms>:<id>`) naming it. Both are in one partition, so an item and its index row
//! are written in one transaction: an item is pending exactly while its index row exists, and
//! a timer run reads only the index rows due, however many items are stored.

use std::ops::Bound;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::messages::{from_json, json_value};
use super::schema::{
    SCHEDULED_DONE_PREFIX, SCHEDULED_DUE_PREFIX, SCHEDULED_PARTITION, scheduled_done_end, scheduled_done_key,
    scheduled_due_end, scheduled_due_key, scheduled_item_key, scheduled_items_of,
};
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::scheduled::{Refusal, Scheduled, ScheduledStatus};
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Most items a member's listing reads: all they may keep, and room for a few schedules that
/// raced past that limit.
const MAX_LISTED: usize = tabletalk_domain::scheduled::MAX_KEPT_PER_MEMBER + 50;

/// An item's version as read: a change written with it lands only if nothing else changed
/// the item since (its ETag, kept opaque to the service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemVersion(ETag);

/// A due-time index row: the item it names, by row key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub due_key: String,
    pub item_key: String,
}

fn item_key(item: &Scheduled) -> Result<String> {
    Ok(scheduled_item_key(
        &RoomId::parse(&item.room_id)?,
        &UserId::parse(&item.user_id)?,
        &item.id,
    ))
}

fn item_row(item: &Scheduled) -> Result<Entity> {
    let mut row = Entity::new(SCHEDULED_PARTITION, item_key(item)?)
        .with("id", Value::String(item.id.clone()))
        .with("roomId", Value::String(item.room_id.clone()))
        .with("userId", Value::String(item.user_id.clone()))
        .with("userName", Value::String(item.user_name.clone()))
        .with("sendAt", Value::datetime(item.send_at))
        .with("status", Value::String(item.status.as_str().into()))
        .with("createdAt", Value::datetime(item.created_at))
        .with("attempts", Value::Int64(i64::from(item.attempts)));
    let optional = [
        ("text", item.text.clone().map(Value::String)),
        ("poll", item.poll.as_ref().map(json_value)),
        (
            "attachments",
            (!item.attachments.is_empty()).then(|| json_value(&item.attachments)),
        ),
        ("claimedAt", item.claimed_at.map(Value::datetime)),
        ("messageId", item.message_id.clone().map(Value::String)),
        ("refusal", item.refusal.as_ref().map(json_value)),
        ("finishedAt", item.finished_at.map(Value::datetime)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            row.set(name, value);
        }
    }
    Ok(row)
}

fn parse_item(row: &Entity) -> Option<Scheduled> {
    Some(Scheduled {
        id: row.str("id")?.to_owned(),
        room_id: row.str("roomId")?.to_owned(),
        user_id: row.str("userId")?.to_owned(),
        user_name: row.str("userName")?.to_owned(),
        text: row.str("text").map(str::to_owned),
        poll: from_json(row, "poll"),
        attachments: from_json(row, "attachments").unwrap_or_default(),
        send_at: row.datetime("sendAt")?,
        status: ScheduledStatus::parse(row.str("status")?)?,
        created_at: row.datetime("createdAt")?,
        claimed_at: row.datetime("claimedAt"),
        attempts: row.i64("attempts").and_then(|a| u32::try_from(a).ok()).unwrap_or(0),
        message_id: row.str("messageId").map(str::to_owned),
        refusal: from_json::<Refusal>(row, "refusal"),
        finished_at: row.datetime("finishedAt"),
    })
}

fn due_row(item: &Scheduled, item_key: &str) -> Entity {
    Entity::new(SCHEDULED_PARTITION, scheduled_due_key(item.send_at, &item.id))
        .with("item", Value::String(item_key.to_owned()))
}

fn delete_op(row_key: String) -> BatchOp {
    BatchOp::Delete {
        partition_key: SCHEDULED_PARTITION.to_owned(),
        row_key,
        if_match: IfMatch::Any,
    }
}

/// Scheduled messages until they are sent. Holds the tables it uses and, as fields, the surfaces it
/// calls.
#[derive(Debug, Clone)]
pub struct ScheduledStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl ScheduledStore {
    /// Stores a new pending item with its index row.
    pub async fn insert_scheduled(&self, item: &Scheduled) -> Result<()> {
        let key = item_key(item)?;
        let ops = [BatchOp::Insert(item_row(item)?), BatchOp::Insert(due_row(item, &key))];
        self.tables
            .transact(&self.schema.housekeeping, SCHEDULED_PARTITION, &ops)
            .await?;
        Ok(())
    }

    /// One of `user`'s items in `room`, with its ETag.
    pub async fn scheduled(&self, room: &RoomId, user: &UserId, id: &str) -> Result<Option<(Scheduled, ItemVersion)>> {
        self.scheduled_at(&scheduled_item_key(room, user, id)).await
    }

    /// The item at `item_key`, with its ETag.
    pub async fn scheduled_at(&self, item_key: &str) -> Result<Option<(Scheduled, ItemVersion)>> {
        let row = self
            .tables
            .get(&self.schema.housekeeping, SCHEDULED_PARTITION, item_key)
            .await?;
        Ok(row.and_then(|row| Some((parse_item(&row)?, ItemVersion(row.etag.clone()?)))))
    }

    /// `user`'s items in `room`, up to [`MAX_LISTED`], in id order.
    pub async fn scheduled_of(&self, room: &RoomId, user: &UserId) -> Result<Vec<Scheduled>> {
        let query = RangeQuery::prefix(SCHEDULED_PARTITION, &scheduled_items_of(room, user), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, MAX_LISTED)
            .await?;
        Ok(rows.iter().filter_map(parse_item).collect())
    }

    /// Replaces `old` (as read, with `etag`) by `new`, moving, adding or removing its index row
    /// in the same transaction so it exists exactly while the item is pending. `None` when the
    /// item changed since it was read (another sender or an edit came first).
    pub async fn replace_scheduled(
        &self,
        old: &Scheduled,
        version: &ItemVersion,
        new: &Scheduled,
    ) -> Result<Option<ItemVersion>> {
        let key = item_key(new)?;
        let mut ops = vec![BatchOp::Update {
            entity: item_row(new)?,
            mode: UpdateMode::Replace,
            if_match: IfMatch::Etag(version.0.clone()),
        }];
        let moved = old.send_at != new.send_at;
        if old.status.is_pending() && (moved || !new.status.is_pending()) {
            ops.push(delete_op(scheduled_due_key(old.send_at, &old.id)));
        }
        if new.status.is_pending() && (moved || !old.status.is_pending()) {
            ops.push(BatchOp::Insert(due_row(new, &key)));
        }
        // A finished item gets its expiry row, so housekeeping finds it without a scan.
        if old.status.is_pending() && !new.status.is_pending() {
            let finished = new.finished_at.unwrap_or_else(Utc::now);
            ops.push(BatchOp::Upsert {
                entity: Entity::new(SCHEDULED_PARTITION, scheduled_done_key(finished, &new.id))
                    .with("item", Value::String(key.clone())),
                mode: UpdateMode::Replace,
            });
        }
        match self
            .tables
            .transact(&self.schema.housekeeping, SCHEDULED_PARTITION, &ops)
            .await
        {
            Ok(etags) => Ok(etags.into_iter().next().flatten().map(ItemVersion)),
            Err(e) if e.is(ErrorKind::PreconditionFailed) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Index rows due at or before `now`, oldest first, at most `limit`: what a timer run
    /// reads, never the items that are not due.
    pub async fn due_scheduled(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<Due>> {
        let query = RangeQuery::prefix(SCHEDULED_PARTITION, SCHEDULED_DUE_PREFIX, limit.min(1000))
            .to(Bound::Excluded(scheduled_due_end(now)));
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, limit)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(Due {
                    item_key: row.str("item")?.to_owned(),
                    due_key: row.row_key,
                })
            })
            .collect())
    }

    /// Removes finished items whose expiry row is older than `before`, with that row, in one
    /// transaction each; at most 500 a run (the next run goes on). Returns how many.
    pub async fn expire_scheduled(&self, before: DateTime<Utc>) -> Result<usize> {
        let query = RangeQuery::prefix(SCHEDULED_PARTITION, SCHEDULED_DONE_PREFIX, 500)
            .to(Bound::Excluded(scheduled_done_end(before)));
        let (rows, _) = self.tables.query_up_to(&self.schema.housekeeping, &query, 500).await?;
        let mut expired = 0;
        for row in rows {
            let mut ops = vec![delete_op(row.row_key.clone())];
            ops.extend(row.str("item").map(|item| delete_op(item.to_owned())));
            match self
                .tables
                .transact(&self.schema.housekeeping, SCHEDULED_PARTITION, &ops)
                .await
            {
                Ok(_) => expired += 1,
                // The item went already: the row alone.
                Err(e) if e.is(ErrorKind::NotFound) => {
                    crate::delete_if_present(
                        &self.tables,
                        &self.schema.housekeeping,
                        SCHEDULED_PARTITION,
                        &row.row_key,
                    )
                    .await?
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(expired)
    }

    /// Deletes `items`, scheduled messages of `user` in `room` as listed (an erasure, which
    /// lists and deletes until none is left), each one's index and expiry rows first, so no
    /// row is left naming a missing item; idempotent.
    pub async fn delete_scheduled(&self, room: &RoomId, user: &UserId, items: &[Scheduled]) -> Result<()> {
        let table = &self.schema.housekeeping;
        for item in items {
            crate::delete_if_present(
                &self.tables,
                table,
                SCHEDULED_PARTITION,
                &scheduled_due_key(item.send_at, &item.id),
            )
            .await?;
            if let Some(at) = item.finished_at {
                crate::delete_if_present(
                    &self.tables,
                    table,
                    SCHEDULED_PARTITION,
                    &scheduled_done_key(at, &item.id),
                )
                .await?;
            }
            crate::delete_if_present(
                &self.tables,
                table,
                SCHEDULED_PARTITION,
                &scheduled_item_key(room, user, &item.id),
            )
            .await?;
        }
        Ok(())
    }

    /// Removes an index row whose item is gone or no longer pending at that time (none is
    /// written so, but a row from an older layout or a hand edit must not be read forever).
    pub async fn drop_due(&self, due: &Due) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.housekeeping,
            SCHEDULED_PARTITION,
            &due.due_key,
        )
        .await
    }
}

impl Due {
    /// True when this index row is the one `item` has now.
    pub fn indexes(&self, item: &Scheduled) -> bool {
        item.status.is_pending() && self.due_key == scheduled_due_key(item.send_at, &item.id)
    }
}
