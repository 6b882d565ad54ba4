//! Outgoing webhook rows. Endpoints are `outhook:<id>` in the room's `Rooms` partition (so a
//! room's deletion takes them along), with the secret sealed by the server's key. Rooms that
//! have endpoints are listed in `Housekeeping`'s `outhooks` partition, so a delivery run costs
//! in rooms with endpoints, never in rooms. A change of a message in such a room commits an
//! event row `hookq:<version>:<message id>` in its own transaction (`store::messages`), so no
//! event is lost between the change and its delivery; a run fans each event out into one
//! delivery row per endpoint (`odp:<delivery id>`, an insert, so fanning out again after a
//! crash makes nothing twice) and then deletes the event row. A finished delivery moves to
//! `odd:<delivery id>` in one transaction with the pending row's removal.

use std::collections::HashSet;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::error::{Result, settle};
use super::schema::{
    DELIVERY_DONE_PREFIX, DELIVERY_PENDING_PREFIX, HOOK_EVENT_PREFIX, OUTGOING_PARTITION, OUTGOING_PREFIX,
    delivery_done_key, delivery_pending_key, hook_event_key, outgoing_key,
};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::messages::Message;
use tabletalk_domain::outgoing::{
    Delivery, DeliveryStatus, EndpointStatus, HookEvent, LastDelivery, MAX_OUTGOING_PER_ROOM, OutgoingWebhook, missing,
};
use tabletalk_tables::conditional::update_conditionally;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Pending deliveries a listing reads: its newest are among the last of them.
const MAX_PENDING_LISTED: usize = 100_000;

/// Rooms with events committed here since a delivery run last took them. A std mutex, never
/// held across an await.
#[derive(Debug, Default)]
pub struct Nudges(Mutex<HashSet<String>>);

/// An event waiting to be fanned out to the room's endpoints.
#[derive(Debug, Clone)]
pub struct HookEventRow {
    pub row_key: String,
    pub event: HookEvent,
    pub version: u64,
    pub message_id: String,
    /// The message as clients see it at the change (its JSON).
    pub message: serde_json::Value,
}

fn webhook_row(hook: &OutgoingWebhook) -> Entity {
    let events: Vec<&str> = hook.events.iter().map(|e| e.as_str()).collect();
    let mut row = Entity::new(&hook.room_id, outgoing_key(&hook.id))
        .with("url", Value::String(hook.url.clone()))
        .with("events", Value::String(events.join(",")))
        .with("createdBy", Value::String(hook.created_by.clone()))
        .with("createdAt", Value::datetime(hook.created_at))
        .with("secret", Value::String(hook.sealed_secret.clone()))
        .with(
            "status",
            Value::String(match hook.status {
                EndpointStatus::Active => "active".into(),
                EndpointStatus::Disabled => "disabled".into(),
            }),
        );
    if let Some(at) = hook.failing_since {
        row.set("failingSince", Value::datetime(at));
    }
    if let Some(at) = hook.disabled_at {
        row.set("disabledAt", Value::datetime(at));
    }
    if let Some(last) = &hook.last_delivery {
        row.set(
            "lastDelivery",
            Value::String(serde_json::to_string(last).unwrap_or_default()),
        );
    }
    row
}

fn parse_webhook(row: &Entity) -> Option<OutgoingWebhook> {
    Some(OutgoingWebhook {
        id: row.row_key.strip_prefix(OUTGOING_PREFIX)?.to_owned(),
        room_id: row.partition_key.clone(),
        url: row.str("url")?.to_owned(),
        events: row.str("events")?.split(',').filter_map(HookEvent::parse).collect(),
        created_by: row.str("createdBy")?.to_owned(),
        created_at: row.datetime("createdAt")?,
        status: match row.str("status")? {
            "disabled" => EndpointStatus::Disabled,
            _ => EndpointStatus::Active,
        },
        failing_since: row.datetime("failingSince"),
        disabled_at: row.datetime("disabledAt"),
        last_delivery: row
            .str("lastDelivery")
            .and_then(|json| serde_json::from_str::<LastDelivery>(json).ok()),
        sealed_secret: row.str("secret")?.to_owned(),
    })
}

