//! Thread follows: a `follow:<root>:<user>` row in the room's `Messages` partition (who is
//! pushed for a reply) and a `thr:<room>:<root>` row in the follower's `UserRooms` partition
//! ("my threads", with their read position in the thread). The user's row is written first
//! and removed first, as the "my rooms" rows are; every listing re-checks membership.

use chrono::{DateTime, Utc};
use std::ops::Bound;

use super::error::Result;
use super::schema::{FOLLOWED_PREFIX, THREAD_PREFIX, follow_key, followed_key, followers_of, thread_key, user_key};
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::keys::{AscendingKey, Ticks};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// A thread a user follows, as their row keeps it.
#[derive(Debug, Clone)]
pub struct Followed {
    pub room: RoomId,
    pub root: String,
    /// Replies after this time are unread.
    pub read_at: DateTime<Utc>,
}

/// The follower row of `user` in the thread `root`: an upsert, so a reply by someone who
/// follows already changes nothing.
pub fn follow_op(room: &RoomId, root: &str, user: &UserId) -> BatchOp {
    let entity = Entity::new(room.as_str(), follow_key(root, user)).with("userId", Value::String(user.to_string()));
    BatchOp::Upsert {
        entity,
        mode: UpdateMode::Merge,
    }
}

/// Who follows which thread. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct FollowStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl FollowStore {
    /// Makes `user` follow the thread `root` of `room`, their read position at `read_at`.
    pub async fn follow(&self, room: &RoomId, root: &str, user: &UserId, read_at: DateTime<Utc>) -> Result<()> {
        self.index_followed(room, root, user, read_at).await?;
        let op = follow_op(room, root, user);
        self.tables
            .transact(&self.schema.messages, room.as_str(), &[op])
            .await?;
        Ok(())
    }

    /// The user's row of a thread they follow (written before their follower row, or after
    /// their reply committed it), with their read position.
    pub async fn index_followed(&self, room: &RoomId, root: &str, user: &UserId, read_at: DateTime<Utc>) -> Result<()> {
        let row = Entity::new(user_key(user), followed_key(room, root))
            .with("roomId", Value::String(room.to_string()))
            .with("rootId", Value::String(root.to_owned()))
            .with("readAt", Value::datetime(read_at));
        self.tables
            .upsert(&self.schema.user_rooms, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Stops `user` following the thread: their own row first, then the follower row.
    pub async fn unfollow(&self, room: &RoomId, root: &str, user: &UserId) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.user_rooms,
            &user_key(user),
            &followed_key(room, root),
        )
        .await?;
        crate::delete_if_present(
            &self.tables,
            &self.schema.messages,
            room.as_str(),
            &follow_key(root, user),
        )
        .await
    }

    /// Moves `user`'s read position in a thread they follow; false when they do not follow it.
    pub async fn mark_thread_read(&self, room: &RoomId, root: &str, user: &UserId, at: DateTime<Utc>) -> Result<bool> {
        let row = Entity::new(user_key(user), followed_key(room, root)).with("readAt", Value::datetime(at));
        match self
            .tables
            .update(&self.schema.user_rooms, &row, UpdateMode::Merge, &IfMatch::Any)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Stops `user` following every thread they follow (an erasure: their id goes from every
    /// follower list their own list names); how many.
    pub async fn unfollow_all(&self, user: &UserId) -> Result<usize> {
        let followed = self.followed(user, usize::MAX / 2).await?;
        for thread in &followed {
            self.unfollow(&thread.room, &thread.root, user).await?;
        }
        Ok(followed.len())
    }

    /// The followers of the thread `root`, up to `max`.
    pub async fn followers(&self, room: &RoomId, root: &str, max: usize) -> Result<Vec<UserId>> {
        let query = RangeQuery::prefix(room.as_str(), &followers_of(root), 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.messages, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| UserId::parse(row.str("userId")?).ok())
            .collect())
    }

    /// The threads `user` follows, up to `max`.
    pub async fn followed(&self, user: &UserId, max: usize) -> Result<Vec<Followed>> {
        let query = RangeQuery::prefix(user_key(user), FOLLOWED_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.user_rooms, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some(Followed {
                    room: RoomId::parse(row.str("roomId")?).ok()?,
                    root: row.str("rootId")?.to_owned(),
                    read_at: row.datetime("readAt")?,
                })
            })
            .collect())
    }

    /// Replies of the thread `root` sent after `after`, counted up to `max`, and whether more
    /// follow: one range read of its index rows.
    pub async fn replies_after(
        &self,
        room: &RoomId,
        root: &str,
        after: DateTime<Utc>,
        max: usize,
    ) -> Result<(usize, bool)> {
        // Times are kept to the microsecond and keys to the tick (100 ns): a reply stamped at
        // `after` is at most 999 ns later, so unread replies start a microsecond on.
        let from: AscendingKey = Ticks::from_datetime(after + chrono::Duration::microseconds(1)).ascending_key();
        let prefix = format!("{THREAD_PREFIX}{root}:");
        let query = RangeQuery::prefix(room.as_str(), &prefix, max + 1).from(Bound::Included(thread_key(root, &from)));
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, max).await?;
        Ok((rows.len(), more))
    }
}
