//! Page cursors: opaque to clients, validated on the way back in. A cursor names the room and
//! the order it was issued for and the last row key the page covered, so a cursor from another
//! room or the other order is refused instead of silently reading the wrong thing.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::{AscendingKey, MessageKey};

/// Longest cursor text accepted; anything longer is garbage.
const MAX_CURSOR_LEN: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Order {
    /// Newest first, from `Messages`.
    #[serde(rename = "desc")]
    NewestFirst,
    /// Oldest first, through `MessagesAscending`.
    #[serde(rename = "asc")]
    OldestFirst,
}

/// Where a page resumes: after this key, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    NewestFirst(MessageKey),
    OldestFirst(AscendingKey),
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u8,
    r: String,
    o: Order,
    k: String,
}

impl Cursor {
    pub fn encode(&self, room: &RoomId) -> String {
        let (o, k) = match self {
            Cursor::NewestFirst(k) => (Order::NewestFirst, k.as_str()),
            Cursor::OldestFirst(k) => (Order::OldestFirst, k.as_str()),
        };
        let wire = Wire {
            v: 1,
            r: room.to_string(),
            o,
            k: k.to_owned(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("a cursor serializes"))
    }

    /// Parses a cursor issued for `room` and `order`; anything else is a BAD_REQUEST.
    pub fn decode(text: &str, room: &RoomId, order: Order) -> Result<Cursor> {
        let invalid = || Error::bad_request("cursor is not valid for this room and order");
        if text.len() > MAX_CURSOR_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if wire.v != 1 || wire.r != room.as_str() || wire.o != order {
            return Err(invalid());
        }
        match order {
            Order::NewestFirst => MessageKey::parse(&wire.k).map(Cursor::NewestFirst),
            Order::OldestFirst => AscendingKey::parse(&wire.k).map(Cursor::OldestFirst),
        }
        .ok_or_else(invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Ticks;

    #[test]
    fn round_trips_and_refuses_foreign_cursors() {
        let room = RoomId::generate();
        let cursor = Cursor::NewestFirst(
            Ticks::from_datetime(chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap()).message_key(),
        );
        let text = cursor.encode(&room);
        assert_eq!(Cursor::decode(&text, &room, Order::NewestFirst).unwrap(), cursor);
        assert!(Cursor::decode(&text, &RoomId::generate(), Order::NewestFirst).is_err());
        assert!(Cursor::decode(&text, &room, Order::OldestFirst).is_err());
        for garbage in ["", "!!!", "eyJ2IjoxfQ", &"A".repeat(300)] {
            assert_eq!(
                Cursor::decode(garbage, &room, Order::NewestFirst).unwrap_err().code(),
                "BAD_REQUEST"
            );
        }
    }
}
