//! Reactions and the per-user companion rows of messages in `MessagesMetadata`.
//!
//! A reaction is one row per (message, emoji, user): `<message key>:r:<emoji>:<user>`. Adding
//! is an upsert and removing a delete, so both are idempotent, and a caller can only ever
//! touch their own row. Poll votes live beside them (`<message key>:v:<user>`). Because every
//! row starts with its message's fixed-width key, the rows of a whole page of messages are one
//! range read: `decorate` fills in reaction counts and poll tallies with it.

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::MessageKey;
use crate::limits::Write;
use crate::messages::Message;
use crate::messages::checks::refuse_timed_out;
use crate::messages::operations::{Operation, authorize};
use crate::messages::reactions::{MAX_EMOJI_PER_MESSAGE, ReactionCount, checked_emoji};
use crate::signals::Signal;
use crate::store::companions::Companion;

/// Reactions and poll votes. Holds what it uses: the store, the adapters and settings, and the
/// components it calls.
#[derive(Clone)]
pub struct Reactions {
    pub(crate) store: crate::store::Store,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Reactions {
    /// Adds the caller's reaction (again is a no-op); answers the message's reactions.
    pub async fn react(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        emoji: &str,
    ) -> Result<Vec<ReactionCount>> {
        let emoji = checked_emoji(emoji)?;
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::React)?;
        refuse_timed_out(&access.member, self.store.now())?;
        self.limiter.check_write_limits(&access, Write::Reaction).await?;
        let current = self.reactions(room, &who.user_id, &message).await?;
        if current.len() >= MAX_EMOJI_PER_MESSAGE && !current.iter().any(|r| r.emoji == emoji) {
            return Err(Error::Conflict(format!(
                "a message carries at most {MAX_EMOJI_PER_MESSAGE} different emoji"
            )));
        }
        self.write_companion(room, &message, &who.user_id, Companion::Reaction { emoji })
            .await?;
        self.signals.signal(
            room,
            Signal::Reacted {
                message_id: message.id.clone(),
            },
        );
        self.reactions(room, &who.user_id, &message).await
    }

    /// Removes the caller's own reaction (absent is a no-op); answers the message's reactions.
    pub async fn unreact(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        emoji: &str,
    ) -> Result<Vec<ReactionCount>> {
        let emoji = checked_emoji(emoji)?;
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::React)?;
        self.limiter.check_write_limits(&access, Write::Reaction).await?;
        self.store
            .companions
            .delete_companion(room, &message.key(), &who.user_id, Companion::Reaction { emoji })
            .await?;
        self.signals.signal(
            room,
            Signal::Reacted {
                message_id: message.id.clone(),
            },
        );
        self.reactions(room, &who.user_id, &message).await
    }

    /// Writes a companion row of a live message. A delete may have raced the write: the message
    /// is read again afterwards, and a row that landed after the tombstone is taken back (404),
    /// so nothing of a deleted message is left behind.
    pub(crate) async fn write_companion(
        &self,
        room: &RoomId,
        message: &Message,
        user: &UserId,
        companion: Companion<'_>,
    ) -> Result<()> {
        let key = message.key();
        self.store.companions.put_companion(room, &key, user, companion).await?;
        if let Err(gone) = self.reading.live_message(room, &message.key()).await {
            self.store
                .companions
                .delete_companion(room, &key, user, companion)
                .await?;
            return Err(gone);
        }
        Ok(())
    }

    async fn reactions(&self, room: &RoomId, reader: &UserId, message: &Message) -> Result<Vec<ReactionCount>> {
        let mut one = [message.clone()];
        self.reading.tally(room, reader, &mut one).await?;
        let [message] = one;
        Ok(message.reactions)
    }
}
