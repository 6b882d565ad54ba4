//! A room's activity row (`!activity` in its `Messages` partition): the preview of its newest
//! message, for the room list.
//!
//! The send path keeps it current at no extra round trip: the row is one more operation in
//! the transaction that stores the message (`store::ledger`), and the room's counter, which
//! every such transaction moves conditionally, names the message the row shows. So of many
//! senders committing at once, in any order and from any process, the newest message stays
//! shown; an edit or a delete rewrites the row only if it shows that message.
//!
//! Listing reads it together with a member's unread messages (`Store::unread_since`): the row
//! sorts before every message key, so one range read from it to the member's read position
//! returns both.

use super::ledger::ActivityChange;
use super::schema::ACTIVITY_ROW;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::messages::Message;
use tabletalk_domain::rooms::activity::MessagePreview;
use tabletalk_tables::{Entity, Value};

/// What a room's list entry is made of: the newest message's preview, and the messages after
/// a read position.
pub struct Unread {
    pub last: Option<MessagePreview>,
    pub messages: Vec<Message>,
    /// More messages follow than were asked for.
    pub capped: bool,
}

/// The preview an activity row holds, if it is one.
pub fn parse_activity(row: &Entity) -> Option<MessagePreview> {
    (row.row_key == ACTIVITY_ROW)
        .then(|| row.str("preview"))
        .flatten()
        .and_then(|text| serde_json::from_str(text).ok())
}

/// The activity change a write of `message` (new, or edited or deleted) makes.
pub fn activity_change(room: &RoomId, message: &Message, new: bool) -> ActivityChange {
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
