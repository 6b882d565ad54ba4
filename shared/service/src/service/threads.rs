//! Reading a thread: its root and its replies, oldest reply first.
//!
//! A reply's send writes a thread index row (`thread:<root>:<reply ascending key>`) in the
//! same transaction as the reply, so a thread is one range read of those rows, a point read
//! per reply and a companion-row read per message, whatever the size of the room. `PinMessage`
//! lines point at their target with `pinnedMessageId`, not `replyTo`, so they are never part
//! of a thread; deleted replies are skipped. Page cursors are the same opaque, room-bound
//! cursors as message pages.

use super::read::Reading;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::Message;
use crate::messages::cursor::{Cursor, Order};
use crate::messages::read::{DEFAULT_LIMIT, MAX_LIMIT};
use crate::messages::threads::{ReadThread, ThreadPage};
use futures::future::try_join_all;

impl Reading {
    pub async fn read_thread(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        request: ReadThread,
    ) -> Result<ThreadPage> {
        let limit = request.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1..={MAX_LIMIT}")));
        }
        let after = match request.cursor.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => match Cursor::decode(c, room, Order::OldestFirst)? {
                Cursor::OldestFirst(key) => Some(key),
                Cursor::NewestFirst(_) => return Err(Error::bad_request("the cursor is not valid")),
            },
            None => None,
        };
        self.access.access(room, &who.user_id).await?;
        let root = self.live_message(room, id).await?;

        let (keys, has_more) = self
            .store
            .messages
            .thread_page(room, &root.id, after.as_ref(), limit)
            .await?;

        let reads = keys
            .iter()
            .map(|key| async move { self.find_message(room, &key.ticks().message_key()).await });
        let replies = try_join_all(reads).await?;
        let mut messages: Vec<Message> = std::iter::once(root)
            .chain(replies.into_iter().flatten().filter(Message::is_live))
            .collect();
        // A thread's messages are scattered over the room: decorated one by one, so the cost
        // is the thread's, not the room's.
        self.decorate_each(room, &who.user_id, &mut messages).await?;
        let root = messages.remove(0);
        let next_cursor = keys
            .last()
            .map(|k| Cursor::OldestFirst(k.clone()).encode(room))
            .or(request.cursor);
        Ok(ThreadPage {
            root,
            replies: messages,
            has_more,
            next_cursor,
        })
    }
}
