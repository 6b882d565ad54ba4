//! Changes to a message row: edit, tombstone delete, pin and unpin (with its pin row). Each
//! one loads the caller's access, finds the live message (a deleted one is absent: 404), asks
//! the operation map, and rewrites the row through the store (`Store::rewrite_message_versioned`,
//! `Store::set_pinned`) — the conditional-write helper, so a concurrent edit and unpin both
//! land, and a change never resurrects a message deleted meanwhile.

use crate::auth::Principal;
use crate::error::Result;
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::limits::Write;
use crate::markdown;
use crate::messages::changes::Edit;
use crate::messages::checks::{self, Admission, refuse_timed_out};
use crate::messages::mentions::Mentions;
use crate::messages::operations::{Operation, authorize};
use crate::messages::send::{Post, checked_body, filtered_text};
use crate::messages::{Message, MessageType};
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::service::send::Submission;
use crate::signals::Signal;

/// Changing what was sent: edits, deletes, forwards and reports. Holds what it uses: the store, the
/// adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Editing {
    pub(crate) store: crate::store::Store,
    /// Asks for a delivery of the room's outgoing webhooks after an edit or delete.
    pub(crate) nudge: std::sync::Arc<crate::service::outgoing::OutgoingNudge>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) files: std::sync::Arc<crate::service::attachments::Files>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
    pub(crate) sending: std::sync::Arc<crate::service::send::Sending>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Editing {
    /// Replaces a message's text: sets `editedAt` and recomputes its mentions. The sender's
    /// timeout, the limits and the room's word filter apply as they do to a send.
    pub async fn edit_message(&self, who: &Principal, room: &RoomId, id: &MessageKey, edit: Edit) -> Result<Message> {
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Edit)?;
        let now = self.store.now();
        refuse_timed_out(&access.member, now)?;
        let format = edit.format.unwrap_or_default();
        let names = self
            .sending
            .room_names(room, &who.user_id, Some(&edit.text), format)
            .await?;
        let (text, source) = markdown::body(&edit.text, format, &names)?;
        self.limiter.check_write_limits(&access, Write::Edit(&text)).await?;
        let filtered = filtered_text(&text, source.as_deref());
        if let Admission::Filtered { timeout } = checks::word_filter(&access, &filtered) {
            return Err(self.sending.refuse_filtered(room, &who.user_id, timeout, now).await);
        }
        let text = checked_body(&text, source.as_deref())?;
        let mentions = Mentions::parse(&text)?;
        checks::mentions_allowed(&access, &mentions)?;
        let mut edited = self
            .store
            .messages
            .rewrite_message_versioned(room, &message.key(), |m| {
                m.text = text.clone();
                m.source = source.clone();
                m.mentions = mentions.clone();
                m.edited_at = Some(now);
                Ok(())
            })
            .await?;
        self.reading
            .decorate(room, &who.user_id, std::slice::from_mut(&mut edited))
            .await?;
        self.signals.signal(
            room,
            Signal::Updated {
                message: edited.clone(),
            },
        );
        self.nudge.nudge(room);
        Ok(edited)
    }

    /// Deletes a message as a tombstone: `deletedAt` and `deletedBy` stamped, text, poll and
    /// mentions wiped, the row kept; `moderated` when someone else than the author did it.
    /// Its reactions and votes are deleted after it: nothing of it is shown again, so nothing
    /// of it is kept.
    pub async fn delete_message(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<()> {
        self.delete_message_for(who, room, id, None).await
    }

    /// [`Editing::delete_message`] with a moderator's `reason` for the log: every delete goes
    /// through here, so its reports are resolved and a moderated one is logged whoever did it,
    /// however they got here.
    ///
    /// A moderated delete is logged after its tombstone commits, not in its transaction: the
    /// tombstone commits in the `Messages` partition through the version ledger, and the log
    /// lives in the `Rooms` partition, beside the rows of every other moderation action, so
    /// that reading it is one range read in one order. A crash between the two loses the log
    /// line, never the fact: the tombstone keeps who deleted it, when, and that it was
    /// moderated. The line is written together with the closing of the message's reports,
    /// in one transaction.
    pub(crate) async fn delete_message_for(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &MessageKey,
        reason: Option<String>,
    ) -> Result<()> {
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Delete)?;
        let now = self.store.now();
        self.tombstone(
            room,
            &message,
            |m| m.tombstone(who.user_id.as_str(), now),
            |deleted| {
                let line = deleted.moderated.then(|| ModerationEntry {
                    target_user_id: Some(message.author_id.clone()),
                    ..ModerationEntry::by(ModerationAction::ModeratedDelete, &who.user_id, self.store.now())
                        .message(&message.id)
                        .reason(reason)
                });
                line.into_iter().collect()
            },
        )
        .await
    }

    /// The delete path after its checks, for a member's delete and an erasure alike: the row
    /// rewritten by `wipe` with the room's next version (so the change feed carries it; a
    /// message no longer live is 404, so nothing is tombstoned twice), the live signal, the
    /// message's reports resolved (with the log lines `log` makes of the tombstone), then its
    /// reactions and votes deleted.
    pub(crate) async fn tombstone(
        &self,
        room: &RoomId,
        message: &Message,
        wipe: impl Fn(&mut Message),
        log: impl FnOnce(&Message) -> Vec<ModerationEntry>,
    ) -> Result<()> {
        let deleted = self
            .store
            .messages
            .rewrite_message_versioned(room, &message.key(), |m| {
                wipe(m);
                Ok(())
            })
            .await?;
        self.signals.signal(
            room,
            Signal::Deleted {
                message_id: message.id.clone(),
                moderated: deleted.moderated,
            },
        );
        self.nudge.nudge(room);
        self.resolve_reports_of_deleted(room, &deleted, log(&deleted)).await;
        // A tombstone carries no attachments: their rows and objects go too, before anything
        // that may fail leaves them downloadable.
        self.files.remove_attachments(room, &message.attachments).await;
        self.store.companions.delete_companions(room, &message.key()).await?;
        // A tombstone is never pinned; the pins read skips and removes a row left behind.
        if message.is_pinned {
            self.store.pins.delete_pin_row(room, &message.key()).await?;
        }
        Ok(())
    }

    /// Pins a message (its flag and its pin row commit together: `Reading::read_pins`) and
    /// writes a `PinMessage` line pointing at it. Pinning a pinned message writes no line.
    pub async fn pin_message(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<Message> {
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Pin)?;
        // Each new pin writes a line in the room: a write like any other.
        self.limiter.check_write_limits(&access, Write::Pin).await?;
        let (mut pinned, newly) = self.store.pins.set_pinned(room, &message.key(), true).await?;
        self.reading
            .hide_foreign_sources(room, &who.user_id, std::slice::from_mut(&mut pinned))
            .await;
        self.signals.signal(
            room,
            Signal::Pinned {
                message_id: pinned.id.clone(),
                is_pinned: true,
            },
        );
        if newly {
            let text = format!("{} pinned a message.", access.member.display_name());
            let mut line = Post::line(MessageType::PinMessage, who, text);
            line.pinned_message_id = Some(pinned.id.clone());
            self.sending.announce(room, Submission::Line(line)).await;
        }
        Ok(pinned)
    }

    /// Unpins a message: it leaves the room's pins. Writes no line, and rewrites only `isPinned`.
    pub async fn unpin_message(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<Message> {
        let access = self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        authorize(&access, &message, Operation::Pin)?;
        self.limiter.check_write_limits(&access, Write::Pin).await?;
        let (mut unpinned, _) = self.store.pins.set_pinned(room, &message.key(), false).await?;
        self.reading
            .hide_foreign_sources(room, &who.user_id, std::slice::from_mut(&mut unpinned))
            .await;
        self.signals.signal(
            room,
            Signal::Pinned {
                message_id: unpinned.id.clone(),
                is_pinned: false,
            },
        );
        Ok(unpinned)
    }
}
