//! Message rows. A room's `Messages` partition holds its message rows (keyed by reverse tick,
//! all digits, newest first), each message's one change-feed row (`v:<version>`, a copy of the
//! message at its newest version), the idempotency records of its sends and the thread index
//! rows of its replies; `MessagesAscending` holds the key-only index rows of oldest-first reads.
//! Everything a message is, as a row, is decided here.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::activity::{Unread, parse_activity};
use super::error::{Result, reported, settle};
use super::ledger::{Numbered, Unnumbered};
use super::schema::{
    ACTIVITY_ROW, THREAD_PREFIX, command_key, feed_end, feed_key, feed_version, idempotency_key, thread_key,
};
use super::words::WordChange;
use tabletalk_domain::error::Error;
use tabletalk_domain::events::MessageEvent;
use tabletalk_domain::ids::{ClientId, RoomId, UserId};
use tabletalk_domain::keys::{AscendingKey, MESSAGE_KEY_RANGE, MessageKey, Ticks};
use tabletalk_domain::messages::polls::{Poll, PollDefinition};
use tabletalk_domain::messages::threads::ThreadSummary;
use tabletalk_domain::messages::{Message, MessageType};
use tabletalk_domain::trust::Counted;
use tabletalk_tables::conditional::{Attempt, retry_lost_races, update_conditionally_with};
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, UpdateMode, Value};

/// Rows without an index row an oldest-first page reads beyond its index rows' messages.
const UNINDEXED_ROWS: usize = 100;

/// A new message's write that failed.
#[derive(Debug)]
pub struct NotInserted {
    /// True when the store could not tell whether it committed: then it may be readable.
    pub may_be_stored: bool,
    pub error: Error,
}

/// The ascending index row as a send's insert of it left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexRow {
    /// This send wrote it, at this version (the one its release deletes).
    Created(ETag),
    /// It was there already.
    Found,
}

/// How a new message's write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// Stored, with this version.
    Committed(u64),
    /// Not stored: a concurrent send with the same client id stored its message first.
    ClientIdTaken,
    /// Not stored: another send took the message's tick (its message row exists); the send
    /// takes the next tick.
    TickTaken,
    /// Not stored: the room row changed since the copy the send was admitted on; admit it
    /// again on the room as it is.
    RoomChanged,
}

/// The `Messages` row of a message.
pub(super) fn message_row(message: &Message) -> Entity {
    let mut entity = Entity::new(&message.room_id, &message.id)
        .with("type", Value::String(message.kind.as_str().into()))
        .with("userId", Value::String(message.author_id.clone()))
        .with("userName", Value::String(message.author_name.clone()))
        .with("origin", Value::String(message.origin.as_str().into()))
        .with("message", Value::String(message.text.clone()))
        .with("createdAt", Value::datetime(message.created_at))
        .with("version", Value::Int64(message.version as i64));
    let optional = [
        ("clientId", message.client_id.clone().map(Value::String)),
        ("source", message.source.clone().map(Value::String)),
        ("avatarUrl", message.avatar_url.clone().map(Value::String)),
        ("editedAt", message.edited_at.map(Value::datetime)),
        ("deletedAt", message.deleted_at.map(Value::datetime)),
        ("deletedBy", message.deleted_by.clone().map(Value::String)),
        ("moderated", message.moderated.then_some(Value::Bool(true))),
        ("isPinned", message.is_pinned.then_some(Value::Bool(true))),
        ("replyTo", message.reply_to.clone().map(Value::String)),
        ("threadId", message.thread_id.clone().map(Value::String)),
        ("pinnedMessageId", message.pinned_message_id.clone().map(Value::String)),
        ("forwardedFrom", message.forwarded_from.as_ref().map(json_value)),
        (
            "mentions",
            (!message.mentions.is_empty()).then(|| json_value(&message.mentions)),
        ),
        ("poll", message.poll.as_ref().map(|p| json_value(&p.definition()))),
        (
            "attachments",
            (!message.attachments.is_empty()).then(|| json_value(&message.attachments)),
        ),
        ("thread", message.thread.as_ref().map(json_value)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            entity.set(name, value);
        }
    }
    entity
}

/// The change-feed row of a message at its version: a copy of the message row.
fn feed_row(message: &Message) -> Entity {
    let mut entity = message_row(message);
    entity.row_key = feed_key(message.version);
    entity.set("messageId", Value::String(message.id.clone()));
    entity
}

