//! Pin index rows. A pinned message has a row `pin:<message key>` in its room's `Messages`
//! partition, written and deleted in the one transaction that sets and clears the message's
//! `isPinned`, so the room's pins are one range read (newest message first) that never
//! disagrees with the flags. A tombstone or a purge takes the row away after the message
//! (a crash between the two leaves a row whose message is gone, which the pins read skips and
//! removes).

use std::ops::Bound;

use super::error::{Result, settle};
use super::messages::{live_change, parse_message};
use super::schema::{PIN_PREFIX, pin_key};
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::messages::Message;
use tabletalk_tables::conditional::update_conditionally_with;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, StoreError, UpdateMode, Value};

/// The pin index. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct PinStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl PinStore {
    /// Sets a live message's pin flag to `pinned`, with its pin row, through the
    /// conditional-write helper (a concurrent edit and pin both land; a message deleted
    /// meanwhile is 404). Answers the message and whether its flag changed. Pinning writes
    /// the row even when the flag was set already, so a message pinned before pin rows
    /// existed joins the list when pinned again.
    pub async fn set_pinned(&self, room: &RoomId, key: &MessageKey, pinned: bool) -> Result<(Message, bool)> {
        let mut changed = false;
        let write = |next: Entity, seen: ETag| async move {
            let message = BatchOp::Update {
                entity: next.clone(),
                mode: UpdateMode::Replace,
                if_match: IfMatch::Etag(seen.clone()),
            };
            let index = if pinned {
                BatchOp::Upsert {
                    entity: Entity::new(room.as_str(), pin_key(key))
                        .with("messageId", Value::String(key.as_str().into())),
                    mode: UpdateMode::Replace,
                }
            } else {
                BatchOp::Delete {
                    partition_key: room.to_string(),
                    row_key: pin_key(key),
                    if_match: IfMatch::Any,
                }
            };
            match self
                .tables
                .transact(&self.schema.messages, room.as_str(), &[message, index])
                .await
            {
                Ok(etags) => etags
                    .first()
                    .cloned()
                    .flatten()
                    .ok_or_else(|| StoreError::internal("a pin's transaction answered no ETag")),
                // An unpin of a message pinned before pin rows existed: no row to delete.
                Err(e) if !pinned && e.batch_index == Some(1) && e.is(ErrorKind::NotFound) => {
                    self.tables
                        .update(&self.schema.messages, &next, UpdateMode::Replace, &IfMatch::Etag(seen))
                        .await
                }
                Err(e) => Err(e),
            }
        };
        let entity = update_conditionally_with(
            &self.tables,
            &self.schema.messages,
            room.as_str(),
            key.as_str(),
            None,
            live_change(room, |m| {
                changed = m.is_pinned != pinned;
                m.is_pinned = pinned;
                Ok(())
            }),
            write,
        )
        .await
        .map_err(|e| settle(e, "message not found"))?;
        Ok((parse_message(room, &entity)?, changed))
    }

    /// Up to `limit` message keys of the room's pin rows after `after`, newest message first,
    /// and whether more follow: ONE range read.
    pub async fn pins_page(
        &self,
        room: &RoomId,
        after: Option<&MessageKey>,
        limit: usize,
    ) -> Result<(Vec<MessageKey>, bool)> {
        let mut query = RangeQuery::prefix(room.as_str(), PIN_PREFIX, limit + 1);
        if let Some(after) = after {
            query = query.from(Bound::Excluded(pin_key(after)));
        }
        let (rows, more) = self.tables.query_up_to(&self.schema.messages, &query, limit).await?;
        let keys = rows
            .iter()
            .filter_map(|row| MessageKey::parse(row.row_key.strip_prefix(PIN_PREFIX)?))
            .collect();
        Ok((keys, more))
    }

    /// Removes a message's pin row (absent is a no-op): after its tombstone or its purge.
    pub async fn delete_pin_row(&self, room: &RoomId, key: &MessageKey) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), &pin_key(key)).await
    }
}
