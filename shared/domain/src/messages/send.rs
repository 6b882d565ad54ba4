//! What a send carries: a member's new message, the draft on its way through the checks, the
//! post the one door writes, and content validation. The one door is `crate::service::send`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::checks::{self};
use super::mentions::Mentions;
use super::polls::{NewPoll, Poll};
use super::{ForwardSource, Message, MessageType, within_text_limit};
use crate::access::Access;
use crate::attachments::Attachment;
use crate::error::{Error, Result};
use crate::html;
use crate::ids::{ClientId, UserId};
use crate::markdown::TextFormat;
use crate::principal::Principal;

/// What a member sends.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMessage {
    /// `Message` (the default) or `Poll`; the other types are written by the server.
    #[serde(rename = "type", default)]
    pub kind: Option<MessageType>,
    /// HTML, sanitized before it is stored; or Markdown, with `format: markdown`. Required for
    /// a `Message`.
    #[serde(default)]
    pub text: Option<String>,
    /// How `text` is written: `html` (the default) or `markdown`, which the server renders to
    /// sanitized HTML once and keeps as the message's `source`.
    #[serde(default)]
    pub format: Option<TextFormat>,
    /// Required for a `Poll`.
    #[serde(default)]
    pub poll: Option<NewPoll>,
    /// A client-chosen id that makes retries safe (1-64 of `[A-Za-z0-9._:-]`).
    #[serde(default)]
    pub client_id: Option<String>,
    /// The id of the message this one answers; the reply joins that message's thread.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Ids of uploads (`createUpload`) to attach: at most 10, each an upload of the sender in
    /// this room, uploaded with its declared size and type, on no other message.
    #[serde(default)]
    pub attachments: Option<Vec<String>>,
}

impl NewMessage {
    /// A plain text message.
    pub fn text(text: impl Into<String>) -> NewMessage {
        NewMessage {
            text: Some(text.into()),
            ..NewMessage::default()
        }
    }
}

/// The result of a send: the stored message, and whether this call stored it (`false` for a
/// repeat of an earlier send with the same client id).
#[derive(Debug, Clone)]
pub struct Sent {
    pub message: Message,
    pub created: bool,
}

impl Sent {
    /// The answer to a repeat: the message the first send stored.
    pub fn repeat(first: Message) -> Sent {
        Sent {
            message: first,
            created: false,
        }
    }
}

/// A member's message on its way through the checks: sanitized, not yet validated.
#[derive(Debug, Clone)]
pub struct Draft {
    pub kind: MessageType,
    /// Sanitized HTML.
    pub text: Option<String>,
    /// The Markdown `text` was rendered from, if it was.
    pub source: Option<String>,
    pub poll: Option<NewPoll>,
    pub reply_to: Option<String>,
    pub forwarded_from: Option<ForwardSource>,
    /// Upload ids a member's send names (checked in the one door), or the attachments a
    /// forward's copy carries (already copied into the target room).
    pub attachments: DraftAttachments,
}

/// The attachments of a draft.
#[derive(Debug, Clone, Default)]
pub enum DraftAttachments {
    #[default]
    None,
    /// Upload ids a member named; each is checked before the write.
    Named(Vec<String>),
    /// A forward's: the source message's files, copied into the target room once its checks
    /// pass.
    Copied {
        from: crate::ids::RoomId,
        files: Vec<Attachment>,
    },
}

impl DraftAttachments {
    /// Whether the message would carry files (an empty list names none).
    pub fn carries_files(&self) -> bool {
        match self {
            DraftAttachments::None => false,
            DraftAttachments::Named(ids) => !ids.is_empty(),
            DraftAttachments::Copied { files, .. } => !files.is_empty(),
        }
    }
}

/// A draft that passed validation.
pub struct Content {
    pub text: String,
    pub source: Option<String>,
    pub poll: Option<Poll>,
    pub mentions: Mentions,
}

impl Draft {
    /// What the word filter reads: the text (and a Markdown source, which readers get too,
    /// with what its rendering leaves out), or a poll's question and options.
    pub fn filter_text(&self) -> String {
        match (&self.text, &self.poll) {
            (Some(text), _) => filtered_text(text, self.source.as_deref()),
            (None, Some(poll)) => html::escape(&poll.words()),
            (None, None) => String::new(),
        }
    }

    /// Content validation, the last of the checks: the body the type needs, and mentions the
    /// sender may make.
    pub fn validate(&self, access: &Access) -> Result<Content> {
        let content = match (self.kind, &self.text, &self.poll) {
            (MessageType::Poll, None, Some(poll)) => Content {
                text: String::new(),
                source: None,
                poll: Some(poll.validate()?),
                mentions: Mentions::default(),
            },
            (MessageType::Poll, _, _) => {
                return Err(Error::validation("a Poll carries `poll` and no `text`"));
            }
            (_, Some(text), None) => Content {
                text: checked_body(text, self.source.as_deref())?,
                source: self.source.clone(),
                poll: None,
                mentions: Mentions::parse(text)?,
            },
            (_, _, _) => return Err(Error::validation("a Message carries `text` and no `poll`")),
        };
        checks::mentions_allowed(access, &content.mentions)?;
        Ok(content)
    }
}

