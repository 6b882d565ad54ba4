//! Changes to a message row: edit, tombstone delete, pin and unpin. Each one loads the
//! caller's access, finds the live message (a deleted one is absent: 404), asks the operation
//! map, and rewrites the row through `rewrite` — the conditional-write helper, so a concurrent
//! edit and unpin both land, and a change never resurrects a message deleted meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;
use serde::Deserialize;
use utoipa::ToSchema;

use super::checks::{self, Admission, refuse_timed_out};
use super::mentions::Mentions;
use super::operations::{Operation, authorize};
use super::send::{Post, checked_text};
use super::{Message, MessageType};
use crate::auth::Principal;
use crate::error::{Error, Result, settle};
use crate::html;
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::live::signals::Signal;
use crate::service::Chat;
use crate::storage::conditional::{update_conditionally, update_conditionally_with};
use crate::storage::{BatchOp, ETag, Entity, ErrorKind, IfMatch, StoreError, UpdateMode};
use crate::store::ledger as versions;

/// A new text for a message.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// HTML, sanitized like a send; something must be left visible, at most 10000 characters
    /// after sanitizing.
    #[schema(min_length = 1)]
    pub text: String,
}

impl Chat {
    /// Replaces a message's text: sets `editedAt` and recomputes its mentions. The sender's
    /// timeout and the room's word filter apply as they do to a send.
    pub async fn edit_message(&self, who: &Principal, room: &RoomId, id: &str, edit: Edit) -> Result<Message> {
        let access = self.access(room, &who.user_id).await?;
        let message = self.live_message(room, id).await?;
        authorize(&access, &message, Operation::Edit)?;
        let now = Utc::now();
        refuse_timed_out(&access.member, now)?;
        let text = html::sanitize(&edit.text);
        if let Admission::Filtered { timeout } = checks::word_filter(&access, &text) {
            return Err(self.refuse_filtered(room, &who.user_id, timeout, now).await);
        }
        let text = checked_text(&text)?;
        let mentions = Mentions::parse(&text)?;
        checks::mentions_allowed(&access, &mentions)?;
        let mut edited = self
            .rewrite_versioned(room, &message.key(), |m| {
                m.text = text.clone();
                m.mentions = mentions.clone();
                m.edited_at = Some(now);
                Ok(())
            })
            .await?;
        self.decorate(room, &who.user_id, std::slice::from_mut(&mut edited))
            .await?;
        self.signal(
            room,
            Signal::Updated {
                message: edited.clone(),
            },
        );
        Ok(edited)
    }

    /// Deletes a message as a tombstone: `deletedAt` and `deletedBy` stamped, text, poll and
    /// mentions wiped, the row kept; `moderated` when someone else than the author did it.
    /// Its reactions and votes are deleted after it: nothing of it is shown again, so nothing
    /// of it is kept.
    pub async fn delete_message(&self, who: &Principal, room: &RoomId, id: &str) -> Result<()> {
        let access = self.access(room, &who.user_id).await?;
        let message = self.live_message(room, id).await?;
        authorize(&access, &message, Operation::Delete)?;
        let now = Utc::now();
        self.rewrite_versioned(room, &message.key(), |m| {
            m.tombstone(who.user_id.as_str(), now);
            Ok(())
        })
        .await?;
        self.signal(
            room,
            Signal::Deleted {
                message_id: message.id.clone(),
            },
        );
        let companions = super::reactions::companion_rows(room, &message.key());
        self.store
            .tables
            .delete_range(&self.store.schema.metadata, &companions)
            .await?;
        Ok(())
    }

    /// Pins a message and writes a `PinMessage` line pointing at it. Pinning a pinned message
    /// changes nothing and writes no line.
    pub async fn pin_message(&self, who: &Principal, room: &RoomId, id: &str) -> Result<Message> {
        let access = self.access(room, &who.user_id).await?;
        let message = self.live_message(room, id).await?;
        authorize(&access, &message, Operation::Pin)?;
        let mut newly = false;
        let mut pinned = self
            .rewrite(room, &message.key(), |m| {
                newly = !m.is_pinned;
                m.is_pinned = true;
                Ok(())
            })
            .await?;
        self.hide_foreign_sources(room, &who.user_id, std::slice::from_mut(&mut pinned))
            .await;
        self.signal(
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
            self.announce_post(room, line).await;
        }
        Ok(pinned)
    }

