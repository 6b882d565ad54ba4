//! The one door: every message is created here, in BRIEF §4's fixed order.
//!
//! 1. idempotency lookup — a repeat of a client id returns the first stored message and
//!    triggers nothing again;
//! 2. checks — membership, then content (sanitized once, here);
//! 3. the ascending index row, at the first free tick (a 409 means another send took the tick,
//!    in this process or another: take the next one, never overwrite);
//! 4. the message row and its idempotency record in one entity group transaction; if that
//!    fails, the index row is deleted again, so a failed send leaves nothing readable;
//! 5. after the durable write only: side effects, which never fail the send.

use chrono::Utc;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{MAX_TEXT_CHARS, Message, MessageType};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::html;
use crate::ids::{ClientId, RoomId, UserId};
use crate::keys::{MessageKey, Ticks};
use crate::schema::IDEMPOTENCY_PREFIX;
use crate::service::Chat;
use crate::storage::{BatchOp, Entity, ErrorKind, IfMatch, Value};

/// Ticks tried before a send gives up on finding a free one. Each collision means another send
/// took that exact 100 ns tick, so even a handful in a row is extraordinary.
const MAX_TICK_ATTEMPTS: usize = 64;

/// What a member sends.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMessage {
    /// HTML; sanitized before it is stored.
    pub text: String,
    /// A client-chosen id that makes retries safe (1-64 of `[A-Za-z0-9._:-]`).
    #[serde(default)]
    pub client_id: Option<String>,
}

/// The result of a send: the stored message, and whether this call stored it (`false` for a
/// repeat of an earlier send with the same client id).
#[derive(Debug, Clone)]
pub struct Sent {
    pub message: Message,
    pub created: bool,
}

/// Row key of a send's idempotency record: scoped to the sender, so client ids of different
/// users never meet.
fn idempotency_key(user: &UserId, client_id: &ClientId) -> String {
    format!("{IDEMPOTENCY_PREFIX}{}:{}", user.key(), client_id.as_str())
}

impl Chat {
    /// Sends a member's message into a room.
    pub async fn send_message(&self, who: &Principal, room: &RoomId, input: NewMessage) -> Result<Sent> {
        let client_id = input.client_id.as_deref().map(ClientId::parse).transpose()?;
        if let Some(client_id) = &client_id
            && let Some(first) = self.find_sent(room, &who.user_id, client_id).await?
        {
            return Ok(Sent {
                message: first,
                created: false,
            });
        }

        self.require_member(room, &who.user_id).await?;
        let text = checked_text(&input.text)?;

        let ticks = self.claim_index_row(room).await?;
        let message = Message {
            id: ticks.message_key().as_str().to_owned(),
            room_id: room.to_string(),
            kind: MessageType::Message,
            author_id: who.user_id.to_string(),
            author_name: who.name.clone(),
            text,
            created_at: crate::storage::entity::truncate_to_micros(ticks.to_datetime()),
            client_id: client_id.as_ref().map(|c| c.as_str().to_owned()),
        };
        let mut ops = vec![BatchOp::Insert(message.to_entity())];
        if let Some(client_id) = &client_id {
            let record = Entity::new(room.as_str(), idempotency_key(&who.user_id, client_id))
                .with("messageId", Value::String(message.id.clone()))
                .with("createdAt", Value::datetime(Utc::now()));
            ops.push(BatchOp::Insert(record));
        }
        if let Err(write_error) = self.tables.transact(&self.schema.messages, room.as_str(), &ops).await {
            self.release_index_row(room, ticks).await;
            // A concurrent retry with the same client id stored its message first: answer
            // with that one, as for any repeat.
            if write_error.is(ErrorKind::AlreadyExists)
                && write_error.batch_index == Some(1)
                && let Some(client_id) = &client_id
                && let Some(first) = self.find_sent(room, &who.user_id, client_id).await?
            {
                return Ok(Sent {
                    message: first,
                    created: false,
                });
            }
            return Err(write_error.into());
        }

        // Step 5, after the durable write: live signals and the notification event attach here.
        Ok(Sent { message, created: true })
    }

    /// The message an earlier send with this client id stored, if any.
    async fn find_sent(&self, room: &RoomId, user: &UserId, client_id: &ClientId) -> Result<Option<Message>> {
        let key = idempotency_key(user, client_id);
        let Some(record) = self.tables.get(&self.schema.messages, room.as_str(), &key).await? else {
            return Ok(None);
        };
        let id = record
            .str("messageId")
            .and_then(MessageKey::parse)
            .ok_or_else(|| Error::Internal(format!("idempotency record {room}/{key} is broken")))?;
        self.find_message(room, &id).await
    }

    /// Inserts the ascending index row at the first free tick from now.
    async fn claim_index_row(&self, room: &RoomId) -> Result<Ticks> {
        let mut ticks = (self.clock)();
        for _ in 0..MAX_TICK_ATTEMPTS {
            let row = Entity::new(room.as_str(), ticks.ascending_key().as_str());
            match self.tables.insert(&self.schema.ascending, &row).await {
                Ok(_) => return Ok(ticks),
                Err(e) if e.is(ErrorKind::AlreadyExists) => ticks = ticks.next(),
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Unavailable("no free message key; try again".into()))
    }

    /// Compensation for a failed message write. A failure here is logged: the orphan index
    /// row is harmless, since ascending reads skip rows without a message.
    async fn release_index_row(&self, room: &RoomId, ticks: Ticks) {
        let key = ticks.ascending_key();
        if let Err(e) = self
            .tables
            .delete(&self.schema.ascending, room.as_str(), key.as_str(), &IfMatch::Any)
            .await
        {
            tracing::warn!(%room, key = key.as_str(), error = %e, "could not delete the index row of a failed send");
        }
    }
}

/// Sanitizes a body and checks what is left.
fn checked_text(raw: &str) -> Result<String> {
    let text = html::sanitize(raw);
    if html::is_blank(&text) {
        return Err(Error::validation("the message is empty (after removing unsafe HTML)"));
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(Error::validation(format!(
            "the message is {chars} characters; at most {MAX_TEXT_CHARS} are allowed"
        )));
    }
    Ok(text)
}
