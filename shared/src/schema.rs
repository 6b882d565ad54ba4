//! The tables tabletalk uses and what each partition holds. Names are configuration: a prefix
//! lets deployments share one storage account.
//!
//! - `Messages` (partition = room): message rows keyed by reverse tick (all digits, newest
//!   first), and, after them in key order, the idempotency records of the room's sends
//!   (`idem:<user>:<clientId>`), so a message and its record commit in one transaction.
//! - `MessagesAscending` (partition = room): key-only index rows keyed by forward tick.
//! - `MessagesMetadata` (partition = room): per-message companion data (reactions, later).
//! - `Rooms` (partition = room): the room row (`room`) and one row per member (`m:<user>`),
//!   so a room and its owner are created in one transaction.
//! - `UserRooms` (partition = user): one row per room the user belongs to, for "my rooms".

use crate::storage::{Result, TableName, Tables};

/// Row key of the room row in its `Rooms` partition.
pub const ROOM_ROW: &str = "room";
/// Prefix of member rows in a `Rooms` partition.
pub const MEMBER_PREFIX: &str = "m:";
/// Prefix of idempotency records in a `Messages` partition.
pub const IDEMPOTENCY_PREFIX: &str = "idem:";

#[derive(Debug, Clone)]
pub struct Schema {
    pub messages: TableName,
    pub ascending: TableName,
    pub metadata: TableName,
    pub rooms: TableName,
    pub user_rooms: TableName,
}

impl Schema {
    pub fn with_prefix(prefix: &str) -> Result<Schema> {
        let name = |base: &str| TableName::parse(format!("{prefix}{base}"));
        Ok(Schema {
            messages: name("Messages")?,
            ascending: name("MessagesAscending")?,
            metadata: name("MessagesMetadata")?,
            rooms: name("Rooms")?,
            user_rooms: name("UserRooms")?,
        })
    }

    pub fn all(&self) -> [&TableName; 5] {
        [
            &self.messages,
            &self.ascending,
            &self.metadata,
            &self.rooms,
            &self.user_rooms,
        ]
    }

    /// Creates every table that does not exist yet.
    pub async fn create_tables(&self, tables: &Tables) -> Result<()> {
        for table in self.all() {
            tables.create_table(table).await?;
        }
        Ok(())
    }
}
