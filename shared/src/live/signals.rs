//! Live signals: after a durable write, a short JSON signal to the room's Web PubSub group
//! through the service REST API (`POST /api/hubs/{hub}/groups/{group}/:send`, a JWT whose
//! `aud` is the exact request URL). They carry the change or a nudge; the store stays the
//! truth, and clients catch up through reads and the change feed. Best effort: sent in the
//! background with a short timeout, and a failure is logged, never returned.
//!
//! A signal reaches every member of the room alike, so it carries nothing that depends on the
//! reader: a forwarded copy's source room is left out (only its members may see it; they read
//! the message to get it).

use std::time::Duration;

use serde::Serialize;

use std::sync::Arc;

use super::Live;
use super::web_pubsub::room_group;
use crate::ids::RoomId;
use crate::messages::Message;
use crate::service::Chat;

/// How long a signal may take before it is given up.
pub const SIGNAL_TIMEOUT: Duration = Duration::from_secs(2);

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
    #[serde(rename = "typing")]
    Typing {
        #[serde(rename = "userId")]
        user_id: String,
        #[serde(rename = "userName")]
        user_name: String,
    },
    #[serde(rename = "read")]
    Read {
        #[serde(rename = "userId")]
        user_id: String,
    },
}

impl Signal {
    /// The signal as every member of the room may see it.
    fn for_everyone(mut self) -> Signal {
        if let Signal::Created { message } | Signal::Updated { message } = &mut self {
            message.hide_source_room();
        }
        self
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(rename = "roomId")]
    room_id: &'a str,
    #[serde(flatten)]
    signal: &'a Signal,
}

impl Chat {
    /// Sends `signal` to the room's group in the background; never fails the caller.
    pub(crate) fn signal(&self, room: &RoomId, signal: Signal) {
        if matches!(self.live, Live::Off) {
            return;
        }
        let signal = signal.for_everyone();
        let body = match serde_json::to_vec(&Envelope {
            room_id: room.as_str(),
            signal: &signal,
        }) {
            Ok(body) => body,
            Err(e) => return tracing::warn!(error = %e, "a live signal did not serialize"),
        };
        let group = room_group(room.as_str());
        match &self.live {
            Live::Off => {}
            Live::Local(hub) => hub.send_to_group(&group, &body),
            Live::Azure(web_pubsub) => {
                let (web_pubsub, room) = (Arc::clone(web_pubsub), room.clone());
                tokio::spawn(async move {
                    if let Err(e) = web_pubsub.send_to_group(&group, body).await {
                        tracing::warn!(%room, error = %e, "a live signal was not sent");
                    }
                });
            }
        }
    }
}
