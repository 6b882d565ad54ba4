//! Reading messages: one message, or a page in either order.
//!
//! Newest first is a range read of `Messages` below the cursor. Oldest first reads a page of
//! `MessagesAscending` after the cursor and joins it to `Messages` with ONE range query over
//! the span of message keys the page covers (a filter of at most three comparisons, where a
//! per-key OR-list would break Azure's 15-comparison limit). The joined rows are put back in
//! index order; an index row without a message (a send in flight, or one whose write failed)
//! is skipped, and the cursor still advances past it, so a client following `hasMore` never
//! spins on it. Deleted messages (tombstones) are skipped the same way. Reactions and poll
//! tallies come from one more range read over the page's companion rows. Every page costs
//! the same at any depth: two or three range reads from the cursor.

use std::collections::HashMap;
use std::ops::Bound;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Message;
use super::cursor::{Cursor, Order};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::{AscendingKey, MESSAGE_KEY_RANGE, MessageKey};
use crate::service::Chat;
use crate::storage::{Entity, RangeQuery};

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 100;
/// Serialized messages one page may carry; a page stops early (with `hasMore`) past this.
pub const PAGE_BYTE_BUDGET: usize = 1024 * 1024;

/// Query parameters of a page read.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadMessages {
    /// `desc` (newest first, the default) or `asc` (oldest first).
    #[param(inline)]
    pub order: Option<Order>,
    /// Messages per page, 1..=100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
    /// The `nextCursor` of the previous page in the same order.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    /// In the order asked for.
    pub messages: Vec<Message>,
    /// True when more messages follow `nextCursor`: ask again with it.
    pub has_more: bool,
    /// Resume here; the incoming cursor (or null) when the page covered nothing.
    pub next_cursor: Option<String>,
}

