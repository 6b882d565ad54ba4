//! Reading messages: one message, several by id, a page in either order, or the page around
//! a message.
//!
//! Newest first is a range read of `Messages` below the cursor. Oldest first reads a page of
//! `MessagesAscending` after the cursor and joins it to `Messages` with ONE range query over
//! the span of message keys the page covers, from the cursor on (a filter of at most three
//! comparisons, where a per-key OR-list would break Azure's 15-comparison limit). The joined
//! rows are put back in index order; an index row without a message (a send in flight, or one
//! whose write failed) is skipped, and the cursor still advances past it, so a client
//! following `hasMore` never spins on it. A message without an index row (its send's index
//! write failed after the commit, or the process stopped between the two) is in that span, or
//! in the last page's, which reads on to the newest message: it is shown in its place and
//! gets its index row back, so no stored message is hidden from oldest-first reads. Deleted messages (tombstones) are skipped the same way. Reactions and poll
//! tallies come from one more range read over the page's companion rows. Every page costs
//! the same at any depth: two or three range reads from the cursor.
//!
//! The page around a message is a point read of it, then a newest-first page below it and an
//! oldest-first page above it, each read as above, so its two cursors are the ordinary cursors
//! of those two reads: following them visits every other message once. Several messages by id
//! cost one point read each (at most [`MAX_BATCH`], a few at a time), as the single get would.

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::{AscendingKey, MessageKey};
use crate::messages::Message;
use crate::messages::cursor::{Cursor, Order};
use crate::messages::reactions::{MAX_ROWS_PER_PAGE, ReactionCount};
use crate::messages::read::{
    AroundPage, DEFAULT_LIMIT, GetMessages, MAX_BATCH, MAX_LIMIT, MessageBatch, MessagePage, ReadMessages,
    keep_around_within_budget, keep_within_budget,
};
use crate::store::companions::{CompanionKind, CompanionRow};
use futures::future::{join_all, try_join_all};
use futures::{StreamExt as _, TryStreamExt as _};
use std::collections::{HashMap, HashSet};

/// Point reads a batch read keeps in flight at once.
const BATCH_READS_IN_FLIGHT: usize = 16;

/// Reading a room: pages of messages, threads, pins, followed threads, the change feed and the
/// moderation log, each decorated for its reader. Holds what it uses: the store, the adapters and
/// settings, and the components it calls.
#[derive(Clone)]
pub struct Reading {
    pub(crate) store: crate::store::Store,
    pub(crate) workspace_id: std::sync::Arc<str>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
}

impl Reading {
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
        self.access.access(room, &who.user_id).await?;
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