/// The event row of a change, committed in its transaction. It holds the message as the
/// endpoint will be sent it, so a forwarded copy's source room is never stored for delivery.
pub fn hook_event_row(message: &Message, event: HookEvent) -> Entity {
    // An endpoint gets the rendering, not a Markdown source: the row stays within a
    // property's 32 Ki characters (`markdown::MAX_RENDERED_UNITS`).
    let mut shown = message.without_foreign_source();
    if shown.source.is_some() {
        shown.to_mut().source = None;
    }
    Entity::new(&message.room_id, hook_event_key(message.version, &message.id))
        .with("event", Value::String(event.as_str().into()))
        .with("version", Value::Int64(message.version as i64))
        .with("messageId", Value::String(message.id.clone()))
        .with(
            "message",
            Value::String(serde_json::to_string(&*shown).unwrap_or_default()),
        )
}

fn delivery_row(room: &RoomId, row_key: String, d: &Delivery) -> Entity {
    let mut row = Entity::new(room.as_str(), row_key)
        .with("deliveryId", Value::String(d.id.clone()))
        .with("webhookId", Value::String(d.webhook_id.clone()))
        .with("event", Value::String(d.event.as_str().into()))
        .with("messageId", Value::String(d.message_id.clone()))
        .with("version", Value::Int64(d.version as i64))
        .with(
            "status",
            Value::String(
                match d.status {
                    DeliveryStatus::Pending => "pending",
                    DeliveryStatus::Delivered => "delivered",
                    DeliveryStatus::Abandoned => "abandoned",
                }
                .into(),
            ),
        )
        .with("attempts", Value::Int64(i64::from(d.attempts)))
        .with("createdAt", Value::datetime(d.created_at))
        .with("body", Value::String(d.body.clone()));
    let optional = [
        ("lastAttemptAt", d.last_attempt_at.map(Value::datetime)),
        ("nextAttemptAt", d.next_attempt_at.map(Value::datetime)),
        ("claimedUntil", d.claimed_until.map(Value::datetime)),
        ("statusCode", d.status_code.map(|c| Value::Int64(i64::from(c)))),
        ("error", d.error.clone().map(Value::String)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            row.set(name, value);
        }
    }
    row
}

fn parse_delivery(row: &Entity) -> Option<Delivery> {
    Some(Delivery {
        id: row.str("deliveryId")?.to_owned(),
        webhook_id: row.str("webhookId")?.to_owned(),
        event: HookEvent::parse(row.str("event")?)?,
        message_id: row.str("messageId")?.to_owned(),
        version: u64::try_from(row.i64("version")?).ok()?,
        status: match row.str("status")? {
            "delivered" => DeliveryStatus::Delivered,
            "abandoned" => DeliveryStatus::Abandoned,
            _ => DeliveryStatus::Pending,
        },
        attempts: u32::try_from(row.i64("attempts").unwrap_or(0)).unwrap_or(u32::MAX),
        created_at: row.datetime("createdAt")?,
        last_attempt_at: row.datetime("lastAttemptAt"),
        next_attempt_at: row.datetime("nextAttemptAt"),
        status_code: row.i64("statusCode").and_then(|c| u16::try_from(c).ok()),
        error: row.str("error").map(str::to_owned),
        body: row.str("body").unwrap_or_default().to_owned(),
        claimed_until: row.datetime("claimedUntil"),
    })
}

/// Outgoing webhook endpoints, their events and deliveries. Holds the tables it uses and, as
/// fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct OutgoingStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
    /// Rooms whose outgoing webhooks have events this process committed and has not yet handed to a delivery run.
    pub(crate) outgoing_nudges: std::sync::Arc<Nudges>,
    /// Where the room's counter says whether its changes commit event rows.
    pub(crate) ledger: crate::ledger::LedgerStore,
}