/// Reads a `Messages` row. A row that does not parse is a server fault, never the caller's.
pub fn parse_message(room: &RoomId, entity: &Entity) -> tabletalk_domain::error::Result<Message> {
    parse_row(room, &entity.row_key, entity)
}

/// Reads a change-feed row.
fn parse_feed_row(room: &RoomId, entity: &Entity) -> tabletalk_domain::error::Result<Message> {
    let id = entity
        .str("messageId")
        .ok_or_else(|| Error::Internal(format!("feed row {room}/{} has no message id", entity.row_key)))?;
    parse_row(room, id, entity)
}

fn parse_row(room: &RoomId, id: &str, entity: &Entity) -> tabletalk_domain::error::Result<Message> {
    let broken = |what: &str| Error::Internal(format!("message {room}/{id}: {what}"));
    MessageKey::parse(id).ok_or_else(|| broken("not a message key"))?;
    let string = |name: &str| entity.str(name).map(str::to_owned);
    let kind = entity
        .str("type")
        .and_then(MessageType::parse)
        .ok_or_else(|| broken("unknown type"))?;
    Ok(Message {
        id: id.to_owned(),
        room_id: room.to_string(),
        kind,
        author_id: entity.str("userId").unwrap_or_default().to_owned(),
        author_name: entity.str("userName").unwrap_or_default().to_owned(),
        origin: entity
            .str("origin")
            .and_then(tabletalk_domain::messages::Origin::parse)
            .unwrap_or_else(|| tabletalk_domain::messages::Origin::of_kind(kind)),
        avatar_url: string("avatarUrl"),
        text: entity.str("message").unwrap_or_default().to_owned(),
        source: string("source"),
        created_at: entity.datetime("createdAt").ok_or_else(|| broken("no createdAt"))?,
        version: entity.i64("version").and_then(|v| u64::try_from(v).ok()).unwrap_or(0),
        client_id: string("clientId"),
        edited_at: entity.datetime("editedAt"),
        deleted_at: entity.datetime("deletedAt"),
        deleted_by: string("deletedBy"),
        moderated: entity.bool("moderated").unwrap_or(false),
        is_pinned: entity.bool("isPinned").unwrap_or(false),
        reply_to: string("replyTo"),
        thread_id: string("threadId"),
        pinned_message_id: string("pinnedMessageId"),
        forwarded_from: from_json(entity, "forwardedFrom"),
        mentions: from_json(entity, "mentions").unwrap_or_default(),
        poll: from_json::<PollDefinition>(entity, "poll").map(Poll::from),
        reactions: Vec::new(),
        attachments: from_json(entity, "attachments").unwrap_or_default(),
        thread: from_json(entity, "thread"),
        preview: None,
    })
}

/// A JSON-valued property, if present and well-formed.
pub fn from_json<T: serde::de::DeserializeOwned>(entity: &Entity, name: &str) -> Option<T> {
    entity.str(name).and_then(|text| serde_json::from_str(text).ok())
}

/// A JSON-valued property (lists and objects are stored as JSON strings).
pub fn json_value<T: Serialize>(value: &T) -> Value {
    Value::String(serde_json::to_string(value).unwrap_or_default())
}

/// The conditional helper's `apply` for a change to a live message: a deleted one is 404.
pub(super) fn live_change(
    room: &RoomId,
    mut change: impl FnMut(&mut Message) -> tabletalk_domain::error::Result<()>,
) -> impl FnMut(Entity) -> tabletalk_domain::error::Result<Entity> {
    move |entity| {
        let mut message = parse_message(room, &entity)?;
        if !message.is_live() {
            return Err(Error::not_found("message not found"));
        }
        change(&mut message)?;
        Ok(message_row(&message))
    }
}

/// Messages with their feed, index, thread and idempotency rows. Holds the tables it uses and, as
/// fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct MessageStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    pub(crate) ledger: crate::ledger::LedgerStore,
    pub(crate) outgoing: crate::outgoing::OutgoingStore,
    pub(crate) outbox: crate::outbox::OutboxStore,
    pub(crate) words: crate::words::WordStore,
    pub(crate) tally: crate::tally::TallyStore,
    /// Whether changes write word index rows (`Store::without_word_index`).
    pub(crate) index_words: bool,
}

