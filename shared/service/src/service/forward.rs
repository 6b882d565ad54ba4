//! Forwarding a message into other rooms. Each copy goes through the one door as the
//! forwarder's own send, so every target room applies its own checks (membership, timeout,
//! read-only, slowmode, word filter — a filter timeout lands only in the room that caught it).
//! Each room succeeds or fails on its own, and the answer lists which. The source's files are
//! copied into each room whose checks pass, as the forwarder's own (files copied, not shared),
//! so deleting the source leaves every copy whole.
//!
//! A copy remembers its source room, which a reader who is not in it must not learn: it is
//! shown only to readers who are members of the source (`hide_foreign_sources`, run wherever
//! messages are returned to a reader) and never in live signals (`signals`).

use super::changes::Editing;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::forward::{Forward, ForwardOutcome, MAX_FORWARD_ROOMS};
use crate::messages::operations::{Operation, authorize};
use crate::messages::send::{Draft, DraftAttachments};
use crate::messages::{ForwardSource, MessageType};
use crate::service::send::Submission;
use futures::future::join_all;

impl Editing {
    /// Forwards a live message to each room of `forward.room_ids`, in request order.
    pub async fn forward_message(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        forward: Forward,
    ) -> Result<Vec<ForwardOutcome>> {
        if !(1..=MAX_FORWARD_ROOMS).contains(&forward.room_ids.len()) {
            return Err(Error::validation(format!("forward to 1..={MAX_FORWARD_ROOMS} rooms")));
        }
        for (index, target) in forward.room_ids.iter().enumerate() {
            if forward.room_ids[..index].contains(target) {
                return Err(Error::validation(format!("room {target} is listed twice")));
            }
        }
        let access = self.access.access(room, &who.user_id).await?;
        let source = self.reading.live_message(room, id).await?;
        authorize(&access, &source, Operation::Forward)?;

        let draft = Draft {
            kind: MessageType::Message,
            text: Some(source.text.clone()),
            source: source.source.clone(),
            poll: None,
            reply_to: None,
            forwarded_from: Some(ForwardSource {
                room_id: Some(room.to_string()),
                message_id: source.id.clone(),
            }),
            attachments: match source.attachments.is_empty() {
                true => DraftAttachments::None,
                false => DraftAttachments::Copied {
                    from: room.clone(),
                    files: source.attachments.clone(),
                },
            },
        };
        let copies = forward.room_ids.iter().map(|target| {
            let draft = draft.clone();
            async move {
                let sent = match RoomId::parse(target) {
                    Ok(target_room) => {
                        let copy = Submission::Member {
                            who: who.clone(),
                            draft,
                            client_id: None,
                        };
                        self.sending.submit(&target_room, copy).await
                    }
                    Err(e) => Err(e),
                };
                ForwardOutcome {
                    room_id: target.clone(),
                    copy: sent.map(|sent| sent.message),
                }
            }
        });
        Ok(join_all(copies).await)
    }
}
