//! Messages: the stored model, the send path (`send`, the one door), reads (`read`) and the
//! opaque cursors pages are resumed with (`cursor`).

pub mod cursor;
pub mod read;
pub mod send;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::storage::{Entity, Value};

/// Longest message, in characters of sanitized HTML.
pub const MAX_TEXT_CHARS: usize = 10_000;

/// What kind of line a message is. Members create `Message` (and `Poll`); the server writes
/// the others itself.
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

    fn parse(text: &str) -> Option<MessageType> {
        [
            MessageType::Message,
            MessageType::Poll,
            MessageType::Call,
            MessageType::EditRoom,
            MessageType::PinMessage,
            MessageType::System,
            MessageType::Webhook,
        ]
        .into_iter()
        .find(|t| t.as_str() == text)
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
    /// Sanitized HTML.
    pub text: String,
    pub created_at: DateTime<Utc>,
    /// The id the client sent it with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

impl Message {
    /// The `Messages` row for this message.
    pub(crate) fn to_entity(&self) -> Entity {
        let mut entity = Entity::new(&self.room_id, &self.id)
            .with("type", Value::String(self.kind.as_str().into()))
            .with("userId", Value::String(self.author_id.clone()))
            .with("userName", Value::String(self.author_name.clone()))
            .with("message", Value::String(self.text.clone()))
            .with("createdAt", Value::datetime(self.created_at));
        if let Some(client_id) = &self.client_id {
            entity.set("clientId", Value::String(client_id.clone()));
        }
        entity
    }

    /// Reads a `Messages` row. A row that does not parse is a server fault, never the caller's.
    pub(crate) fn from_entity(room: &RoomId, entity: &Entity) -> Result<Message> {
        let broken = |what: &str| Error::Internal(format!("message {}/{}: {what}", room, entity.row_key));
        MessageKey::parse(&entity.row_key).ok_or_else(|| broken("not a message key"))?;
        Ok(Message {
            id: entity.row_key.clone(),
            room_id: room.to_string(),
            kind: entity
                .str("type")
                .and_then(MessageType::parse)
                .ok_or_else(|| broken("unknown type"))?,
            author_id: entity.str("userId").unwrap_or_default().to_owned(),
            author_name: entity.str("userName").unwrap_or_default().to_owned(),
            text: entity.str("message").unwrap_or_default().to_owned(),
            created_at: entity.datetime("createdAt").ok_or_else(|| broken("no createdAt"))?,
            client_id: entity.str("clientId").map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests;
