//! Polls: validated when created, fixed afterwards (a poll cannot be edited), and voted on by
//! any member, one vote per member, by option id.
//!
//! Each vote is its own `MessagesMetadata` row (`<message key>:v:<user>`), written with an
//! upsert and withdrawn with a delete. Voters therefore never contend on one row — twenty
//! concurrent votes are twenty independent writes, all of which land — and the stored poll
//! (question, options) is never rewritten by a vote, so no field of it can be lost to one.
//! Counts are summed when messages are read. A vote signals the room live (`message.voted`).

use super::reactions::Reactions;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::limits::Write;
use crate::messages::Message;
use crate::messages::checks::refuse_timed_out;
use crate::messages::operations::{Operation, authorize};
use crate::messages::polls::Vote;
use crate::signals::Signal;
use crate::store::companions::Companion;

impl Reactions {
    /// Votes on a poll, or withdraws the caller's vote; answers the poll with fresh counts.
    pub async fn vote(&self, who: &Principal, room: &RoomId, id: &MessageKey, vote: Vote) -> Result<Message> {
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Vote)?;
        refuse_timed_out(&access.member, self.store.now())?;
        self.limiter.check_write_limits(&access, Write::Vote).await?;
        match &vote.option_id {
            Some(option) => {
                let poll = message
                    .poll
                    .as_ref()
                    .ok_or_else(|| Error::Internal("a poll without options".into()))?;
                if !poll.options.iter().any(|o| &o.id == option) {
                    return Err(Error::validation(format!("the poll has no option {option:?}")));
                }
                let vote = Companion::Vote { option_id: option };
                self.write_companion(room, &message, &who.user_id, vote).await?;
            }
            None => {
                let vote = Companion::Vote { option_id: "" };
                self.store
                    .companions
                    .delete_companion(room, &message.key(), &who.user_id, vote)
                    .await?
            }
        }
        self.signals.signal(
            room,
            Signal::Voted {
                message_id: message.id.clone(),
            },
        );
        let mut messages = [message];
        self.reading.decorate(room, &who.user_id, &mut messages).await?;
        let [message] = messages;
        Ok(message)
    }
}
