//! Live signals: what a room's members are told after a durable write (or of typing and
//! reading, which are never stored). They carry the change or a nudge; the store stays the
//! truth, and clients catch up through reads and the change feed.

use serde::Serialize;

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

/// A signal as it goes on the wire: the room it is about, and the signal.
#[derive(Serialize)]
pub struct Envelope<'a> {
    #[serde(rename = "roomId")]
    pub room_id: &'a str,
    #[serde(flatten)]
    pub signal: &'a Signal,
}