impl OutgoingStore {
    /// Stores a new endpoint and lists its room for the delivery runs.
    pub async fn insert_outgoing(&self, hook: &OutgoingWebhook) -> Result<()> {
        match self.tables.insert(&self.schema.rooms, &webhook_row(hook)).await {
            Ok(_) => {}
            Err(e) if e.is(ErrorKind::AlreadyExists) => {
                return Err(Error::Conflict("that webhook id is taken; try again".into()).into());
            }
            Err(e) => return Err(e.into()),
        }
        // After the endpoint: a run that removes the listing of a room it saw without
        // endpoints does so conditionally, and this write comes after ours is visible.
        let listing = Entity::new(OUTGOING_PARTITION, &hook.room_id).with("at", Value::datetime(self.clock.now()));
        self.tables
            .upsert(&self.schema.housekeeping, &listing, UpdateMode::Replace)
            .await?;
        // Then the room's counter: every change committed after this carries its event row.
        let room = RoomId::parse(&hook.room_id)?;
        self.ledger.set_hooked(&room, true).await?;
        Ok(())
    }

    /// A room's endpoints, up to [`MAX_OUTGOING_PER_ROOM`] and one more.
    pub async fn outgoing_webhooks(&self, room: &RoomId) -> Result<Vec<OutgoingWebhook>> {
        let query = RangeQuery::prefix(room.as_str(), OUTGOING_PREFIX, 100);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_OUTGOING_PER_ROOM + 1)
            .await?;
        Ok(rows.iter().filter_map(parse_webhook).collect())
    }

    pub async fn outgoing_webhook(&self, room: &RoomId, id: &str) -> Result<Option<OutgoingWebhook>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &outgoing_key(id))
            .await?;
        Ok(row.as_ref().and_then(parse_webhook))
    }

    /// Changes an endpoint conditionally on the row as read; a missing one answers 404.
    pub async fn update_outgoing(
        &self,
        room: &RoomId,
        id: &str,
        mut change: impl FnMut(&mut OutgoingWebhook),
    ) -> Result<OutgoingWebhook> {
        let row = update_conditionally(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            &outgoing_key(id),
            UpdateMode::Replace,
            |row| {
                let mut hook = parse_webhook(&row).ok_or_else(missing)?;
                change(&mut hook);
                Ok(webhook_row(&hook))
            },
        )
        .await
        .map_err(|e| settle(e, "outgoing webhook not found"))?;
        parse_webhook(&row).ok_or_else(|| Error::Internal("an outgoing webhook row did not read back".into()).into())
    }

    /// Deletes an endpoint, then its deliveries: no run lists it again, so nothing else would
    /// ever remove them, and a pending one holds its message's text. A missing one answers
    /// 404. A fan-out racing the delete leaves a pending row the next run drops
    /// ([`Store::drop_deliveries`]).
    pub async fn delete_outgoing(&self, room: &RoomId, id: &str) -> Result<()> {
        match self
            .tables
            .delete(&self.schema.rooms, room.as_str(), &outgoing_key(id), &IfMatch::Any)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::NotFound) => return Err(missing().into()),
            Err(e) => return Err(e.into()),
        }
        self.drop_deliveries(room, id).await
    }

    /// Deletes every delivery of endpoint `webhook`, pending and finished.
    pub async fn drop_deliveries(&self, room: &RoomId, webhook: &str) -> Result<()> {
        for prefix in [DELIVERY_PENDING_PREFIX, DELIVERY_DONE_PREFIX] {
            let query = RangeQuery::prefix(room.as_str(), &format!("{prefix}{webhook}."), 100);
            self.tables.delete_range(&self.schema.rooms, &query).await?;
        }
        Ok(())
    }

    /// Every room listed as having endpoints, with its listing's ETag.
    pub async fn outgoing_rooms(&self) -> Result<Vec<(RoomId, Option<ETag>)>> {
        let query = RangeQuery::partition(OUTGOING_PARTITION, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, 10_000_000)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| Some((RoomId::parse(&row.row_key).ok()?, row.etag.clone())))
            .collect())
    }

    /// Removes a room's listing, unless it was written again since it was read, and then the
    /// counter's hooked flag — set again when a listing is back by then (an endpoint
    /// registered meanwhile lists its room before it sets the flag), so a room with endpoints
    /// keeps committing their event rows.
    pub async fn unlist_outgoing_room(&self, room: &RoomId, etag: Option<ETag>) -> Result<()> {
        let Some(etag) = etag else { return Ok(()) };
        let deleted = self
            .tables
            .delete(
                &self.schema.housekeeping,
                OUTGOING_PARTITION,
                room.as_str(),
                &IfMatch::Etag(etag),
            )
            .await;
        match deleted {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        self.ledger.set_hooked(room, false).await?;
        if self.ledger.listed_for_hooks(room).await? {
            self.ledger.set_hooked(room, true).await?;
        }
        Ok(())
    }

    /// Sets the counter's hooked flag of a listed room with endpoints if it is not set: what
    /// an endpoint's registration that stopped between its listing and its flag left.
    pub async fn ensure_hooked(&self, room: &RoomId) -> Result<()> {
        if self.ledger.counter(room).await?.hooked != Some(true) {
            self.ledger.set_hooked(room, true).await?;
        }
        Ok(())
    }

    /// Notes that `room` has events to deliver (after a commit that wrote one).
    pub fn nudge(&self, room: &RoomId) {
        let mut nudges = self.outgoing_nudges.0.lock().expect("nudges lock");
        nudges.insert(room.to_string());
    }

    /// Whether `room` was nudged since this was last asked (and forgets it).
    pub fn take_nudge(&self, room: &RoomId) -> bool {
        let mut nudges = self.outgoing_nudges.0.lock().expect("nudges lock");
        nudges.remove(room.as_str())
    }

    /// A room's events waiting to be fanned out, oldest first.
    pub async fn hook_events(&self, room: &RoomId) -> Result<Vec<HookEventRow>> {
        let query = RangeQuery::prefix(room.as_str(), HOOK_EVENT_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.messages, &query, 10_000).await?;
        let mut events = Vec::new();
        for row in rows {
            let parsed = (|| {
                Some(HookEventRow {
                    event: HookEvent::parse(row.str("event")?)?,
                    version: u64::try_from(row.i64("version")?).ok()?,
                    message_id: row.str("messageId")?.to_owned(),
                    message: serde_json::from_str(row.str("message")?).ok()?,
                    row_key: row.row_key.clone(),
                })
            })();
            match parsed {
                Some(event) => events.push(event),
                None => {
                    tracing::error!(%room, row = %row.row_key, "an unreadable outgoing webhook event was dropped");
                    self.clear_hook_event(room, &row.row_key).await?;
                }
            }
        }
        Ok(events)
    }

    pub async fn clear_hook_event(&self, room: &RoomId, row_key: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), row_key).await
    }

    /// Records a delivery; one already recorded (an event fanned out again) is kept as it is.
    ///
    /// Its history row is written with it, in one transaction, and stays when the delivery
    /// finishes (it is replaced by the finished state): a run that read the event before
    /// another run fanned it out, posted the delivery and cleared the event, fans it out late
    /// and finds the history row — without it, the late insert brought back a pending delivery
    /// of one already posted, and the endpoint got it twice.
    pub async fn insert_delivery(&self, room: &RoomId, delivery: &Delivery) -> Result<()> {
        let pending = delivery_row(room, delivery_pending_key(&delivery.id), delivery);
        let history = history_row(room, delivery);
        match self
            .tables
            .transact(
                &self.schema.rooms,
                room.as_str(),
                &[BatchOp::Insert(pending), BatchOp::Insert(history)],
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// An endpoint's oldest `max` pending deliveries, oldest change first, each with its
    /// row's ETag.
    pub async fn pending_deliveries(&self, room: &RoomId, webhook: &str, max: usize) -> Result<Vec<(Delivery, ETag)>> {
        let query = RangeQuery::prefix(
            room.as_str(),
            &format!("{DELIVERY_PENDING_PREFIX}{webhook}."),
            max.min(1000),
        );
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((parse_delivery(row)?, row.etag.clone()?)))
            .collect())
    }

    /// Writes a pending delivery as `delivery` now is, if its row is still as read (`etag`):
    /// the new ETag, or none when another run changed it first.
    pub async fn replace_pending(&self, room: &RoomId, delivery: &Delivery, etag: ETag) -> Result<Option<ETag>> {
        let row = delivery_row(room, delivery_pending_key(&delivery.id), delivery);
        match self
            .tables
            .update(&self.schema.rooms, &row, UpdateMode::Replace, &IfMatch::Etag(etag))
            .await
        {
            Ok(etag) => Ok(Some(etag)),
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Moves a finished delivery from pending to done, in one transaction. The done row keeps
    /// no body: the history holds no message text, so an erasure or a retention purge leaves
    /// none behind in it.
    pub async fn finish_delivery(&self, room: &RoomId, delivery: &Delivery, etag: ETag) -> Result<()> {
        let done = history_row(room, delivery);
        let ops = [
            BatchOp::Upsert {
                entity: done,
                mode: UpdateMode::Replace,
            },
            BatchOp::Delete {
                partition_key: room.to_string(),
                row_key: delivery_pending_key(&delivery.id),
                if_match: IfMatch::Etag(etag),
            },
        ];
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            // Another run finished it first.
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes an endpoint's finished deliveries of changes more than `kept` versions before
    /// `version` (at most a page per call): the history stays bounded, and finding what to
    /// delete reads only that.
    pub async fn prune_deliveries(&self, room: &RoomId, webhook: &str, version: u64, kept: u64) -> Result<usize> {
        let Some(oldest_kept) = version.checked_sub(kept) else {
            return Ok(0);
        };
        let prefix = format!("{DELIVERY_DONE_PREFIX}{webhook}.");
        let older = RangeQuery::prefix(room.as_str(), &prefix, 100).from(std::ops::Bound::Excluded(delivery_done_key(
            webhook,
            oldest_kept,
            "~",
        )));
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &older, 100).await?;
        for row in &rows {
            crate::delete_if_present(&self.tables, &self.schema.rooms, room.as_str(), &row.row_key).await?;
        }
        Ok(rows.len())
    }

    /// An endpoint's deliveries, newest change first, at most `limit`: its pending ones (an
    /// outage's backlog) and the newest `limit` finished ones.
    pub async fn deliveries(&self, room: &RoomId, webhook: &str, limit: usize) -> Result<Vec<Delivery>> {
        let mut all: Vec<Delivery> = self
            .pending_deliveries(room, webhook, MAX_PENDING_LISTED)
            .await?
            .into_iter()
            .map(|(delivery, _)| delivery)
            .collect();
        let done = RangeQuery::prefix(
            room.as_str(),
            &format!("{DELIVERY_DONE_PREFIX}{webhook}."),
            limit.min(1000),
        );
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &done, limit).await?;
        // A pending delivery's history row says no more than its pending row, read above.
        all.extend(
            rows.iter()
                .filter_map(parse_delivery)
                .filter(|d| d.status != DeliveryStatus::Pending),
        );
        all.sort_by(|a, b| b.version.cmp(&a.version).then_with(|| b.message_id.cmp(&a.message_id)));
        all.truncate(limit);
        Ok(all)
    }
}

/// A delivery's row in its endpoint's history: without the body, so the history holds no
/// message text (an erasure or a retention purge leaves none behind in it).
fn history_row(room: &RoomId, delivery: &Delivery) -> Entity {
    let key = delivery_done_key(&delivery.webhook_id, delivery.version, &delivery.message_id);
    delivery_row(
        room,
        key,
        &Delivery {
            body: String::new(),
            ..delivery.clone()
        },
    )
}

/// A fresh delivery of `event` to `webhook`.
pub fn new_delivery(webhook: &str, event: &HookEventRow, body: String, now: DateTime<Utc>) -> Delivery {
    Delivery {
        id: tabletalk_domain::outgoing::delivery_id(webhook, event.version, &event.message_id),
        webhook_id: webhook.to_owned(),
        event: event.event,
        message_id: event.message_id.clone(),
        version: event.version,
        status: DeliveryStatus::Pending,
        attempts: 0,
        created_at: now,
        last_attempt_at: None,
        next_attempt_at: None,
        status_code: None,
        error: None,
        body,
        claimed_until: None,
    }
}
