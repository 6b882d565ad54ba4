//! The type → operation → who-may map: the one place that decides what may be done to a
//! message. It is a `match` over every type, so adding a type does not compile until it
//! declares its operations.
//!
//! Answers: an operation the type does not support is 400 for everyone, ManageMessages and the
//! owner included; an operation the caller may not perform is 403; a missing or deleted message
//! is 404 (decided before this map is asked).

use serde::Serialize;

use super::{Message, MessageType};
use crate::access::Access;
use crate::error::{Error, Result};
use crate::permissions::Permission;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Operation {
    Edit,
    Delete,
    /// Pin and unpin.
    Pin,
    Vote,
    React,
    /// Send a message with `replyTo` pointing at this one.
    Reply,
    Forward,
    /// Report it to the room's moderators.
    Report,
}

impl Operation {
    pub const ALL: [Operation; 8] = [
        Operation::Edit,
        Operation::Delete,
        Operation::Pin,
        Operation::Vote,
        Operation::React,
        Operation::Reply,
        Operation::Forward,
        Operation::Report,
    ];
}

/// Who may perform a supported operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The author, or a member with ManageMessages.
    Author,
    /// Any member (membership was already checked).
    AnyMember,
    /// Members with ManageMessages only.
    ManageMessages,
}

/// Who may perform `operation` on a message of type `kind`; `None` when the type does not
/// support it at all.
pub fn who_may(kind: MessageType, operation: Operation) -> Option<Who> {
    use Operation::*;
    match kind {
        MessageType::Message => match operation {
            Edit | Delete | Pin => Some(Who::Author),
            React | Reply | Forward | Report => Some(Who::AnyMember),
            Vote => None,
        },
        MessageType::Poll => match operation {
            Delete | Pin => Some(Who::Author),
            Vote | React | Reply | Report => Some(Who::AnyMember),
            // A poll's options are fixed once voted on; a copy would not carry its votes.
            Edit | Forward => None,
        },
        // A webhook's message has no user author: its author operations need ManageMessages.
        MessageType::Webhook => match operation {
            Edit | Delete | Pin => Some(Who::ManageMessages),
            React | Reply | Forward | Report => Some(Who::AnyMember),
            Vote => None,
        },
        // Written in the room's own voice by the server: nothing may be done to them.
        MessageType::Call | MessageType::EditRoom | MessageType::PinMessage | MessageType::System => None,
    }
}

/// Checks `operation` on `message` for the caller in `access`.
pub fn authorize(access: &Access, message: &Message, operation: Operation) -> Result<()> {
    let Some(who) = who_may(message.kind, operation) else {
        return Err(Error::bad_request(format!(
            "a {} line does not support {operation:?}",
            message.kind.as_str()
        )));
    };
    let is_author = message.kind != MessageType::Webhook && message.author_id == access.member.user_id.as_str();
    let allowed = match who {
        Who::AnyMember => true,
        Who::Author => is_author || access.can(Permission::ManageMessages),
        Who::ManageMessages => access.can(Permission::ManageMessages),
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::Forbidden(format!("you may not {operation:?} this message")))
    }
}
