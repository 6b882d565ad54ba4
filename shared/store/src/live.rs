//! Who looks at a room, for tiered live delivery (`crate::service::notices`). In the room's
//! `Rooms` partition: one row per live connection showing the room (`live:v:<connection>`,
//! its user and since when) and one per member due a notice (`live:a:<user>`: "armed", they
//! looked at the room since their last notice). In the user's `UserRooms` partition: the room
//! each of their connections shows (`view:<connection>`), so switching finds the room left.
//!
//! A send reads its room's `live:` rows in one range read: what it costs grows with the
//! connections showing the room and the members who looked since their last notice, never
//! with the members as such. A notice takes its member's armed row away, conditionally, so a
//! look that lands meanwhile arms them again rather than being lost.

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::schema::{
    ARMED_PREFIX, LOOKER_PREFIX, VIEW_PREFIX, VIEWER_PREFIX, armed_key, user_key, view_key, viewer_key,
};
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_tables::{ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// A connection that showed a room longer ago than this without saying so again is taken
/// for gone (a closed tab that never switched): the client URL's lifetime.
pub const VIEW_TTL: Duration = Duration::hours(1);
/// The most `live:` rows one send reads; a room with more lookers tells only these.
pub const MAX_LOOKERS: usize = 2000;

/// A room's lookers as one send reads them.
#[derive(Debug, Default)]
pub struct Lookers {
    /// Users with a connection showing the room (each once).
    pub viewers: Vec<UserId>,
    /// Members due a notice.
    pub armed: Vec<Armed>,
    /// Connections whose row outlived [`VIEW_TTL`].
    pub stale: Vec<String>,
}

/// A member due a notice, with the version of their row.
#[derive(Debug, Clone)]
pub struct Armed {
    pub user: UserId,
    etag: Option<ETag>,
}

/// Who looks at a room, for tiered live delivery. Holds the tables it uses and, as fields, the
/// surfaces it calls.
#[derive(Debug, Clone)]
pub struct LiveStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl LiveStore {
    /// The room's lookers: one range read of its `live:` rows.
    pub async fn lookers(&self, room: &RoomId, now: DateTime<Utc>) -> Result<Lookers> {
        let query = RangeQuery::prefix(room.as_str(), LOOKER_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, MAX_LOOKERS).await?;
        let mut lookers = Lookers::default();
        for row in rows {
            let Some(user) = row.str("userId").and_then(|u| UserId::parse(u).ok()) else {
                continue;
            };
            if let Some(connection) = row.row_key.strip_prefix(VIEWER_PREFIX) {
                match row.datetime("at") {
                    Some(at) if at > now - VIEW_TTL => {
                        if !lookers.viewers.contains(&user) {
                            lookers.viewers.push(user);
                        }
                    }
                    _ => lookers.stale.push(connection.to_owned()),
                }
            } else if row.row_key.starts_with(ARMED_PREFIX) {
                lookers.armed.push(Armed {
                    user,
                    etag: row.etag().cloned(),
                });
            }
        }
        Ok(lookers)
    }

    /// Makes `user` due a notice for the room's next message (they looked at it).
    pub async fn arm_notice(&self, room: &RoomId, user: &UserId) -> Result<()> {
        let row = Entity::new(room.as_str(), armed_key(user)).with("userId", Value::String(user.to_string()));
        self.tables
            .upsert(&self.schema.rooms, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Takes a member's armed row away after their notice, unless it was written again since
    /// it was read (they looked again meanwhile).
    pub async fn disarm_notice(&self, room: &RoomId, armed: &Armed) -> Result<()> {
        let if_match = armed.etag.clone().map_or(IfMatch::Any, IfMatch::Etag);
        match self
            .tables
            .delete(&self.schema.rooms, room.as_str(), &armed_key(&armed.user), &if_match)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) || e.is(ErrorKind::PreconditionFailed) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The room `user`'s connection shows: `None` for a connection they never told of (a
    /// connection of another user's is never theirs), `Some(None)` when it shows none.
    pub async fn shown_room(&self, user: &UserId, connection: &str) -> Result<Option<Option<RoomId>>> {
        let row = self
            .tables
            .get(&self.schema.user_rooms, &user_key(user), &view_key(connection))
            .await?;
        Ok(row.map(|row| row.str("roomId").and_then(|room| RoomId::parse(room).ok())))
    }

    /// Records that `user`'s connection shows `room` (or none). A connection new to the user
    /// first clears their rows of connections older than [`VIEW_TTL`], so the rows stay as
    /// few as their recent connections.
    pub async fn show_room(
        &self,
        user: &UserId,
        connection: &str,
        room: Option<&RoomId>,
        known: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if !known {
            let query = RangeQuery::prefix(user_key(user), VIEW_PREFIX, 1000);
            let (rows, _) = self.tables.query_up_to(&self.schema.user_rooms, &query, 1000).await?;
            for row in rows
                .iter()
                .filter(|row| row.datetime("at").is_none_or(|at| at <= now - VIEW_TTL))
            {
                crate::delete_if_present(&self.tables, &self.schema.user_rooms, &row.partition_key, &row.row_key)
                    .await?;
            }
        }
        let mut row = Entity::new(user_key(user), view_key(connection)).with("at", Value::datetime(now));
        if let Some(room) = room {
            row.set("roomId", Value::String(room.to_string()));
        }
        self.tables
            .upsert(&self.schema.user_rooms, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Records that the connection of `user` shows the room, as of `now`.
    pub async fn add_viewer(&self, room: &RoomId, connection: &str, user: &UserId, now: DateTime<Utc>) -> Result<()> {
        let row = Entity::new(room.as_str(), viewer_key(connection))
            .with("userId", Value::String(user.to_string()))
            .with("at", Value::datetime(now));
        self.tables
            .upsert(&self.schema.rooms, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// The connection no longer shows the room.
    pub async fn remove_viewer(&self, room: &RoomId, connection: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.rooms, room.as_str(), &viewer_key(connection)).await
    }

    /// Removes `user`'s rows of the room (they left or were removed): their armed row, and
    /// the rows of their connections showing it, found in one range read.
    pub async fn forget_looker(&self, room: &RoomId, user: &UserId) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.rooms, room.as_str(), &armed_key(user)).await?;
        let query = RangeQuery::prefix(room.as_str(), VIEWER_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, MAX_LOOKERS).await?;
        for row in rows.iter().filter(|row| row.str("userId") == Some(user.as_str())) {
            crate::delete_if_present(&self.tables, &self.schema.rooms, room.as_str(), &row.row_key).await?;
        }
        Ok(())
    }

    /// Removes the row of which room `user`'s connection showed (it closed).
    pub async fn forget_view(&self, user: &UserId, connection: &str) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.user_rooms,
            &user_key(user),
            &view_key(connection),
        )
        .await
    }

    /// Removes every row of which room `user`'s connections show (an erasure); how many.
    pub async fn forget_views(&self, user: &UserId) -> Result<usize> {
        let query = RangeQuery::prefix(user_key(user), VIEW_PREFIX, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.user_rooms, &query, usize::MAX / 2)
            .await?;
        for row in &rows {
            crate::delete_if_present(&self.tables, &self.schema.user_rooms, &row.partition_key, &row.row_key).await?;
        }
        Ok(rows.len())
    }
}
