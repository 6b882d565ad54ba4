//! The room's pinned messages, for members: newest message first (the pin index's key order,
//! `store::pins`), a page at a time.
//!
//! A page costs one range read of pin rows and one point read per row (concurrent, at most
//! the page's limit), since pinned messages lie anywhere in the room's history. A row whose
//! message is gone (purged) or deleted is skipped and removed: both are final, so the removal
//! never races a pin. A message pinned before pin rows existed has its flag and no row: it is
//! not listed until someone pins it again (which writes its row and no second line).

use super::read::Reading;
use futures::future::try_join_all;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::messages::Message;
use crate::messages::cursor::{Cursor, Order};
use crate::messages::read::{DEFAULT_LIMIT, MAX_LIMIT, MessagePage, ReadPins, keep_within_budget};

impl Reading {
    /// A page of the room's pinned messages, newest message first; `nextCursor` resumes.
    pub async fn read_pins(&self, who: &Principal, room: &RoomId, request: ReadPins) -> Result<MessagePage> {
        let limit = request.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1..={MAX_LIMIT}")));
        }
        let incoming = request.cursor.filter(|c| !c.is_empty());
        // A pins cursor is a newest-first cursor over message keys.
        let after = match incoming
            .as_deref()
            .map(|c| Cursor::decode(c, room, Order::NewestFirst))
            .transpose()?
        {
            Some(Cursor::NewestFirst(key)) => Some(key),
            Some(Cursor::OldestFirst(_)) | None => None,
        };
        self.access.access(room, &who.user_id).await?;
        let (keys, more) = self.store.pins.pins_page(room, after.as_ref(), limit).await?;
        let found = try_join_all(keys.iter().map(|key| self.find_message(room, key))).await?;
        let mut messages: Vec<Message> = Vec::with_capacity(keys.len());
        for (key, message) in keys.iter().zip(found) {
            match message {
                Some(message) if message.is_live() => {
                    if message.is_pinned {
                        messages.push(message);
                    }
                }
                _ => {
                    if let Err(e) = self.store.pins.delete_pin_row(room, key).await {
                        tracing::warn!(%room, message = key.as_str(), error = %e, "could not remove the pin row of a message gone");
                    }
                }
            }
        }
        let cut = keep_within_budget(&mut messages);
        // A cut page resumes after its last kept message; a whole one after its last row.
        let last = if cut {
            messages.last().map(Message::key)
        } else {
            keys.last().cloned()
        };
        self.decorate_each(room, &who.user_id, &mut messages).await?;
        Ok(MessagePage {
            messages,
            has_more: more || cut,
            next_cursor: last.map(|key| Cursor::NewestFirst(key).encode(room)).or(incoming),
        })
    }
}
