//! Deleting a room removes every row it has, in every table, so nothing is orphaned.
//!
//! The room row goes first: from then on every operation on the room answers 404, so no new
//! message, member or reaction can be added. Then each member's "my rooms" row, then the
//! room's partitions in every table, deleted in entity group transactions of at most 100 rows
//! (one page read, one batch written, repeated until the partition is empty). A send that
//! passed its checks just before the room row went can still land a moment later, so the
//! partitions are swept a second time at the end.

use std::time::Duration;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::members::Member;
use crate::schema::{MEMBER_PREFIX, ROOM_ROW};
use crate::service::Chat;
use crate::storage::{BatchOp, ErrorKind, IfMatch, RangeQuery, TableName};

/// Rows per delete batch: Azure's entity group transaction limit.
const BATCH: usize = 100;
/// Pause before the second sweep, longer than a send takes from its checks to its write.
const SETTLE: Duration = Duration::from_millis(200);

impl Chat {
    /// Deletes a room and all of its rows. Only the owner may.
    pub async fn delete_room(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let access = self.access(room_id, &who.user_id).await?;
        if !access.is_owner() {
            return Err(Error::Forbidden("only the owner can delete the room".into()));
        }
        self.delete_if_present(&self.schema.rooms, room_id.as_str(), ROOM_ROW)
            .await?;

        let query = RangeQuery::prefix(room_id.as_str(), MEMBER_PREFIX, 1000);
        let (members, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, crate::members::MAX_LISTED_MEMBERS)
            .await?;
        for row in &members {
            if let Ok(member) = Member::from_entity(row) {
                self.delete_if_present(&self.schema.user_rooms, &member.user_id.key(), room_id.as_str())
                    .await?;
            }
        }
        self.sweep_room(room_id).await?;
        tokio::time::sleep(SETTLE).await;
        self.sweep_room(room_id).await
    }

    async fn sweep_room(&self, room_id: &RoomId) -> Result<()> {
        for table in self.schema.room_partitioned() {
            self.sweep_partition(table, room_id.as_str()).await?;
        }
        Ok(())
    }

    /// Deletes every row of one partition, a batch at a time.
    async fn sweep_partition(&self, table: &TableName, partition: &str) -> Result<()> {
        loop {
            let query = RangeQuery::partition(partition, BATCH);
            let (rows, _) = self.tables.query_up_to(table, &query, BATCH).await?;
            if rows.is_empty() {
                return Ok(());
            }
            let ops: Vec<BatchOp> = rows
                .iter()
                .map(|row| BatchOp::Delete {
                    partition_key: partition.to_owned(),
                    row_key: row.row_key.clone(),
                    if_match: IfMatch::Any,
                })
                .collect();
            match self.tables.transact(table, partition, &ops).await {
                Ok(_) => {}
                // Someone else deleted one of these rows meanwhile: read the page again.
                Err(e) if e.is(ErrorKind::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