    /// Unpins a message. Writes no line, and rewrites only `isPinned`.
    pub async fn unpin_message(&self, who: &Principal, room: &RoomId, id: &str) -> Result<Message> {
        let access = self.access(room, &who.user_id).await?;
        let message = self.live_message(room, id).await?;
        authorize(&access, &message, Operation::Pin)?;
        let mut unpinned = self
            .rewrite(room, &message.key(), |m| {
                m.is_pinned = false;
                Ok(())
            })
            .await?;
        self.hide_foreign_sources(room, &who.user_id, std::slice::from_mut(&mut unpinned))
            .await;
        self.signal(
            room,
            Signal::Pinned {
                message_id: unpinned.id.clone(),
                is_pinned: false,
            },
        );
        Ok(unpinned)
    }

    /// Rewrites a live message row with the conditional-write helper: `change` runs on the
    /// row as it is now (again after every lost race), and a message deleted meanwhile is 404.
    /// Pins use this; they do not move the message's version.
    pub(crate) async fn rewrite(
        &self,
        room: &RoomId,
        key: &MessageKey,
        change: impl FnMut(&mut Message) -> Result<()>,
    ) -> Result<Message> {
        let entity = update_conditionally(
            &self.store.tables,
            &self.store.schema.messages,
            room.as_str(),
            key.as_str(),
            UpdateMode::Replace,
            live_change(room, change),
        )
        .await
        .map_err(|e| settle(e, "message not found"))?;
        Message::from_entity(room, &entity)
    }

    /// `rewrite` for a change the feed carries (text edits, deletes): the row is written with
    /// the room's next version, its old feed row replaced by one at the new version, all in the
    /// counter's transaction.
    pub(crate) async fn rewrite_versioned(
        &self,
        room: &RoomId,
        key: &MessageKey,
        change: impl FnMut(&mut Message) -> Result<()>,
    ) -> Result<Message> {
        let given = Arc::new(AtomicU64::new(0));
        let write = |next: Entity, seen: ETag| {
            let given = given.clone();
            async move {
                let current = Message::from_entity(room, &next).map_err(|e| StoreError::internal(e.to_string()))?;
                let build = move |version| {
                    let mut message = current.clone();
                    let old = message.version;
                    message.version = version;
                    let mut ops = vec![BatchOp::Update {
                        entity: message.to_entity(),
                        mode: UpdateMode::Replace,
                        if_match: IfMatch::Etag(seen.clone()),
                    }];
                    // A version at or below the message's own comes from a stale copy of the
                    // counter: the transaction fails on the counter and is renumbered, but it
                    // must still be well-formed (one operation per row).
                    if old > 0 && old < version {
                        ops.push(BatchOp::Delete {
                            partition_key: current.room_id.clone(),
                            row_key: versions::feed_key(old),
                            if_match: IfMatch::Any,
                        });
                    }
                    ops.push(BatchOp::Insert(message.to_feed_entity()));
                    ops
                };
                let committed = self.store.commit_change(room, Box::new(build)).await?;
                given.store(committed.version, Ordering::Relaxed);
                match committed.etags[0].clone() {
                    Some(etag) => Ok(etag),
                    // A commit confirmed after an ambiguous answer tells no ETags: the row does.
                    None => self
                        .store
                        .tables
                        .get(&self.store.schema.messages, room.as_str(), key.as_str())
                        .await?
                        .and_then(|row| row.etag)
                        .ok_or_else(|| StoreError::new(ErrorKind::Indeterminate, "the edited message is gone")),
                }
            }
        };
        let entity = update_conditionally_with(
            &self.store.tables,
            &self.store.schema.messages,
            room.as_str(),
            key.as_str(),
            None,
            live_change(room, change),
            write,
        )
        .await
        .map_err(|e| settle(e, "message not found"))?;
        // The entity as applied carries the version it had, not the one it was given.
        let mut message = Message::from_entity(room, &entity)?;
        message.version = given.load(Ordering::Relaxed);
        Ok(message)
    }
}

/// The conditional helper's `apply` for a change to a live message.
fn live_change(
    room: &RoomId,
    mut change: impl FnMut(&mut Message) -> Result<()>,
) -> impl FnMut(Entity) -> Result<Entity> {
    move |entity| {
        let mut message = Message::from_entity(room, &entity)?;
        if !message.is_live() {
            return Err(Error::not_found("message not found"));
        }
        change(&mut message)?;
        Ok(message.to_entity())
    }
}
