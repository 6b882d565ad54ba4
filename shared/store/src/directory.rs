//! The directory of public rooms: partition `directory` of `Housekeeping`, one row per public
//! room keyed `<sort key>:<room id>` (the sort key is the name's normalised words), so a read
//! lists rooms in name order without touching any room's partition.
//!
//! A row is written before its room becomes public (or renamed) and removed after it stops
//! being so, and every read re-checks the room row: a row left behind by a crash in between
//! never lists a private room, or a room under a name it no longer has (the service drops
//! such a row when it meets one). A row is only ever removed if it is unchanged since it was
//! read before the room row that made it stale (its ETag): whoever lists a room writes its
//! row again after their change commits, so a late removal never unlists a room that a later
//! change made public again.

use std::ops::Bound;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::Result;
use super::schema::{DIRECTORY_PARTITION, directory_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::rooms::Room;
use tabletalk_domain::rooms::directory::Search;
use tabletalk_tables::{ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Directory rows one read looks at, matching or not: a search's cost is bounded.
const MAX_SCANNED: usize = 1000;

/// A directory row that matched a search, to be checked against its room.
#[derive(Debug, Clone)]
pub struct Listed {
    pub room_id: RoomId,
    key: String,
    etag: Option<ETag>,
}

/// A directory row as it was before a change, to remove after the change if it is stale then
/// and nobody has written it since.
#[derive(Debug, Clone)]
pub struct HeldRow {
    key: String,
    etag: ETag,
}

impl Listed {
    /// True when the row is `room`'s current one: the room is listed, under this name.
    pub fn lists(&self, room: &Room) -> bool {
        room.is_listed() && directory_key(&room.name, &room.id) == self.key
    }
}

/// A directory cursor: the last row key a read looked at, base64url-encoded.
fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

fn decode_cursor(cursor: &str) -> tabletalk_domain::error::Result<String> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|key| key.rsplit_once(':').is_some_and(|(_, id)| RoomId::parse(id).is_ok()))
        .filter(|key| tabletalk_tables::rules::check_key("RowKey", key).is_ok())
        .ok_or_else(|| Error::validation("cursor is not one the directory gave out"))
}

/// The directory of public rooms. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct DirectoryStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl DirectoryStore {
    /// Lists `room` under its current name, when it belongs in the directory.
    pub async fn list_in_directory(&self, room: &Room) -> Result<()> {
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

    /// Reads the rows `rooms` (a room as it was, and as a change will make it) have now,
    /// before the change: what [`Store::relist`] may remove after it.
    pub async fn hold_directory_rows(&self, rooms: [&Room; 2]) -> Result<Vec<HeldRow>> {
        let mut keys: Vec<String> = rooms
            .into_iter()
            .filter(|r| r.is_listed())
            .map(|r| directory_key(&r.name, &r.id))
            .collect();
        keys.dedup();
        let mut held = Vec::new();
        for key in keys {
            let row = self
                .tables
                .get(&self.schema.housekeeping, DIRECTORY_PARTITION, &key)
                .await?;
            if let Some(etag) = row.and_then(|row| row.etag) {
                held.push(HeldRow { key, etag });
            }
        }
        Ok(held)
    }

    /// Lists `room` as it is now, then removes the `held` rows it no longer has (another
    /// name, or no longer listed) that nobody has written since they were held.
    pub async fn relist(&self, room: &Room, held: Vec<HeldRow>) -> Result<()> {
        self.list_in_directory(room).await?;
        let current = room.is_listed().then(|| directory_key(&room.name, &room.id));
        for row in held {
            if current.as_ref() != Some(&row.key) {
                self.delete_if_unchanged(&row.key, Some(&row.etag)).await?;
            }
        }
        Ok(())
    }

    /// Deletes a directory row unless it changed since `etag` (any version without one).
    async fn delete_if_unchanged(&self, key: &str, etag: Option<&ETag>) -> Result<()> {
        let if_match = etag.map_or(IfMatch::Any, |etag| IfMatch::Etag(etag.clone()));
        let deleted = self
            .tables
            .delete(&self.schema.housekeeping, DIRECTORY_PARTITION, key, &if_match)
            .await;
        match deleted {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) || e.is(ErrorKind::PreconditionFailed) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the directory row `room` has under `name`.
    pub async fn unlist_from_directory(&self, room: &RoomId, name: Option<&str>) -> Result<()> {
        let name = match name {
            Some(name) => name.to_owned(),
            None => match self.room_name(room).await? {
                Some(name) => name,
                None => return Ok(()),
            },
        };
        crate::delete_if_present(
            &self.tables,
            &self.schema.housekeeping,
            DIRECTORY_PARTITION,
            &directory_key(&name, room.as_str()),
        )
        .await
    }

    /// Removes a directory row found stale, unless it was written again since it was read.
    pub async fn drop_directory_row(&self, listed: &Listed) -> Result<()> {
        self.delete_if_unchanged(&listed.key, listed.etag.as_ref()).await
    }

    /// Up to `search.limit` rows after `cursor` whose names match, reading at most
    /// [`MAX_SCANNED`] rows; with the cursor to go on from when more may follow.
    pub async fn directory(&self, search: &Search, cursor: Option<&str>) -> Result<(Vec<Listed>, Option<String>)> {
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
                    etag: row.etag.clone(),
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
