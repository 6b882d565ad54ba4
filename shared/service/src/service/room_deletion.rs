//! Deleting a room removes every row it has, in every table, so nothing is orphaned.
//!
//! First the room row is marked as being deleted: from then on the room answers 404 to every
//! operation (no new message, member, reaction or vote can start), while the owner can repeat
//! the delete if it stops halfway. Then the room's partitions of `Messages`,
//! `MessagesAscending` and `MessagesMetadata` are emptied, each member's "my rooms" row is
//! removed, and last the room's `Rooms` partition, whose final batch holds the room row itself
//! — so the marker lasts until everything else is gone. The room's attachment objects (every
//! key under `<room>/`) are deleted before its rows and, for late uploads, once more after. Deletes go in entity group transactions
//! of at most 100 rows.
//!
//! An operation that passed its checks just before the marker was set can still land a moment
//! later, so the whole sweep runs a second time after a pause longer than such an operation
//! takes. That pause is a bound from experience, not a guarantee: a write stalled for longer
//! could leave rows behind (a timer that re-sweeps deleted rooms would close this).

use super::rooms::Rooms;
use std::time::Duration;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;

/// Pause before the second sweep, longer than a send takes from its checks to its write.
const SETTLE: Duration = Duration::from_millis(200);

impl Rooms {
    /// Deletes a room and all of its rows. Only the owner may; repeating an unfinished delete
    /// finishes it.
    pub async fn delete_room(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let missing = || Error::not_found("room not found");
        let row = self.store.rooms.room_row(room_id).await?.ok_or_else(missing)?;
        if row.owner_id.as_deref() != Some(who.user_id.as_str()) {
            // A member learns that only the owner may; anyone else that there is no room.
            return match !row.being_deleted && self.store.members.member(room_id, &who.user_id).await?.is_some() {
                true => Err(Error::Forbidden("only the owner can delete the room".into())),
                false => Err(missing()),
            };
        }
        self.store.rooms.mark_room_deleted(room_id).await?;
        // Its objects while the room row stays, so a delete that fails here can be repeated.
        self.files.remove_room_objects(room_id).await?;
        self.store.rooms.sweep_room(room_id).await?;
        tokio::time::sleep(SETTLE).await;
        self.store.rooms.sweep_room(room_id).await?;
        // And once more: an upload link handed out before the marker may have been used since.
        if let Err(e) = self.files.remove_room_objects(room_id).await {
            tracing::warn!(%room_id, error = %e, "could not delete a deleted room's late objects");
        }
        Ok(self.store.purge.unregister_room(room_id).await?)
    }
}
