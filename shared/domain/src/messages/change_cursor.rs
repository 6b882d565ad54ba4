//! Change-feed cursors (`messageChanges`): opaque to clients, and bound to the conversation
//! they were issued for, so a cursor sent with another conversation is refused (VALIDATION)
//! instead of silently being compared with the wrong room's counter — which answers OK with
//! skipped changes, or a RESET that throws a good cache away.
//!
//! A bare decimal version is what the feed issued before cursors were bound. It is still
//! taken, for whatever conversation it is sent with: it cannot be checked, and refusing it
//! would send every stored client cursor through a RESET at once. Every OK answer issues a
//! bound cursor, so a client moves to them on its next call.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::RoomId;

/// Longest cursor text accepted; anything longer is garbage.
const MAX_CURSOR_LEN: usize = 256;
/// Digits of the longest bare version (`u64::MAX`).
const MAX_BARE_DIGITS: usize = 20;

/// Where a conversation's feed resumes: after this version of its room's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeCursor {
    pub version: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    /// Format version.
    f: u8,
    /// The room.
    r: String,
    /// The counter version.
    n: u64,
}

impl ChangeCursor {
    /// The cursor text for `room`, after `version`.
    pub fn encode(room: &RoomId, version: u64) -> String {
        let wire = Wire {
            f: 1,
            r: room.to_string(),
            n: version,
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("a cursor serializes"))
    }

    /// Parses the `after` of `conversation` (the id as the client sent it): a cursor this API
    /// issued for that conversation, or a bare version from before cursors were bound.
    /// Anything else is VALIDATION, as for any cursor the API did not return (docs/CATCHUP.md).
    pub fn parse(text: &str, conversation: &str) -> Result<ChangeCursor> {
        let forged = || Error::validation(format!("{text:?} is not a cursor this API issued"));
        if text.is_empty() || text.len() > MAX_CURSOR_LEN {
            return Err(forged());
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return match text.len() <= MAX_BARE_DIGITS {
                true => text
                    .parse()
                    .map(|version| ChangeCursor { version })
                    .map_err(|_| forged()),
                false => Err(forged()),
            };
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| forged())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| forged())?;
        if wire.f != 1 {
            return Err(forged());
        }
        // Room ids are compared as parsed, so an upper-case spelling of the same room matches.
        let issued_here = RoomId::parse(conversation).is_ok_and(|room| room.as_str() == wire.r);
        if !issued_here {
            return Err(Error::validation(format!(
                "the cursor {text:?} was issued for another conversation than {conversation:?}"
            )));
        }
        Ok(ChangeCursor { version: wire.n })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_bound_to_their_conversation() {
        let room = RoomId::generate();
        let text = ChangeCursor::encode(&room, 42);
        assert_eq!(ChangeCursor::parse(&text, room.as_str()).unwrap().version, 42);
        let shouting = room.as_str().to_uppercase();
        assert_eq!(ChangeCursor::parse(&text, &shouting).unwrap().version, 42);
        for elsewhere in [RoomId::generate().to_string(), "not-a-room".to_owned()] {
            let refused = ChangeCursor::parse(&text, &elsewhere);
            assert!(matches!(refused, Err(Error::Validation(_))), "{refused:?}");
        }
    }

    #[test]
    fn bare_versions_are_still_taken_and_garbage_is_refused() {
        let room = RoomId::generate();
        assert_eq!(ChangeCursor::parse("0", room.as_str()).unwrap().version, 0);
        assert_eq!(ChangeCursor::parse("42", "not-a-room").unwrap().version, 42);
        let unknown_format = URL_SAFE_NO_PAD.encode(format!(r#"{{"f":2,"r":"{room}","n":1}}"#));
        for forged in [
            "",
            "-1",
            "4.2",
            "abc",
            "99999999999999999999999",
            " 1",
            &"A".repeat(300),
            &unknown_format,
        ] {
            let refused = ChangeCursor::parse(forged, room.as_str());
            assert!(matches!(refused, Err(Error::Validation(_))), "{forged:?}: {refused:?}");
        }
    }
}