/// A message ready to be written: what step 4 stores, whoever wrote it.
#[derive(Debug, Clone)]
pub struct Post {
    pub kind: MessageType,
    pub author_id: String,
    pub author_name: String,
    pub avatar_url: Option<String>,
    pub text: String,
    pub source: Option<String>,
    pub poll: Option<Poll>,
    pub mentions: Mentions,
    pub idempotency: Option<(UserId, ClientId)>,
    pub reply_to: Option<String>,
    pub thread_id: Option<String>,
    pub pinned_message_id: Option<String>,
    pub forwarded_from: Option<ForwardSource>,
    pub attachments: Vec<Attachment>,
    /// The member whose read position the send moves to the new message: its sender, for a
    /// member's message (a sender has read their own room); none for the server's lines.
    pub reader: Option<UserId>,
    /// The reader's member row as the send read it (its read position and row version), so
    /// moving the position is one conditional write while the row is unchanged.
    pub reader_row: Option<crate::members::Member>,
    /// The sender's tally, counted in the message's transaction (`crate::trust`): none for a
    /// send that is not counted.
    pub counted: Option<crate::trust::Counted>,
    /// Who wrote it (see [`crate::messages::Origin`]).
    pub origin: crate::messages::Origin,
    /// Whether its room is public: only a person's message in a public room makes an
    /// automation event.
    pub public_room: bool,
}

impl Post {
    /// A line in the room's own voice (join, leave, rename, pin), naming `actor` as its author.
    pub fn line(kind: MessageType, actor: &Principal, text: String) -> Post {
        Post {
            kind,
            author_id: actor.user_id.to_string(),
            author_name: actor.name.clone(),
            avatar_url: None,
            text,
            source: None,
            poll: None,
            mentions: Mentions::default(),
            idempotency: None,
            reply_to: None,
            thread_id: None,
            pinned_message_id: None,
            forwarded_from: None,
            attachments: Vec::new(),
            reader: None,
            reader_row: None,
            counted: None,
            origin: crate::messages::Origin::Server,
            public_room: false,
        }
    }

    /// The message this post becomes when stored in `room` under `key` at `created_at`: new,
    /// unedited, version 0 until its transaction says otherwise.
    pub fn message_at(
        &self,
        room: &crate::ids::RoomId,
        key: crate::keys::MessageKey,
        created_at: chrono::DateTime<chrono::Utc>,
    ) -> Message {
        Message {
            id: key.as_str().to_owned(),
            room_id: room.to_string(),
            kind: self.kind,
            author_id: self.author_id.clone(),
            author_name: self.author_name.clone(),
            origin: self.origin,
            avatar_url: self.avatar_url.clone(),
            text: self.text.clone(),
            source: self.source.clone(),
            created_at,
            version: 0,
            client_id: self.idempotency.as_ref().map(|(_, c)| c.as_str().to_owned()),
            edited_at: None,
            deleted_at: None,
            deleted_by: None,
            moderated: false,
            is_pinned: false,
            reply_to: self.reply_to.clone(),
            thread_id: self.thread_id.clone(),
            pinned_message_id: self.pinned_message_id.clone(),
            forwarded_from: self.forwarded_from.clone(),
            mentions: self.mentions.clone(),
            poll: self.poll.clone(),
            reactions: Vec::new(),
            attachments: self.attachments.clone(),
            thread: None,
            preview: None,
        }
    }
}

/// Checks a sanitized body: [`checked_text`] for HTML a client sent; for a rendering of
/// Markdown `source`, the source's length (the rendering may be longer than its source, within
/// what a row holds).
pub fn checked_body(text: &str, source: Option<&str>) -> Result<String> {
    let Some(source) = source else {
        return checked_text(text);
    };
    within_text_limit(source)?;
    if html::is_blank(text) {
        return Err(Error::validation("the message is empty (after removing unsafe HTML)"));
    }
    let units = text.encode_utf16().count();
    if units > crate::markdown::MAX_RENDERED_UNITS {
        return Err(Error::validation(format!(
            "the message renders to {units} UTF-16 units of HTML; at most {} are kept",
            crate::markdown::MAX_RENDERED_UNITS
        )));
    }
    Ok(text.to_owned())
}

/// Checks a sanitized body: something visible, and not too long.
pub fn checked_text(text: &str) -> Result<String> {
    if html::is_blank(text) {
        return Err(Error::validation("the message is empty (after removing unsafe HTML)"));
    }
    within_text_limit(text)?;
    Ok(text.to_owned())
}

/// What the word filter reads of a message's text: its HTML, and a Markdown source beside
/// it (readers get the source too, with what its rendering leaves out).
pub fn filtered_text(text: &str, source: Option<&str>) -> String {
    match source {
        Some(source) => format!("{text}\n{}", html::escape(source)),
        None => text.to_owned(),
    }
}
