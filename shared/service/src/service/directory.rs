//! The directory of public rooms, searchable by the words of their names. Any signed-in user
//! may read it; it lists only rooms that are public now (each row is checked against its room,
//! and a row found stale is dropped).

use super::subscriptions::Accounts;
use futures::future::try_join_all;

use crate::error::{Error, Result};
use crate::rooms::directory::{DirectoryEntry, DirectoryPage, DirectoryQuery, Search};

impl Accounts {
    pub async fn directory(&self, query: DirectoryQuery) -> Result<DirectoryPage> {
        let search = Search::new(&query)?;
        let (listed, cursor) = self.store.directory.directory(&search, query.cursor.as_deref()).await?;
        let checks = listed.into_iter().map(|listed| async move {
            let room = self.store.rooms.room(&listed.room_id).await?;
            let current = room.filter(|room| listed.lists(room));
            if current.is_none() {
                self.store.directory.drop_directory_row(&listed).await?;
            }
            Ok::<_, Error>(current.map(|room| DirectoryEntry {
                id: room.id,
                name: room.name,
                description: room.description,
            }))
        });
        let rooms = try_join_all(checks).await?.into_iter().flatten().collect();
        Ok(DirectoryPage { rooms, cursor })
    }
}
