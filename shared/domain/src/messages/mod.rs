//! Messages: the stored model, the one door every message comes through (`send`), the
//! type → operation → permission map (`operations`), and everything done to a message once it
//! exists: edits, tombstone deletes and pins (`changes`), polls, reactions, threads, forwards,
//! mentions, and reads with their opaque cursors.

pub mod change_cursor;
pub mod changes;
pub mod checks;
pub mod cursor;
pub mod feed;
pub mod forward;
pub mod mentions;
pub mod operations;
pub mod polls;
pub mod previews;
pub mod reactions;
pub mod read;
pub mod send;
pub mod threads;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use self::mentions::Mentions;
use self::polls::Poll;
use self::reactions::ReactionCount;
use crate::attachments::Attachment;
use crate::keys::MessageKey;

/// Longest message, in characters of sanitized HTML.
pub const MAX_TEXT_CHARS: usize = 10_000;

/// 422 for a text (HTML, or a Markdown source) longer than a message may be.
pub fn within_text_limit(text: &str) -> crate::error::Result<()> {
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(crate::error::Error::validation(format!(
            "the message is {chars} characters; at most {MAX_TEXT_CHARS} are allowed"
        )));
    }
    Ok(())
}

/// What kind of line a message is. Members create `Message` and `Poll`; the server writes
/// `System` (joins, leaves, removals), `EditRoom` (renames), `PinMessage` (pins) and `Call`
/// lines itself, and inbound webhooks write `Webhook`. Only `Message` and `Webhook` text is
/// HTML; the server's lines carry names as plain text and must be shown as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MessageType {
    Message,
    Poll,
    Call,
    EditRoom,
    PinMessage,
    System,
    Webhook,
}

impl MessageType {
    pub const ALL: [MessageType; 7] = [
        MessageType::Message,
        MessageType::Poll,
        MessageType::Call,
        MessageType::EditRoom,
        MessageType::PinMessage,
        MessageType::System,
        MessageType::Webhook,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Message => "Message",
            MessageType::Poll => "Poll",
            MessageType::Call => "Call",
            MessageType::EditRoom => "EditRoom",
            MessageType::PinMessage => "PinMessage",
            MessageType::System => "System",
            MessageType::Webhook => "Webhook",
        }
    }

    pub fn parse(text: &str) -> Option<MessageType> {
        MessageType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// Where a forwarded message came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardSource {
    /// The source room: shown only to a reader who is a member of it, since a room id is
    /// enough to join the room. Never in live signals, which every member of the copy's room
    /// gets (read the message to see it). Always stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub room_id: Option<String>,
    pub message_id: String,
}

/// Who wrote a message: a person (a member's send, a forward, a scheduled send), an inbound
/// webhook, an automation (an inbound webhook its managers flagged as one), or the server (its
/// own lines). Only a person's message in a public room makes an automation event, so an
/// automation reacting to messages can never set itself off (docs/AUTOMATION_EVENTS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    #[default]
    User,
    Webhook,
    Automation,
    Server,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Webhook => "webhook",
            Origin::Automation => "automation",
            Origin::Server => "server",
        }
    }

    pub fn parse(text: &str) -> Option<Origin> {
        [Origin::User, Origin::Webhook, Origin::Automation, Origin::Server]
            .into_iter()
            .find(|o| o.as_str() == text)
    }

    /// The origin of a row stored before origins were: told by its kind.
    pub fn of_kind(kind: MessageType) -> Origin {
        match kind {
            MessageType::Message | MessageType::Poll => Origin::User,
            MessageType::Webhook => Origin::Webhook,
            MessageType::Call | MessageType::EditRoom | MessageType::PinMessage | MessageType::System => Origin::Server,
        }
    }

    /// Whether a message of this origin may make an automation event: only a person's.
    pub fn triggers_automations(self) -> bool {
        self == Origin::User
    }
}

/// A message as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The message's id in its room: its 19-digit `Messages` row key.
    pub id: String,
    pub room_id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub author_id: String,
    pub author_name: String,
    /// Who wrote it: `user`, `webhook`, `automation` or `server`.
    pub origin: Origin,
    /// The picture shown with a webhook's message (its `icon_url` override); none for others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar_url: Option<String>,
    /// Sanitized HTML for `Message` and `Webhook`; plain text for the server's lines; empty for
    /// a poll (see `poll`) and for a deleted message.
    pub text: String,
    /// The Markdown `text` was rendered from, for a message sent or edited as Markdown (what
    /// a client edits); none for HTML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Its room's counter value at its newest change (create, edit, delete); see `versions`.
    pub version: u64,
    /// The id the client sent it with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Set by every edit of the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_at: Option<DateTime<Utc>>,
    /// Set when deleted: the row stays as a tombstone, its body wiped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_by: Option<String>,
    /// True when deleted by someone other than the author.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub moderated: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_pinned: bool,
    /// The message this one answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// The thread's root: the first message of the reply chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// For a `PinMessage` line: the message that was pinned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<ForwardSource>,
    #[serde(skip_serializing_if = "Mentions::is_empty")]
    pub mentions: Mentions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll: Option<Poll>,
    /// Reactions per emoji; filled in on reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reactions: Vec<ReactionCount>,
    /// Files attached at send (at most 10); none on a tombstone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// On a thread's root: its replies' count, last time and participants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<threads::ThreadSummary>,
    /// The preview of the message's first link, once the server fetched it (companion data,
    /// filled in on reads; no change of `version`). See `previews`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<previews::LinkPreview>,
}

