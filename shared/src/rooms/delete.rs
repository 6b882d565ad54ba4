//! Deleting a room removes every row it has, in every table, so nothing is orphaned.
//!
//! First the room row is marked as being deleted: from then on the room answers 404 to every
//! operation (no new message, member, reaction or vote can start), while the owner can repeat
//! the delete if it stops halfway. Then the room's partitions of `Messages`,
//! `MessagesAscending` and `MessagesMetadata` are emptied, each member's "my rooms" row is
//! removed, and last the room's `Rooms` partition, whose final batch holds the room row itself
//! — so the marker lasts until everything else is gone. Deletes go in entity group transactions
//! of at most 100 rows.
//!
//! An operation that passed its checks just before the marker was set can still land a moment
//! later, so the whole sweep runs a second time after a pause longer than such an operation
//! takes. That pause is a bound from experience, not a guarantee: a write stalled for longer
//! could leave rows behind (a timer that re-sweeps deleted rooms would close this).

use std::time::Duration;

use crate::auth::Principal;
use crate::error::{Error, Result, settle};
use crate::ids::RoomId;
use crate::service::Chat;
use crate::storage::conditional::update_conditionally;
use crate::storage::{RangeQuery, UpdateMode, Value};
use crate::store::schema::{HOUSEKEEPING_PARTITION, MEMBER_PREFIX, ROOM_ROW};

/// More members than any room has; the sweep reads them all, page by page.
const ALL_MEMBERS: usize = 10_000_000;
/// Pause before the second sweep, longer than a send takes from its checks to its write.
const SETTLE: Duration = Duration::from_millis(200);

impl Chat {
    /// Deletes a room and all of its rows. Only the owner may; repeating an unfinished delete
    /// finishes it.
    pub async fn delete_room(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let missing = || Error::not_found("room not found");
        let row = self
            .store
            .tables
            .get(&self.store.schema.rooms, room_id.as_str(), ROOM_ROW)
            .await?
            .ok_or_else(missing)?;
        if row.str("ownerId") != Some(who.user_id.as_str()) {
            // A member learns that only the owner may; anyone else that there is no room.
            return match !super::is_being_deleted(&row) && self.member(room_id, &who.user_id).await?.is_some() {
                true => Err(Error::Forbidden("only the owner can delete the room".into())),
                false => Err(missing()),
            };
        }
        update_conditionally(
            &self.store.tables,
            &self.store.schema.rooms,
            room_id.as_str(),
            ROOM_ROW,
            UpdateMode::Replace,
            |row| Ok::<_, Error>(row.with("deleting", Value::Bool(true))),
        )
        .await
        .map_err(|e| settle(e, "room not found"))?;

        self.sweep_room(room_id).await?;
        tokio::time::sleep(SETTLE).await;
        self.sweep_room(room_id).await?;
        self.store
            .delete_if_present(
                &self.store.schema.housekeeping,
                HOUSEKEEPING_PARTITION,
                room_id.as_str(),
            )
            .await
    }

    async fn sweep_room(&self, room_id: &RoomId) -> Result<()> {
        let everything = RangeQuery::partition(room_id.as_str(), 100);
        for table in [
            &self.store.schema.messages,
            &self.store.schema.ascending,
            &self.store.schema.metadata,
        ] {
            self.store.tables.delete_range(table, &everything).await?;
        }
        let members = RangeQuery::prefix(room_id.as_str(), MEMBER_PREFIX, 1000);
        let (rows, _) = self
            .store
            .tables
            .query_up_to(&self.store.schema.rooms, &members, ALL_MEMBERS)
            .await?;
        for row in rows {
            // The member row's key carries the user's key; no need to parse the row.
            if let Some(user_key) = row.row_key.strip_prefix(MEMBER_PREFIX) {
                self.store
                    .delete_if_present(&self.store.schema.user_rooms, user_key, room_id.as_str())
                    .await?;
            }
        }
        self.store
            .tables
            .delete_range(&self.store.schema.rooms, &everything)
            .await?;
        Ok(())
    }
}
