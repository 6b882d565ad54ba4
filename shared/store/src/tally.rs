//! Each member's tally in a room (`crate::trust`): one row `tally:<user>` in the room's
//! `Messages` partition with the messages they sent and the days they were active. A send
//! counts itself in its own transaction (`MessageStore::insert_message`), conditional on the
//! row as admission read it, so no send is counted twice or lost: one that lost the row to a
//! concurrent send of the same member reads it again and commits again.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::schema::{TALLY_PREFIX, tally_key};
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::trust::{Tally, TallyRead};
use tabletalk_tables::{BatchOp, ETag, Entity, IfMatch, RangeQuery, UpdateMode, Value};

fn parse(row: &Entity) -> Tally {
    let count = |name| row.i64(name).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    Tally {
        messages: count("messages"),
        active_days: count("activeDays"),
        last_day: row.i64("lastDay").unwrap_or(0),
    }
}

/// The operation that counts a send at `at` into `read` (the row as read): an insert for a
/// row not written yet, else a replace on the version read. Either fails when a concurrent
/// send counted first.
pub(crate) fn count_op(room: &RoomId, user: &UserId, read: &TallyRead, at: DateTime<Utc>) -> BatchOp {
    let tally = read.tally.counted(at);
    let entity = Entity::new(room.as_str(), tally_key(user))
        .with("userId", Value::String(user.to_string()))
        .with("messages", Value::Int64(i64::from(tally.messages)))
        .with("activeDays", Value::Int64(i64::from(tally.active_days)))
        .with("lastDay", Value::Int64(tally.last_day));
    match &read.version {
        None => BatchOp::Insert(entity),
        Some(version) => BatchOp::Update {
            entity,
            mode: UpdateMode::Replace,
            if_match: IfMatch::Etag(ETag(version.clone())),
        },
    }
}

/// The members' tallies. Holds the tables it uses.
#[derive(Debug, Clone)]
pub struct TallyStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl TallyStore {
    /// `user`'s tally in `room` and the version of its row (zero and none before their first
    /// counted send).
    pub async fn read(&self, room: &RoomId, user: &UserId) -> Result<TallyRead> {
        let row = self
            .tables
            .get(&self.schema.messages, room.as_str(), &tally_key(user))
            .await?;
        Ok(match row {
            Some(row) => TallyRead {
                tally: parse(&row),
                version: row.etag().map(|e| e.0.clone()),
            },
            None => TallyRead::default(),
        })
    }

    /// The tallies in `room` by user id, at most `limit` of them (in key order): one range
    /// read, of a page or a few.
    pub async fn list(&self, room: &RoomId, limit: usize) -> Result<HashMap<String, Tally>> {
        let query = RangeQuery::prefix(room.as_str(), TALLY_PREFIX, limit.clamp(1, 1000));
        let (rows, _) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((row.str("userId")?.to_owned(), parse(row))))
            .collect())
    }

    /// Deletes `user`'s tally in `room` (their erasure).
    pub async fn forget(&self, room: &RoomId, user: &UserId) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), &tally_key(user)).await
    }
}