impl Message {
    /// The message's key; its id was parsed from (or built as) one.
    pub fn key(&self) -> MessageKey {
        MessageKey::parse(&self.id).expect("a message id is a message key")
    }

    /// Drops the source room of a forwarded copy from what is shown (see [`ForwardSource`]).
    pub fn hide_source_room(&mut self) {
        if let Some(source) = &mut self.forwarded_from {
            source.room_id = None;
        }
    }

    /// The message as shown to a reader who belongs to no room but this one (an outgoing
    /// webhook's endpoint): a forwarded copy without a source room other than its own.
    pub fn without_foreign_source(&self) -> std::borrow::Cow<'_, Message> {
        let foreign = self
            .forwarded_from
            .as_ref()
            .and_then(|source| source.room_id.as_deref())
            .is_some_and(|source| source != self.room_id);
        match foreign {
            false => std::borrow::Cow::Borrowed(self),
            true => {
                let mut shown = self.clone();
                shown.hide_source_room();
                std::borrow::Cow::Owned(shown)
            }
        }
    }

    /// False for a tombstone.
    pub fn is_live(&self) -> bool {
        self.deleted_at.is_none()
    }

    /// Turns the message into its tombstone: body, poll and mentions wiped, the row kept.
    pub fn tombstone(&mut self, by: &str, at: DateTime<Utc>) {
        self.moderated = by != self.author_id;
        self.deleted_at = Some(at);
        self.deleted_by = Some(by.to_owned());
        self.text.clear();
        self.source = None;
        self.poll = None;
        self.mentions = Mentions::default();
        self.is_pinned = false;
        self.reactions.clear();
        self.attachments.clear();
    }

    /// A tombstone for its author's erasure: their own delete, and also without their display
    /// name or, for a copy they forwarded, its source. The author's id stays, as the ids in
    /// other people's mentions do: an id is not something they wrote.
    pub fn erase(&mut self, at: DateTime<Utc>) {
        let author = self.author_id.clone();
        self.tombstone(&author, at);
        self.author_name.clear();
        self.forwarded_from = None;
    }
}

/// A plain message of a person, for tests.
#[cfg(test)]
pub(crate) fn sample(id: &str, text: &str) -> Message {
    Message {
        id: id.to_owned(),
        room_id: "r".into(),
        kind: MessageType::Message,
        author_id: "a".into(),
        author_name: "A".into(),
        origin: Origin::User,
        avatar_url: None,
        text: text.to_owned(),
        source: None,
        created_at: chrono::DateTime::UNIX_EPOCH,
        version: 0,
        client_id: None,
        edited_at: None,
        deleted_at: None,
        deleted_by: None,
        moderated: false,
        is_pinned: false,
        reply_to: None,
        thread_id: None,
        pinned_message_id: None,
        forwarded_from: None,
        mentions: Default::default(),
        poll: None,
        reactions: Vec::new(),
        attachments: Vec::new(),
        thread: None,
        preview: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an outgoing webhook's endpoint is sent of a forwarded copy: the source message,
    /// never a source room other than the copy's own (a room id is enough to join a room).
    #[test]
    fn a_copy_shown_outside_has_no_foreign_source_room() {
        let mut copy = sample("0000000000000000001", "<p>hi</p>");
        copy.forwarded_from = Some(ForwardSource {
            room_id: Some("elsewhere".into()),
            message_id: "0000000000000000002".into(),
        });
        let shown = copy.without_foreign_source();
        assert_eq!(shown.forwarded_from.as_ref().unwrap().room_id, None);
        assert_eq!(shown.forwarded_from.as_ref().unwrap().message_id, "0000000000000000002");
        // A copy forwarded within its own room keeps it: nothing is told that is not known.
        copy.forwarded_from.as_mut().unwrap().room_id = Some(copy.room_id.clone());
        assert_eq!(copy.without_foreign_source().forwarded_from, copy.forwarded_from);
    }
}