impl Chat {
    pub async fn read_messages(&self, who: &Principal, room: &RoomId, request: ReadMessages) -> Result<MessagePage> {
        let order = request.order.unwrap_or(Order::NewestFirst);
        let limit = request.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1..={MAX_LIMIT}")));
        }
        let cursor = request
            .cursor
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(|c| Cursor::decode(c, room, order))
            .transpose()?;
        self.access(room, &who.user_id).await?;
        let (mut messages, has_more, last) = match (order, cursor) {
            (_, Some(Cursor::NewestFirst(key))) => self.newest_first(room, Some(key), limit).await?,
            (_, Some(Cursor::OldestFirst(key))) => self.oldest_first(room, Some(key), limit).await?,
            (Order::NewestFirst, None) => self.newest_first(room, None, limit).await?,
            (Order::OldestFirst, None) => self.oldest_first(room, None, limit).await?,
        };
        let next_cursor = last
            .map(|c| c.encode(room))
            .or(request.cursor.filter(|c| !c.is_empty()));
        self.decorate(room, &who.user_id, &mut messages).await?;
        Ok(MessagePage {
            messages,
            has_more,
            next_cursor,
        })
    }

    /// One message by id; missing or deleted answers as missing.
    pub async fn get_message(&self, who: &Principal, room: &RoomId, id: &str) -> Result<Message> {
        self.access(room, &who.user_id).await?;
        let mut message = self.live_message(room, id).await?;
        self.decorate(room, &who.user_id, std::slice::from_mut(&mut message))
            .await?;
        Ok(message)
    }

    /// The message `id` names, unless it is missing or deleted (both 404): every operation on
    /// a message starts here.
    pub(crate) async fn live_message(&self, room: &RoomId, id: &str) -> Result<Message> {
        let missing = || Error::not_found("message not found");
        let key = MessageKey::parse(id).ok_or_else(missing)?;
        self.find_message(room, &key)
            .await?
            .filter(Message::is_live)
            .ok_or_else(missing)
    }

    pub(crate) async fn find_message(&self, room: &RoomId, key: &MessageKey) -> Result<Option<Message>> {
        self.store
            .tables
            .get(&self.store.schema.messages, room.as_str(), key.as_str())
            .await?
            .map(|e| Message::from_entity(room, &e))
            .transpose()
    }

    async fn newest_first(
        &self,
        room: &RoomId,
        after: Option<MessageKey>,
        limit: usize,
    ) -> Result<(Vec<Message>, bool, Option<Cursor>)> {
        let (low, high) = MESSAGE_KEY_RANGE;
        let from = match after {
            Some(key) => Bound::Excluded(key.as_str().to_owned()),
            None => Bound::Included(low.to_owned()),
        };
        let query = RangeQuery::partition(room.as_str(), limit + 1)
            .from(from)
            .to(Bound::Excluded(high.to_owned()));
        let (rows, more) = self
            .store
            .tables
            .query_up_to(&self.store.schema.messages, &query, limit)
            .await?;
        let mut messages = Vec::with_capacity(rows.len());
        for row in &rows {
            let message = Message::from_entity(room, row)?;
            if message.is_live() {
                messages.push(message);
            }
        }
        let cut = keep_within_budget(&mut messages);
        // A cut page resumes after its last kept message; a whole one after its last row,
        // tombstone or not.
        let last = if cut {
            messages.last().map(Message::key)
        } else {
            rows.last().and_then(|row| MessageKey::parse(&row.row_key))
        };
        Ok((messages, more || cut, last.map(Cursor::NewestFirst)))
    }

    async fn oldest_first(
        &self,
        room: &RoomId,
        after: Option<AscendingKey>,
        limit: usize,
    ) -> Result<(Vec<Message>, bool, Option<Cursor>)> {
        let from = after.map_or(Bound::Unbounded, |key| Bound::Excluded(key.as_str().to_owned()));
        let query = RangeQuery::partition(room.as_str(), limit + 1).from(from);
        let (index, more) = self
            .store
            .tables
            .query_up_to(&self.store.schema.ascending, &query, limit)
            .await?;
        let keys: Vec<AscendingKey> = index
            .iter()
            .filter_map(|row| AscendingKey::parse(&row.row_key))
            .collect();
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok((Vec::new(), false, None));
        };

        // The page's message keys span [reverse(last), reverse(first)]; one range read finds them.
        let span = RangeQuery::partition(room.as_str(), keys.len().min(1000))
            .from(Bound::Included(last.ticks().message_key().as_str().to_owned()))
            .to(Bound::Included(first.ticks().message_key().as_str().to_owned()));
        let (rows, _) = self
            .store
            .tables
            .query_up_to(&self.store.schema.messages, &span, keys.len() + MAX_LIMIT)
            .await?;
        let mut by_key: HashMap<String, Entity> = rows.into_iter().map(|e| (e.row_key.clone(), e)).collect();

        let mut messages = Vec::with_capacity(keys.len());
        let mut matched = Vec::with_capacity(keys.len());
        for key in &keys {
            if let Some(entity) = by_key.remove(key.ticks().message_key().as_str()) {
                let message = Message::from_entity(room, &entity)?;
                if message.is_live() {
                    messages.push(message);
                    matched.push(key);
                }
            }
        }
        let cut = keep_within_budget(&mut messages);
        // A cut page resumes after its last kept message; a whole one after its last index
        // row, matched or not.
        let resume = if cut { matched[messages.len() - 1] } else { last };
        Ok((messages, more || cut, Some(Cursor::OldestFirst(resume.clone()))))
    }
}

/// Cuts `messages` to its longest prefix within [`PAGE_BYTE_BUDGET`] (never below one
/// message); true when something was cut.
fn keep_within_budget(messages: &mut Vec<Message>) -> bool {
    let mut bytes = 0;
    for (index, message) in messages.iter().enumerate() {
        bytes += serde_json::to_vec(message).map(|v| v.len()).unwrap_or(0);
        if bytes > PAGE_BYTE_BUDGET && index > 0 {
            messages.truncate(index);
            return true;
        }
    }
    false
}
