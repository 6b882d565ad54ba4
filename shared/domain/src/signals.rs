//! Live signals: what a room's members are told after a durable write (or of typing and
//! reading, which are never stored). They carry the change or a nudge; the store stays the
//! truth, and clients catch up through reads and the change feed.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::messages::Message;

/// What happened in a room.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Signal {
    #[serde(rename = "message.created")]
    Created { message: Message },
    #[serde(rename = "message.updated")]
    Updated { message: Message },
    #[serde(rename = "message.deleted")]
    Deleted {
        #[serde(rename = "messageId")]
        message_id: String,
        /// True when someone other than the author deleted it (a moderator).
        moderated: bool,
    },
    #[serde(rename = "message.pinned")]
    Pinned {
        #[serde(rename = "messageId")]
        message_id: String,
        #[serde(rename = "isPinned")]
        is_pinned: bool,
    },
    #[serde(rename = "message.reacted")]
    Reacted {
        #[serde(rename = "messageId")]
        message_id: String,
    },
    /// A poll's votes changed: clients re-read it for the counts (each reader's own vote is
    /// theirs to see, so the signal carries none).
    #[serde(rename = "message.voted")]
    Voted {
        #[serde(rename = "messageId")]
        message_id: String,
    },
    /// A message's link preview was attached or removed, or an image's thumbnail made: clients
    /// re-read it (companion data, so the message's version did not change).
    #[serde(rename = "message.previewed")]
    Previewed {
        #[serde(rename = "messageId")]
        message_id: String,
    },
    #[serde(rename = "typing")]
    Typing {
        #[serde(rename = "userId")]
        user_id: String,
        #[serde(rename = "userName")]
        user_name: String,
    },
    /// A member's read position moved (they marked the room read, or read up to a message).
    #[serde(rename = "read")]
    Read {
        #[serde(rename = "userId")]
        user_id: String,
        /// Their position: every message whose id sorts at or after it (ids sort newest
        /// first) is read, so a client can draw seen-ticks without another read.
        #[serde(rename = "upTo")]
        up_to: String,
    },
    /// To one member who is not looking at the room: it has something new. Sent once until
    /// they look at the room again (view it or read it), and for every message that mentions
    /// them; the counts are what the room list would answer now, so a badge updates in place.
    #[serde(rename = "room.activity")]
    Activity {
        #[serde(rename = "unreadCount")]
        unread_count: usize,
        /// True when there are more unread messages than were counted.
        #[serde(rename = "unreadCapped")]
        unread_capped: bool,
        #[serde(rename = "mentionCount")]
        mention_count: usize,
        /// True when the message that caused the notice mentions them.
        mentioned: bool,
    },
    /// A member's presence changed (online, away, or their custom status), coalesced: at most
    /// one per user every few seconds, carrying the state as it is when sent.
    #[serde(rename = "presence")]
    Presence {
        #[serde(rename = "userId")]
        user_id: String,
        #[serde(flatten)]
        presence: crate::presence::Presence,
    },
    /// To its owner alone: a scheduled message was refused when it was due.
    #[serde(rename = "scheduled.refused")]
    ScheduledRefused {
        scheduled: Box<crate::scheduled::Scheduled>,
    },
    /// To the member who ran a room's own command alone: its handler answered later, at its
    /// `response_url`, for their eyes only. Stored nowhere.
    #[serde(rename = "command.answered")]
    CommandAnswered {
        /// The command's name, without the `/`.
        command: String,
        /// The answer, as sanitized HTML.
        html: String,
    },
    /// To the manager who registered it: an outgoing webhook was disabled after failing for
    /// a whole day.
    #[serde(rename = "outgoingWebhook.disabled")]
    OutgoingWebhookDisabled {
        webhook: Box<crate::outgoing::OutgoingWebhook>,
    },
}

impl Signal {
    /// The signal as every member of the room may see it.
    pub fn for_everyone(mut self) -> Signal {
        if let Signal::Created { message } | Signal::Updated { message } = &mut self {
            message.hide_source_room();
        }
        self
    }
}

/// Which room a live connection shows (`PUT /api/live/view`): the server puts the connection
/// in that room's group, where full messages go, and takes it out of the group of the room it
/// showed before. No room means it shows none (a room list, say) and gets notices only.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewRoom {
    /// The connection's id, from the `connected` message of the live connection.
    #[schema(pattern = r"^[A-Za-z0-9._~=-]{1,128}$")]
    pub connection_id: String,
    pub room_id: Option<String>,
}

/// The most characters of a connection id.
pub const MAX_CONNECTION_ID_CHARS: usize = 128;

impl ViewRoom {
    /// The connection id, checked: 1-128 characters of letters, digits and `-._~=`.
    pub fn connection(&self) -> crate::error::Result<&str> {
        let id = self.connection_id.as_str();
        let valid = !id.is_empty()
            && id.len() <= MAX_CONNECTION_ID_CHARS
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'='));
        match valid {
            true => Ok(id),
            false => Err(crate::error::Error::validation(format!(
                "connectionId must be 1-{MAX_CONNECTION_ID_CHARS} characters of letters, digits, '-', '.', '_', '~' or '='"
            ))),
        }
    }
}

/// A signal as it goes on the wire: the room it is about, and the signal.
#[derive(Serialize)]
pub struct Envelope<'a> {
    #[serde(rename = "roomId")]
    pub room_id: &'a str,
    #[serde(flatten)]
    pub signal: &'a Signal,
}
