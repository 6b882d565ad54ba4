//! A search as the API takes and answers it, and the cursor that carries it from page to page.
//!
//! Results come newest first across a window of at most [`ROOMS_PER_PAGE`] of the caller's
//! rooms (in room id order); a caller in more rooms gets the next window's results once the
//! first is exhausted, each window again newest first. The cursor names the window and the
//! position reached in it: a message key, and the room of the last result at that key, so two
//! messages of different rooms at one instant are neither repeated nor skipped.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::Message;

/// Results a page holds unless asked otherwise, and at most.
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 50;
/// The caller's rooms one page looks in (each costs a range read per word).
pub const ROOMS_PER_PAGE: usize = 50;

/// Longest cursor text accepted; anything longer is garbage.
const MAX_CURSOR_LEN: usize = 512;

/// Query parameters of a search.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// The query: words (each must match; a word of three or more characters also finds the
    /// words it begins), `"a phrase"`, `-word`, and the filters `from:<userId>`,
    /// `in:<roomId>`, `has:file`, `has:link`, `is:pinned`, `is:thread`, `before:<date>`,
    /// `after:<date>`. At most 256 characters and 12 words.
    #[param(min_length = 1, max_length = 256)]
    pub q: String,
    /// Only this room (as `in:` does).
    pub room_id: Option<String>,
    /// The `nextCursor` of the previous page of the same search.
    pub cursor: Option<String>,
    /// Results per page, 1..=50 (default 20).
    #[param(minimum = 1, maximum = 50)]
    pub limit: Option<usize>,
}

impl SearchParams {
    pub fn limit(&self) -> Result<usize> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        match (1..=MAX_LIMIT).contains(&limit) {
            true => Ok(limit),
            false => Err(Error::validation(format!("limit must be 1..={MAX_LIMIT}"))),
        }
    }
}

/// A message found, with its room's name and the words that matched as written in it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub message: Message,
    pub room_id: String,
    pub room_name: String,
    /// The words of the message's text the query found, each once, to be marked as text.
    pub highlights: Vec<String>,
}

/// One page of results, newest first. A page may hold fewer than `limit` results (even none)
/// and still have more: each page reads a bounded number of index rows.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    pub results: Vec<SearchResult>,
    pub has_more: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Where the next page goes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchCursor {
    /// The first room of the window (rooms in id order); none for the first window.
    pub window: Option<RoomId>,
    /// The position reached in the window; none at its start.
    pub after: Option<Position>,
}

/// A position in a window's results: everything newer than `key` is done, and at `key`
/// itself, every room up to `room` (every room when none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub key: MessageKey,
    pub room: Option<RoomId>,
}

impl Position {
    /// Whether a message of `room` at `key` is still to come after this position.
    pub fn before(&self, key: &MessageKey, room: &RoomId) -> bool {
        match key.as_str().cmp(self.key.as_str()) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => self.room.as_ref().is_some_and(|done| room.as_str() > done.as_str()),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    w: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    k: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    r: Option<String>,
}

impl SearchCursor {
    pub fn encode(&self) -> String {
        let wire = Wire {
            v: 1,
            w: self.window.as_ref().map(|room| room.to_string()),
            k: self.after.as_ref().map(|p| p.key.as_str().to_owned()),
            r: self
                .after
                .as_ref()
                .and_then(|p| p.room.as_ref())
                .map(|room| room.to_string()),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("a cursor serializes"))
    }

    /// Parses a cursor this API issued; anything else is a BAD_REQUEST.
    pub fn decode(text: &str) -> Result<SearchCursor> {
        let invalid = || Error::bad_request("cursor is not a search cursor");
        if text.len() > MAX_CURSOR_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if wire.v != 1 || (wire.k.is_none() && wire.r.is_some()) {
            return Err(invalid());
        }
        let room = |id: Option<String>| id.map(|id| RoomId::parse(&id).map_err(|_| invalid())).transpose();
        let key = wire.k.map(|k| MessageKey::parse(&k).ok_or_else(invalid)).transpose()?;
        Ok(SearchCursor {
            window: room(wire.w)?,
            after: match key {
                Some(key) => Some(Position {
                    key,
                    room: room(wire.r)?,
                }),
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_comes_back_as_it_went_and_garbage_is_refused() {
        let room = RoomId::parse("6a6ddb24-ae7c-4901-a57f-50f52d603ab5").unwrap();
        let cursor = SearchCursor {
            window: Some(room.clone()),
            after: Some(Position {
                key: MessageKey::parse("0000000000000000123").unwrap(),
                room: Some(room),
            }),
        };
        assert_eq!(SearchCursor::decode(&cursor.encode()).unwrap(), cursor);
        assert_eq!(
            SearchCursor::decode(&SearchCursor::default().encode()).unwrap(),
            SearchCursor::default()
        );
        for bad in ["", "!!", "eyJ2IjoyfQ", &"a".repeat(600)] {
            assert!(matches!(SearchCursor::decode(bad), Err(Error::BadRequest(_))), "{bad}");
        }
    }
}