    /// The page around message `around` (a missing or deleted one is 404): oldest first, with
    /// a newest-first cursor below it and an oldest-first one above it.
    pub async fn read_around(&self, who: &Principal, room: &RoomId, request: ReadMessages) -> Result<AroundPage> {
        let Some(around) = request.around.as_deref() else {
            return Err(Error::bad_request("around names no message"));
        };
        if request.order.is_some() || request.cursor.as_deref().is_some_and(|c| !c.is_empty()) {
            return Err(Error::bad_request(
                "around takes no order or cursor: read on with olderCursor and newerCursor",
            ));
        }
        let limit = request.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1..={MAX_LIMIT}")));
        }
        self.access.access(room, &who.user_id).await?;
        let target = self.live_message(room, &MessageKey::of_message(around)?).await?;
        let key = target.key();
        let newer_room = (limit - 1) / 2;
        let older_room = limit - 1 - newer_room;
        // A side given no room reads nothing and says more may follow: its cursor tells.
        let (mut older, mut has_older, older_last) = if older_room > 0 {
            self.newest_first(room, Some(key.clone()), older_room).await?
        } else {
            (Vec::new(), true, None)
        };
        let (mut newer, mut has_newer, newer_last) = if newer_room > 0 {
            self.oldest_first(room, Some(key.ticks().ascending_key()), newer_room)
                .await?
        } else {
            (Vec::new(), true, None)
        };
        let (older_cut, newer_cut) = keep_around_within_budget(&mut older, &target, &mut newer);
        // A cut side resumes after its last kept message (or the target); a whole one where
        // its read ended, or at the target when it read nothing.
        let older_cursor = match (older_cut, older_last) {
            (false, Some(last)) => last,
            _ => Cursor::NewestFirst(older.last().unwrap_or(&target).key()),
        };
        let newer_cursor = match (newer_cut, newer_last) {
            (false, Some(last)) => last,
            _ => Cursor::OldestFirst(newer.last().unwrap_or(&target).key().ticks().ascending_key()),
        };
        has_older |= older_cut;
        has_newer |= newer_cut;
        older.reverse();
        let mut messages = older;
        messages.push(target);
        messages.extend(newer);
        self.decorate(room, &who.user_id, &mut messages).await?;
        Ok(AroundPage {
            messages,
            has_older,
            older_cursor: older_cursor.encode(room),
            has_newer,
            newer_cursor: newer_cursor.encode(room),
        })
    }

    /// Several messages by id, each as [`Reading::get_message`] answers it: found, or missing
    /// (unknown, not an id, or deleted). A repeated id is answered once.
    pub async fn get_messages(&self, who: &Principal, room: &RoomId, request: GetMessages) -> Result<MessageBatch> {
        let ids = request.unique_ids()?;
        debug_assert!(ids.len() <= MAX_BATCH);
        self.access.access(room, &who.user_id).await?;
        // Collected first: a stream holding the mapping closure is not `Send` for every lifetime.
        let reads: Vec<_> = ids.into_iter().map(|id| self.live_by_id(room, id.to_owned())).collect();
        let found: Vec<(String, Option<Message>)> = futures::stream::iter(reads)
            .buffered(BATCH_READS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut messages = Vec::with_capacity(found.len());
        let mut missing = Vec::new();
        for (id, message) in found {
            match message {
                Some(message) => messages.push(message),
                None => missing.push(id),
            }
        }
        self.decorate_each(room, &who.user_id, &mut messages).await?;
        Ok(MessageBatch { messages, missing })
    }

    /// The live message `id` names, if any: a batch read's one lookup.
    async fn live_by_id(&self, room: &RoomId, id: String) -> Result<(String, Option<Message>)> {
        let message = match MessageKey::parse(&id) {
            Some(key) => self.find_message(room, &key).await?.filter(Message::is_live),
            None => None,
        };
        Ok((id, message))
    }

    /// One message by id; missing or deleted answers as missing.
    pub async fn get_message(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<Message> {
        self.access.access(room, &who.user_id).await?;
        let mut message = self.live_message(room, id).await?;
        self.decorate(room, &who.user_id, std::slice::from_mut(&mut message))
            .await?;
        Ok(message)
    }

    /// The message `id` names, unless it is missing or deleted (both 404): every operation on
    /// a message starts here.
    pub(crate) async fn live_message(&self, room: &RoomId, id: &MessageKey) -> Result<Message> {
        self.find_message(room, id)
            .await?
            .filter(Message::is_live)
            .ok_or_else(|| Error::not_found("message not found"))
    }

    pub(crate) async fn find_message(&self, room: &RoomId, key: &MessageKey) -> Result<Option<Message>> {
        Ok(self.store.messages.message(room, key).await?)
    }

    async fn newest_first(
        &self,
        room: &RoomId,
        after: Option<MessageKey>,
        limit: usize,
    ) -> Result<(Vec<Message>, bool, Option<Cursor>)> {
        let (rows, more) = self
            .store
            .messages
            .messages_newest_first(room, after.as_ref(), limit)
            .await?;
        // A whole page resumes after its last row, tombstone or not.
        let last_row = rows.last().map(Message::key);
        let mut messages: Vec<Message> = rows.into_iter().filter(Message::is_live).collect();
        let cut = keep_within_budget(&mut messages);
        // A cut page resumes after its last kept message.
        let last = if cut {
            messages.last().map(Message::key)
        } else {
            last_row
        };
        Ok((messages, more || cut, last.map(Cursor::NewestFirst)))
    }

    async fn oldest_first(
        &self,
        room: &RoomId,
        after: Option<AscendingKey>,
        limit: usize,
    ) -> Result<(Vec<Message>, bool, Option<Cursor>)> {
        let (keys, more) = self.store.messages.index_page(room, after.as_ref(), limit).await?;
        // The last page reads on to the newest message: one stored without its index row
        // shows there too.
        let found = self
            .store
            .messages
            .messages_of_page(room, after.as_ref(), &keys, !more)
            .await?;
        // A whole page resumes after its last index row, matched or not, or its last message
        // when that is newer (one without an index row).
        let newest = found.last().map(|m| m.key().ticks().ascending_key());
        let Some(last) = keys.last().cloned().max(newest) else {
            return Ok((Vec::new(), false, None));
        };
        let mut messages: Vec<Message> = found.into_iter().filter(Message::is_live).collect();
        // Messages without index rows can make a page longer than asked.
        let over = messages.len() > limit;
        messages.truncate(limit);
        let cut = keep_within_budget(&mut messages) || over;
        // A cut page resumes after its last kept message.
        let resume = match (cut, messages.last()) {
            (true, Some(kept)) => kept.key().ticks().ascending_key(),
            _ => last,
        };
        Ok((messages, more || cut, Some(Cursor::OldestFirst(resume))))
    }

    /// Makes `messages` what `reader` is shown: reactions and poll tallies filled in (`tally`),
    /// and the source room of a forwarded copy hidden unless the reader is a member of it.
    pub(crate) async fn decorate(&self, room: &RoomId, reader: &UserId, messages: &mut [Message]) -> Result<()> {
        self.tally(room, reader, messages).await?;
        self.hide_foreign_sources(room, reader, messages).await;
        Ok(())
    }

    /// `decorate` for messages scattered over the room: one companion-row read per message.
    pub(crate) async fn decorate_each(&self, room: &RoomId, reader: &UserId, messages: &mut [Message]) -> Result<()> {
        let reads = messages.chunks_mut(1).map(|one| self.tally(room, reader, one));
        try_join_all(reads).await?;
        self.hide_foreign_sources(room, reader, messages).await;
        Ok(())
    }

    /// Hides the source room of every forwarded copy in `messages` (read in `room`) from a
    /// `reader` who is not a member of it: one access check per distinct source room. A check
    /// that fails hides the room too (and is logged): the read still answers, and nothing is
    /// shown that should not be.
    pub(crate) async fn hide_foreign_sources(&self, room: &RoomId, reader: &UserId, messages: &mut [Message]) {
        let mut sources: Vec<&str> = messages
            .iter()
            .filter_map(|m| m.forwarded_from.as_ref()?.room_id.as_deref())
            .filter(|source| *source != room.as_str())
            .collect();
        sources.sort_unstable();
        sources.dedup();
        if sources.is_empty() {
            return;
        }
        let checks = sources.into_iter().map(|source| async move {
            let Ok(source_room) = RoomId::parse(source) else {
                return None;
            };
            match self.access.access(&source_room, reader).await {
                Ok(_) => Some(source.to_owned()),
                Err(Error::NotFound(_)) => None,
                Err(e) => {
                    tracing::warn!(%source_room, error = %e, "could not check a forward's source room; hidden");
                    None
                }
            }
        });
        let visible: HashSet<String> = join_all(checks).await.into_iter().flatten().collect();
        for message in messages {
            let shown = match message.forwarded_from.as_ref().and_then(|s| s.room_id.as_deref()) {
                Some(source) => source == room.as_str() || visible.contains(source),
                None => true,
            };
            if !shown {
                message.hide_source_room();
            }
        }
    }

    /// Fills in reactions, poll tallies, previews and thumbnails for `messages`, as `reader` sees them, from one
    /// range read over the companion rows of the span of keys they cover (a page of adjacent
    /// messages; see `decorate_each` for scattered ones).
    pub(crate) async fn tally(&self, room: &RoomId, reader: &UserId, messages: &mut [Message]) -> Result<()> {
        let (Some(low), Some(high)) = (
            messages.iter().map(|m| m.id.as_str()).min(),
            messages.iter().map(|m| m.id.as_str()).max(),
        ) else {
            return Ok(());
        };
        let rows = self
            .store
            .companions
            .companions(room, low, high, MAX_ROWS_PER_PAGE)
            .await?;
        let mut by_message: HashMap<&str, Vec<&CompanionRow>> = HashMap::new();
        for row in &rows {
            by_message.entry(row.message_id.as_str()).or_default().push(row);
        }
        let me = reader.as_str();
        for message in messages.iter_mut() {
            let Some(rows) = by_message.get(message.id.as_str()) else {
                continue;
            };
            let mut reactions: Vec<ReactionCount> = Vec::new();
            for row in rows {
                let mine = row.user_id.as_deref() == Some(me);
                match &row.kind {
                    CompanionKind::Reaction { emoji } => match reactions.iter_mut().find(|r| &r.emoji == emoji) {
                        Some(r) => {
                            r.count += 1;
                            r.me |= mine;
                        }
                        None => reactions.push(ReactionCount {
                            emoji: emoji.clone(),
                            count: 1,
                            me: mine,
                        }),
                    },
                    CompanionKind::Vote { option_id } => {
                        if let Some(poll) = message.poll.as_mut() {
                            poll.count(option_id, mine);
                        }
                    }
                    CompanionKind::Preview(preview) => message.preview = preview.clone(),
                    CompanionKind::Thumbnail {
                        attachment_id,
                        width,
                        height,
                    } => {
                        if let Some(file) = message.attachments.iter_mut().find(|a| a.id == *attachment_id) {
                            file.image = Some(crate::attachments::ImageInfo {
                                width: *width,
                                height: *height,
                                thumbnail_url: crate::attachments::thumbnail_url(room, attachment_id),
                            });
                        }
                    }
                }
            }
            reactions.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.emoji.cmp(&b.emoji)));
            message.reactions = reactions;
        }
        Ok(())
    }
}