impl MessageStore {
    /// The message `key` names, tombstone or not.
    pub async fn message(&self, room: &RoomId, key: &MessageKey) -> Result<Option<Message>> {
        Ok(self
            .tables
            .get(&self.schema.messages, room.as_str(), key.as_str())
            .await?
            .map(|e| parse_message(room, &e))
            .transpose()?)
    }

    /// Up to `limit` messages newest first, after `after` (tombstones included), and whether
    /// more follow.
    pub async fn messages_newest_first(
        &self,
        room: &RoomId,
        after: Option<&MessageKey>,
        limit: usize,
    ) -> Result<(Vec<Message>, bool)> {
        let (low, high) = MESSAGE_KEY_RANGE;
        let from = match after {
            Some(key) => Bound::Excluded(key.as_str().to_owned()),
            None => Bound::Included(low.to_owned()),
        };
        let query = RangeQuery::partition(room.as_str(), limit + 1)
            .from(from)
            .to(Bound::Excluded(high.to_owned()));
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        let messages = rows
            .iter()
            .map(|row| parse_message(room, row))
            .collect::<tabletalk_domain::error::Result<_>>()?;
        Ok((messages, more))
    }

    /// The room's newest message's preview and up to `max` messages newer than `position`
    /// (rows that cannot be read are left out: a count shows what it can), in ONE range read.
    pub async fn unread_since(&self, room: &RoomId, position: &MessageKey, max: usize) -> Result<Unread> {
        let query = RangeQuery::partition(room.as_str(), max + 2)
            .from(Bound::Included(ACTIVITY_ROW.to_owned()))
            .to(Bound::Excluded(position.as_str().to_owned()));
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, max + 1).await?;
        let last = rows.first().and_then(parse_activity);
        let mut messages: Vec<Message> = rows
            .iter()
            .filter(|row| row.row_key.as_str() >= MESSAGE_KEY_RANGE.0)
            .filter_map(|row| parse_message(room, row).ok())
            .collect();
        let capped = more || messages.len() > max;
        messages.truncate(max);
        Ok(Unread { last, messages, capped })
    }

    /// Up to `limit` keys of the ascending index after `after`, oldest first, and whether more
    /// follow.
    pub async fn index_page(
        &self,
        room: &RoomId,
        after: Option<&AscendingKey>,
        limit: usize,
    ) -> Result<(Vec<AscendingKey>, bool)> {
        let from = after.map_or(Bound::Unbounded, |key| Bound::Excluded(key.as_str().to_owned()));
        let query = RangeQuery::partition(room.as_str(), limit + 1).from(from);
        let (index, more) = self.tables.query_up_to(&self.schema.ascending, &query, limit).await?;
        let keys = index
            .iter()
            .filter_map(|row| AscendingKey::parse(&row.row_key))
            .collect();
        Ok((keys, more))
    }

    /// The messages of an oldest-first page, oldest first, in ONE range read over the span of
    /// message keys from just after `after` to the page's last index key `keys` (ascending
    /// keys, oldest first) — on the last page (`to_end`), to the newest message — a filter of
    /// at most three comparisons, where a per-key OR-list would break Azure's 15-comparison
    /// limit. A message in the span without an index row (a send whose index write failed
    /// after its transaction committed, or a process that stopped between the two) is read
    /// too, so no stored message is hidden from oldest-first reads, and it gets its index row
    /// back. A read cut short of the whole span is missing the span's oldest rows, so then only
    /// the indexed messages are taken, as the index orders them.
    pub async fn messages_of_page(
        &self,
        room: &RoomId,
        after: Option<&AscendingKey>,
        keys: &[AscendingKey],
        to_end: bool,
    ) -> Result<Vec<Message>> {
        let (low, high) = MESSAGE_KEY_RANGE;
        let newest = match (keys.last(), to_end) {
            (Some(last), false) => Bound::Included(last.ticks().message_key().as_str().to_owned()),
            (None, false) => return Ok(Vec::new()),
            (_, true) => Bound::Included(low.to_owned()),
        };
        let oldest = match after {
            Some(after) => Bound::Excluded(after.ticks().message_key().as_str().to_owned()),
            None => Bound::Excluded(high.to_owned()),
        };
        let most = keys.len() + UNINDEXED_ROWS;
        let span = RangeQuery::partition(room.as_str(), most.min(1000))
            .from(newest)
            .to(oldest);
        let (rows, cut) = self.tables.query_up_to(&self.schema.messages, &span, most).await?;
        let indexed: std::collections::HashSet<String> = keys
            .iter()
            .map(|k| k.ticks().message_key().as_str().to_owned())
            .collect();
        let mut messages = Vec::with_capacity(rows.len());
        let mut unindexed = Vec::new();
        // Newest first, as stored: reversed below.
        for row in rows.iter().rev() {
            match indexed.contains(&row.row_key) {
                true => messages.push(parse_message(room, row)?),
                false if !cut => {
                    let message = parse_message(room, row)?;
                    unindexed.push(message.key().ticks());
                    messages.push(message);
                }
                false => {}
            }
        }
        let restored = unindexed.iter().map(|ticks| self.ensure_index_row(room, *ticks));
        for written in futures::future::join_all(restored).await {
            if let Err(e) = written {
                tracing::warn!(%room, error = %e, "could not write back a stored message's index row");
            }
        }
        Ok(messages)
    }

    /// Up to `limit` replies of the thread rooted at `root`, after `after`, as ascending keys
    /// oldest first, and whether more follow.
    pub async fn thread_page(
        &self,
        room: &RoomId,
        root: &str,
        after: Option<&AscendingKey>,
        limit: usize,
    ) -> Result<(Vec<AscendingKey>, bool)> {
        let prefix = format!("{THREAD_PREFIX}{root}:");
        let mut query = RangeQuery::prefix(room.as_str(), &prefix, limit + 1);
        if let Some(after) = after {
            query = query.from(Bound::Excluded(thread_key(root, after)));
        }
        let (rows, has_more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        let keys = rows
            .iter()
            .filter_map(|row| AscendingKey::parse(row.row_key.strip_prefix(&prefix)?))
            .collect();
        Ok((keys, has_more))
    }

    /// Up to `limit` change-feed entries after version `from`, oldest first, each a message at
    /// its newest version, and whether more follow.
    pub async fn feed_after(&self, room: &RoomId, from: u64, limit: usize) -> Result<(Vec<(u64, Message)>, bool)> {
        let query = RangeQuery::partition(room.as_str(), limit + 1)
            .from(Bound::Excluded(feed_key(from)))
            .to(Bound::Excluded(feed_end()));
        let (rows, has_more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        let mut changes = Vec::with_capacity(rows.len());
        for row in &rows {
            let version = feed_version(&row.row_key).unwrap_or(from);
            changes.push((version, parse_feed_row(room, row)?));
        }
        Ok((changes, has_more))
    }

    /// The message an earlier send of `user` with `client_id` stored, if any.
    pub async fn sent_with_client_id(
        &self,
        room: &RoomId,
        user: &UserId,
        client_id: &ClientId,
    ) -> Result<Option<Message>> {
        match self.client_id_record(room, user, client_id).await? {
            Some(id) => self.message(room, &id).await,
            None => Ok(None),
        }
    }

    /// The message key an earlier send of `user` with `client_id` recorded, if any: one point
    /// read, which a send issues together with its membership reads.
    pub async fn client_id_record(
        &self,
        room: &RoomId,
        user: &UserId,
        client_id: &ClientId,
    ) -> Result<Option<MessageKey>> {
        let key = idempotency_key(user, client_id);
        let Some(record) = self.tables.get(&self.schema.messages, room.as_str(), &key).await? else {
            return Ok(None);
        };
        let id = record
            .str("messageId")
            .and_then(MessageKey::parse)
            .ok_or_else(|| Error::Internal(format!("idempotency record {room}/{key} is broken")))?;
        Ok(Some(id))
    }

    /// Records that `user` runs a command with `client_id` in `room`: `false` when one ran
    /// with it already. Expires as a send's record does.
    pub async fn claim_command(
        &self,
        room: &RoomId,
        user: &UserId,
        client_id: &ClientId,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool> {
        let record = Entity::new(room.as_str(), command_key(user, client_id)).with("createdAt", Value::datetime(now));
        match self.tables.insert(&self.schema.messages, &record).await {
            Ok(_) => Ok(true),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Forgets a command's run record: the command was refused, so the id may run it again.
    pub async fn release_command(&self, room: &RoomId, user: &UserId, client_id: &ClientId) -> Result<()> {
        let key = command_key(user, client_id);
        crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), &key).await
    }

    /// Inserts the ascending index row of `ticks`, written together with its message's
    /// transaction: [`IndexRow::Created`] when this call created it, [`IndexRow::Found`] when
    /// the row was there already (another send's at the same tick, or an orphan). The row is key-only, so
    /// whoever wrote it, it serves the message at its tick; the message row's own insert is
    /// what tells a taken tick ([`Inserted::TickTaken`]).
    pub async fn insert_index_row(&self, room: &RoomId, ticks: Ticks) -> Result<IndexRow> {
        let row = Entity::new(room.as_str(), ticks.ascending_key().as_str());
        match self.tables.insert(&self.schema.ascending, &row).await {
            Ok(etag) => Ok(IndexRow::Created(etag)),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(IndexRow::Found),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the index row of a stored message whatever is there (it is key-only, so this
    /// never overwrites anything that matters): for a message whose own insert of the row
    /// failed, or found it already there — where a failed send at the same tick may be
    /// releasing it, whose conditional delete this write then makes miss.
    pub async fn ensure_index_row(&self, room: &RoomId, ticks: Ticks) -> Result<()> {
        let row = Entity::new(room.as_str(), ticks.ascending_key().as_str());
        self.tables
            .upsert(&self.schema.ascending, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Compensation for a failed message write: deletes the index row this send created, on
    /// the version it created, so a row another send at the same tick re-wrote for its stored
    /// message stays (a row this send found is left alone). A failure here is logged: the
    /// orphan index row is harmless, since ascending reads skip rows without a message.
    pub async fn release_index_row(&self, room: &RoomId, ticks: Ticks, row: IndexRow) {
        let IndexRow::Created(etag) = row else {
            return;
        };
        let key = ticks.ascending_key();
        match self
            .tables
            .delete(
                &self.schema.ascending,
                room.as_str(),
                key.as_str(),
                &IfMatch::Etag(etag),
            )
            .await
        {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => {}
            Err(e) => {
                tracing::warn!(%room, key = key.as_str(), error = %e, "could not delete the index row of a failed send")
            }
        }
    }

    /// Writes a new message with the room's next version, in one transaction with its feed
    /// row, and its idempotency record (`client`), thread index row and outbox event if it has
    /// them, and the outgoing webhooks' event row when the room has endpoints (as the counter
    /// the transaction moves says). A send admitted on a cached room row commits only under
    /// the room stamp it was admitted under (`admitted_under`), else it is answered
    /// [`Inserted::RoomChanged`]. A reply makes `follower` (its sender) follow its thread and updates its root's thread summary in that transaction, conditional on
    /// the root as read: a lost race (another reply, an edit, a pin) re-reads the root and
    /// commits again, which is safe because nothing of the failed transaction landed. A
    /// `counted` send moves its sender's tally in that transaction too (`store::tally`), on the
    /// version admission read, and likewise reads it again after a lost race.
    pub async fn insert_message(
        &self,
        room: &RoomId,
        message: &Message,
        client: Option<(&UserId, &ClientId)>,
        event: Option<&MessageEvent>,
        follower: Option<&UserId>,
        admitted_under: Option<u64>,
        counted: Option<&Counted>,
    ) -> Result<Inserted, NotInserted> {
        let not_inserted = |error: Error| NotInserted {
            may_be_stored: false,
            error,
        };
        let mut extra = Vec::new();
        // The idempotency record comes right after the message and its feed row: a failure
        // there (and only there) is a concurrent send of the same client id.
        let record_at = client.map(|_| 2);
        if let Some((user, client_id)) = client {
            let record = Entity::new(room.as_str(), idempotency_key(user, client_id))
                .with("messageId", Value::String(message.id.clone()))
                .with("createdAt", Value::datetime(message.created_at));
            extra.push(BatchOp::Insert(record));
        }
        if let Some(root) = &message.thread_id {
            let key = thread_key(root, &message.key().ticks().ascending_key());
            let row = Entity::new(room.as_str(), key).with("messageId", Value::String(message.id.clone()));
            extra.push(BatchOp::Insert(row));
            // A replier follows the thread from their reply on.
            if let Some(follower) = follower {
                extra.push(super::follows::follow_op(room, root, follower));
            }
        }
        if let Some(event) = event {
            let row = super::outbox::event_row(room, event).map_err(|error| not_inserted(error.into()))?;
            extra.push(BatchOp::Insert(row));
        }
        // The room's outgoing webhooks get the event through a row committed with the message.
        let hook_event = tabletalk_domain::outgoing::HookEvent::of_change(message, true);
        let words = self.word_change(room, message, &Default::default());
        if words.job.is_some() {
            self.outbox.mark_outbox(room).await.map_err(|e| NotInserted {
                may_be_stored: false,
                error: e.into(),
            })?;
        }
        let (extra, words) = (&extra, &words);
        // The sender's tally as admission read it for the first attempt; read afresh after a
        // concurrent send of theirs counted first.
        let first_attempt = std::sync::atomic::AtomicBool::new(true);
        let first_attempt = &first_attempt;
        let attempt = move || async move {
            let mut extra = extra.clone();
            let count_at = match counted {
                Some(counted) => {
                    let read = match first_attempt.swap(false, std::sync::atomic::Ordering::Relaxed) {
                        true => counted.read.clone(),
                        false => match self.tally.read(room, &counted.user).await {
                            Ok(read) => read,
                            Err(e) => return Err(not_inserted(e.into())),
                        },
                    };
                    extra.push(super::tally::count_op(room, &counted.user, &read, message.created_at));
                    Some(2 + extra.len() - 1)
                }
                None => None,
            };
            // The root's summary goes last, so its index names it.
            let root_at = match &message.thread_id {
                Some(root) => match self.root_summary_op(room, root, message).await {
                    Ok(Some(op)) => {
                        extra.push(op);
                        Some(2 + extra.len() - 1)
                    }
                    Ok(None) => None,
                    Err(e) => return Err(not_inserted(e.into())),
                },
                None => None,
            };
            let draft = message.clone();
            let word_ops: Vec<BatchOp> = words.ops().collect();
            let build = move |numbered: Numbered| {
                let mut message = draft.clone();
                message.version = numbered.version;
                let mut ops = vec![
                    BatchOp::Insert(message_row(&message)),
                    BatchOp::Insert(feed_row(&message)),
                ];
                ops.extend(extra.iter().cloned());
                // Last, so the indexes of the rows above stay as they are.
                if numbered.hooked
                    && let Some(event) = hook_event
                {
                    ops.push(BatchOp::Insert(super::outgoing::hook_event_row(&message, event)));
                }
                ops.extend(word_ops.iter().cloned());
                ops
            };
            let activity = super::activity::activity_change(room, message, true);
            let committed = self
                .ledger
                .commit_admitted(room, Box::new(build), Some(activity), admitted_under)
                .await;
            let committed = match committed {
                Ok(committed) => Ok(committed),
                Err(Unnumbered::RoomChanged) => return Ok(Attempt::Done(Inserted::RoomChanged)),
                Err(Unnumbered::Store(e)) => Err(e),
            };
            match committed {
                Ok(committed) => {
                    if committed.hooked && hook_event.is_some() {
                        self.outgoing.nudge(room);
                    }
                    if words.job.is_some() {
                        self.complete_words(room, &message.id).await;
                    }
                    Ok(Attempt::Done(Inserted::Committed(committed.version)))
                }
                Err(e) if e.is(ErrorKind::AlreadyExists) && record_at.is_some() && e.batch_index == record_at => {
                    Ok(Attempt::Done(Inserted::ClientIdTaken))
                }
                // The message row (operation 0) exists: another send took this tick.
                Err(e) if e.is(ErrorKind::AlreadyExists) && e.batch_index == Some(0) => {
                    Ok(Attempt::Done(Inserted::TickTaken))
                }
                // A concurrent send of the same member counted first: count again.
                Err(e)
                    if count_at.is_some()
                        && e.batch_index == count_at
                        && [
                            ErrorKind::PreconditionFailed,
                            ErrorKind::NotFound,
                            ErrorKind::AlreadyExists,
                        ]
                        .into_iter()
                        .any(|kind| e.is(kind)) =>
                {
                    Ok(Attempt::LostRace)
                }
                // The root changed since it was read: read it again.
                Err(e)
                    if root_at.is_some()
                        && e.batch_index == root_at
                        && (e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound)) =>
                {
                    Ok(Attempt::LostRace)
                }
                Err(e) => Err(NotInserted {
                    may_be_stored: e.is(ErrorKind::Indeterminate),
                    error: reported(e),
                }),
            }
        };
        // Replies to one root commit one per attempt (each changes the root), and so do one
        // member's counted sends (each changes their tally), so the helper's bound is the burst
        // a thread, or a member, absorbs before a send is answered 409.
        let busy = match message.thread_id {
            Some(_) => "the thread is busy; send the reply again",
            None => "too many of your messages at once; send it again",
        };
        retry_lost_races(attempt)
            .await?
            .ok_or_else(|| not_inserted(Error::Conflict(busy.into())))
    }

    /// What committing `message` does to the word index (with the index off, only removals).
    fn word_change(&self, room: &RoomId, message: &Message, old: &std::collections::BTreeSet<String>) -> WordChange {
        self.words.change(room, message, old, self.index_words)
    }

    /// Does what a committed change left to its word index job; a failure leaves the job to
    /// the outbox timer.
    async fn complete_words(&self, room: &RoomId, id: &str) {
        if let Err(e) = self.finish_words(room, id).await {
            tracing::warn!(%room, message = id, error = %e, "a message's word index job waits for the timer");
        }
    }

    /// Does the word index jobs of message `id` from the message as it is now (nothing when
    /// they are done already): right after its commit, or the outbox timer's after a crash.
    pub async fn finish_words(&self, room: &RoomId, id: &str) -> Result<()> {
        let key = MessageKey::of_message(id)?;
        for job in self.words.jobs(room, id).await? {
            let held = self.words.held_rows(room, &key, &job).await?;
            let message = match job.rest && self.index_words && self.words.writes_rest() {
                true => self.write_rest(room, &key).await?,
                false => self.message(room, &key).await?,
            };
            let kept = match (&message, self.index_words) {
                (Some(message), true) => super::words::indexed_buckets(message),
                _ => Default::default(),
            };
            self.words.finish(room, job, held, &kept).await?;
        }
        Ok(())
    }

    /// Writes every index row of the message at `key`, each batch conditional on the message
    /// row as read, so none lands after a change of the message: an edit or delete committed
    /// meanwhile writes its own rows and removes those of the text it replaced, which
    /// includes every row written here before it. A change of the row that leaves its text
    /// (a thread's summary, a pin) is read again and the writing goes on. The message as it
    /// stood when the rows were done (none when it is gone).
    async fn write_rest(&self, room: &RoomId, key: &MessageKey) -> Result<Option<Message>> {
        const ATTEMPTS: usize = 8;
        let read = || async {
            let row = self
                .tables
                .get(&self.schema.messages, room.as_str(), key.as_str())
                .await?;
            row.map(|row| {
                let etag = row
                    .etag
                    .clone()
                    .ok_or_else(|| Error::Internal("a message row without an ETag".into()))?;
                Ok::<_, super::error::Error>((parse_message(room, &row)?, etag))
            })
            .transpose()
        };
        let Some((message, mut etag)) = read().await? else {
            return Ok(None);
        };
        let mut batches = super::words::row_batches(room, &message).into_iter();
        let mut batch = batches.next();
        let mut attempts = 0;
        while let Some(rows) = &batch {
            let mut ops = rows.clone();
            ops.push(BatchOp::Update {
                entity: Entity::new(room.as_str(), key.as_str()),
                mode: UpdateMode::Merge,
                if_match: IfMatch::Etag(etag.clone()),
            });
            match self.tables.transact(&self.schema.messages, room.as_str(), &ops).await {
                Ok(etags) => {
                    etag = etags
                        .last()
                        .cloned()
                        .flatten()
                        .ok_or_else(|| Error::Internal("a merge answered without an ETag".into()))?;
                    batch = batches.next();
                }
                Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => {
                    attempts += 1;
                    let Some((now, current)) = read().await? else {
                        return Ok(None);
                    };
                    if now.version != message.version {
                        return Ok(Some(now));
                    }
                    if attempts == ATTEMPTS {
                        return Err(Error::Conflict(
                            "the message keeps changing; its index waits for the timer".into(),
                        )
                        .into());
                    }
                    etag = current;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(message))
    }

    /// The update of `root`'s thread summary for `reply`, conditional on the root as it is now;
    /// none when the root row is gone (purged).
    async fn root_summary_op(&self, room: &RoomId, root: &str, reply: &Message) -> Result<Option<BatchOp>> {
        let Some(row) = self.tables.get(&self.schema.messages, room.as_str(), root).await? else {
            return Ok(None);
        };
        let Some(etag) = row.etag.clone() else {
            return Err(Error::Internal("a message row without an ETag".into()).into());
        };
        let summary = from_json::<ThreadSummary>(&row, "thread")
            .unwrap_or_default()
            .with_reply(&reply.author_id, reply.created_at);
        let entity = Entity::new(room.as_str(), root).with("thread", json_value(&summary));
        Ok(Some(BatchOp::Update {
            entity,
            mode: UpdateMode::Merge,
            if_match: IfMatch::Etag(etag),
        }))
    }

    /// Rewrites a live message row with the conditional-write helper, for a change the feed
    /// carries (text edits, deletes): `change` runs on the message as it is now (again after
    /// every lost race), a message deleted meanwhile is 404, and the row
    /// is written with the room's next version, its old feed row replaced by one at the new
    /// version, all in the counter's transaction.
    pub async fn rewrite_message_versioned(
        &self,
        room: &RoomId,
        key: &MessageKey,
        mut change: impl FnMut(&mut Message) -> tabletalk_domain::error::Result<()>,
    ) -> Result<Message> {
        let given = Arc::new(AtomicU64::new(0));
        // The buckets the message had before the change (as last read: the helper applies the
        // change again after a lost race), whose rows the change empties if it drops them.
        let before = std::sync::Mutex::new(std::collections::BTreeSet::new());
        let change = |message: &mut Message| {
            *before.lock().expect("not poisoned") = super::words::indexed_buckets(message);
            change(message)
        };
        let write = |next: Entity, seen: ETag| {
            let given = given.clone();
            let before = before.lock().expect("not poisoned").clone();
            async move {
                let current = parse_message(room, &next).map_err(|e| StoreError::internal(e.to_string()))?;
                let words = self.word_change(room, &current, &before);
                if words.job.is_some() {
                    self.outbox
                        .mark_outbox(room)
                        .await
                        .map_err(|e| StoreError::internal(e.to_string()))?;
                }
                let has_job = words.job.is_some();
                let id = current.id.clone();
                // The room list's preview follows an edit or a delete of the message it shows.
                let activity = super::activity::activity_change(room, &current, false);
                let build = move |numbered: Numbered| {
                    let (version, hooked) = (numbered.version, numbered.hooked);
                    let mut message = current.clone();
                    let old = message.version;
                    message.version = version;
                    let mut ops = vec![BatchOp::Update {
                        entity: message_row(&message),
                        mode: UpdateMode::Replace,
                        if_match: IfMatch::Etag(seen.clone()),
                    }];
                    // A version at or below the message's own comes from a stale copy of the
                    // counter: the transaction fails on the counter and is renumbered, but it
                    // must still be well-formed (one operation per row).
                    if old > 0 && old < version {
                        ops.push(BatchOp::Delete {
                            partition_key: current.room_id.clone(),
                            row_key: feed_key(old),
                            if_match: IfMatch::Any,
                        });
                    }
                    ops.push(BatchOp::Insert(feed_row(&message)));
                    // The room's outgoing webhooks get the edit or delete through a row
                    // committed with it.
                    if hooked && let Some(event) = tabletalk_domain::outgoing::HookEvent::of_change(&message, false) {
                        ops.push(BatchOp::Insert(super::outgoing::hook_event_row(&message, event)));
                    }
                    ops.extend(words.ops());
                    ops
                };
                let committed = self.ledger.commit_change(room, Box::new(build), Some(activity)).await?;
                given.store(committed.version, Ordering::Relaxed);
                if committed.hooked {
                    self.outgoing.nudge(room);
                }
                if has_job {
                    self.complete_words(room, &id).await;
                }
                match committed.etags[0].clone() {
                    Some(etag) => Ok(etag),
                    // A commit confirmed after an ambiguous answer tells no ETags: the row does.
                    // The change is stored, so a failure to read it must not be taken for a
                    // lost race (the helper would apply it again).
                    None => {
                        let unknown = |why: String| StoreError::new(ErrorKind::Indeterminate, why);
                        let row = self
                            .tables
                            .get(&self.schema.messages, room.as_str(), key.as_str())
                            .await
                            .map_err(|e| unknown(format!("the edited message could not be read back: {e}")))?;
                        row.and_then(|row| row.etag)
                            .ok_or_else(|| unknown("the edited message is gone".into()))
                    }
                }
            }
        };
        let entity = update_conditionally_with(
            &self.tables,
            &self.schema.messages,
            room.as_str(),
            key.as_str(),
            None,
            live_change(room, change),
            write,
        )
        .await
        .map_err(|e| settle(e, "message not found"))?;
        // The entity as applied carries the version it had, not the one it was given.
        let mut message = parse_message(room, &entity)?;
        message.version = given.load(Ordering::Relaxed);
        Ok(message)
    }
}
