//! A room's activity row (`!activity` in its `Messages` partition): the preview of its newest
//! message, for the room list.
//!
//! The send path keeps it current at no extra round trip: the row is one more operation in
//! the transaction that stores the message (`store::ledger`), and the room's counter, which
//! every such transaction moves conditionally, names the message the row shows. So of many
//! senders committing at once, in any order and from any process, the newest message stays
//! shown; an edit or a delete rewrites the row only if it shows that message.
//!
//! Listing reads it together with a member's unread messages: the row sorts before every
//! message key, so one range read from it to the member's read position returns both.

use std::ops::Bound;

use super::Store;
use super::error::Result;
use super::ledger::ActivityChange;
use super::messages::from_json;
use super::schema::ACTIVITY_ROW;
use crate::ids::RoomId;
use crate::keys::{MESSAGE_KEY_RANGE, MessageKey};
use crate::messages::Message;
use crate::rooms::activity::MessagePreview;
use crate::storage::{Entity, RangeQuery, Value};

/// What a room's list entry is made of: the newest message's preview, and the messages after
/// a read position.
pub(crate) struct Unread {
    pub last: Option<MessagePreview>,
    pub messages: Vec<Message>,
    /// More messages follow than were asked for.
    pub capped: bool,
}

/// The activity change a write of `message` (new, or edited or deleted) makes.
pub(crate) fn activity_change(room: &RoomId, message: &Message, new: bool) -> ActivityChange {
    let preview = MessagePreview::of(message);
    let row = Entity::new(room.as_str(), ACTIVITY_ROW).with(
        "preview",
        Value::String(serde_json::to_string(&preview).unwrap_or_default()),
    );
    ActivityChange {
        ticks: message.key().ticks().value(),
        row,
        new,
    }
}

impl Store {
    /// The room's newest message's preview and up to `max` messages newer than `position`
    /// (rows that cannot be read are left out: a count shows what it can), in ONE range read.
    pub(crate) async fn unread_since(&self, room: &RoomId, position: &MessageKey, max: usize) -> Result<Unread> {
        let query = RangeQuery::partition(room.as_str(), max + 2)
            .from(Bound::Included(ACTIVITY_ROW.to_owned()))
            .to(Bound::Excluded(position.as_str().to_owned()));
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, max + 1).await?;
        let last = rows
            .first()
            .filter(|row| row.row_key == ACTIVITY_ROW)
            .and_then(|row| from_json::<MessagePreview>(row, "preview"));
        let mut messages: Vec<Message> = rows
            .iter()
            .filter(|row| row.row_key.as_str() >= MESSAGE_KEY_RANGE.0)
            .filter_map(|row| super::messages::parse_message(room, row).ok())
            .collect();
        let capped = more || messages.len() > max;
        messages.truncate(max);
        Ok(Unread { last, messages, capped })
    }
}
