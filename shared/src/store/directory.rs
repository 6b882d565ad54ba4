//! The directory of public rooms: partition `directory` of `Housekeeping`, one row per public
//! room keyed `<sort key>:<room id>` (the sort key is the name's normalised words), so a read
//! lists rooms in name order without touching any room's partition.
//!
//! A row is written before its room becomes public (or renamed) and removed after it stops
//! being so, and every read re-checks the room row: a row left behind by a crash in between
//! never lists a private room, or a room under a name it no longer has (the service drops
//! such a row when it meets one).

use std::ops::Bound;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::Store;
use super::error::Result;
use super::schema::{DIRECTORY_PARTITION, directory_key};
use crate::error::Error;
use crate::ids::RoomId;
use crate::rooms::Room;
use crate::rooms::directory::Search;
use crate::storage::{Entity, RangeQuery, UpdateMode, Value};

/// Directory rows one read looks at, matching or not: a search's cost is bounded.
const MAX_SCANNED: usize = 1000;

/// A directory row that matched a search, to be checked against its room.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub room_id: RoomId,
    key: String,
}

impl Listed {
    /// True when the row is `room`'s current one: the room is listed, under this name.
    pub(crate) fn lists(&self, room: &Room) -> bool {
        room.is_listed() && directory_key(&room.name, &room.id) == self.key
    }
}

/// A directory cursor: the last row key a read looked at, base64url-encoded.
fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

fn decode_cursor(cursor: &str) -> crate::error::Result<String> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|key| key.rsplit_once(':').is_some_and(|(_, id)| RoomId::parse(id).is_ok()))
        .filter(|key| crate::storage::rules::check_key("RowKey", key).is_ok())
        .ok_or_else(|| Error::validation("cursor is not one the directory gave out"))
}

impl Store {
    /// Lists `room` under its current name, when it belongs in the directory.
    pub(crate) async fn list_in_directory(&self, room: &Room) -> Result<()> {
        if !room.is_listed() {
            return Ok(());
        }
        let row = Entity::new(DIRECTORY_PARTITION, directory_key(&room.name, &room.id))
            .with("roomId", Value::String(room.id.clone()));
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Lists `room` as it is now, then removes the rows it had as `before` that it no longer
    /// has (another name, or no longer listed).
    pub(crate) async fn relist(&self, room: &Room, before: [&Room; 2]) -> Result<()> {
        self.list_in_directory(room).await?;
        let current = room.is_listed().then(|| directory_key(&room.name, &room.id));
        for earlier in before.into_iter().filter(|r| r.is_listed()) {
            let key = directory_key(&earlier.name, &earlier.id);
            if current.as_ref() != Some(&key) {
                self.delete_if_present(&self.schema.housekeeping, DIRECTORY_PARTITION, &key)
                    .await?;
            }
        }
        Ok(())
    }

    /// Removes the directory row `room` has under `name`.
    pub(crate) async fn unlist_from_directory(&self, room: &RoomId, name: Option<&str>) -> Result<()> {
        let name = match name {
            Some(name) => name.to_owned(),
            None => match self.room_name(room).await? {
                Some(name) => name,
                None => return Ok(()),
            },
        };
        self.delete_if_present(
            &self.schema.housekeeping,
            DIRECTORY_PARTITION,
            &directory_key(&name, room.as_str()),
        )
        .await
    }

    /// Removes a directory row found stale.
    pub(crate) async fn drop_directory_row(&self, listed: &Listed) -> Result<()> {
        self.delete_if_present(&self.schema.housekeeping, DIRECTORY_PARTITION, &listed.key)
            .await
    }

    /// Up to `search.limit` rows after `cursor` whose names match, reading at most
    /// [`MAX_SCANNED`] rows; with the cursor to go on from when more may follow.
    pub(crate) async fn directory(
        &self,
        search: &Search,
        cursor: Option<&str>,
    ) -> Result<(Vec<Listed>, Option<String>)> {
        let mut query = RangeQuery::partition(DIRECTORY_PARTITION, 1000);
        if let Some(cursor) = cursor {
            query = query.from(Bound::Excluded(decode_cursor(cursor)?));
        }
        let (rows, more) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, MAX_SCANNED)
            .await?;
        let mut listed = Vec::new();
        let mut last = None;
        for row in &rows {
            last = Some(row.row_key.clone());
            let Some((sort_key, room_id)) = row.row_key.rsplit_once(':') else {
                continue;
            };
            let Ok(room_id) = RoomId::parse(room_id) else {
                continue;
            };
            if search.matches(sort_key) {
                listed.push(Listed {
                    room_id,
                    key: row.row_key.clone(),
                });
                if listed.len() == search.limit {
                    let more = more || last.as_deref() != rows.last().map(|r| r.row_key.as_str());
                    return Ok((listed, last.filter(|_| more).map(|key| encode_cursor(&key))));
                }
            }
        }
        Ok((listed, last.filter(|_| more).map(|key| encode_cursor(&key))))
    }

    /// A room's name, marked for deletion or not.
    async fn room_name(&self, room: &RoomId) -> Result<Option<String>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), super::schema::ROOM_ROW)
            .await?;
        Ok(row.and_then(|row| row.str("name").map(str::to_owned)))
    }
}
