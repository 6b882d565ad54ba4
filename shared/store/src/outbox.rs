//! Outbox rows: a send's notification event, `outbox:<message id>` in the room's `Messages`
//! partition, committed in the send's own transaction; `outbox:<message id>:fanout` for an
//! event whose delivery was answered before its fan-out ended; `outbox:<message id>:words:…`
//! for a change's word index job (`store::words`); and the markers in
//! `Housekeeping`'s `outbox` partition, one per room that may hold pending events, so the
//! timer's cost follows pending events, never messages stored. What the rows mean, and when
//! they are written and cleared, is the outbox's (`crate::service::outbox`); their shape is here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::schema::{OUTBOX_PARTITION, OUTBOX_PREFIX, fan_out_key, outbox_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::events::MessageEvent;
use tabletalk_domain::ids::RoomId;
use tabletalk_tables::{ETag, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// How long a process trusts its own note that a room's marker exists.
const MARK_REFRESH: std::time::Duration = std::time::Duration::from_secs(600);

/// When this process last wrote each room's outbox marker. A std mutex: never held across an
/// await.
#[derive(Debug, Default)]
pub struct Marks {
    written: Mutex<HashMap<String, Instant>>,
}

/// A room that may hold pending events, as its marker says.
#[derive(Debug, Clone)]
pub struct Marker {
    pub room: RoomId,
    pub marked_at: Option<DateTime<Utc>>,
    etag: Option<ETag>,
}

/// An event waiting in the outbox.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Its row, which the event's publication deletes.
    pub row_key: String,
    pub created_at: Option<DateTime<Utc>>,
    /// `None` for a row that cannot be read, and for a job row.
    pub event: Option<MessageEvent>,
    /// The message a word index job row is of (`store::words`).
    pub words_of: Option<String>,
}

/// The send's outbox row of `event`, to commit with its message.
pub fn event_row(room: &RoomId, event: &MessageEvent) -> Result<Entity> {
    pending_row(room, outbox_key(&event.message_id), event)
}

/// The row key a send's event waits under, which its first publication deletes.
pub fn event_row_key(event: &MessageEvent) -> String {
    outbox_key(&event.message_id)
}

fn pending_row(room: &RoomId, row_key: String, event: &MessageEvent) -> Result<Entity> {
    let json = serde_json::to_string(event).map_err(|e| Error::Internal(format!("an event: {e}")))?;
    Ok(Entity::new(room.as_str(), row_key)
        .with("event", Value::String(json))
        .with("createdAt", Value::datetime(event.created_at())))
}

/// The outbox: a send's notification event until it is published. Holds the tables it uses and, as
/// fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct OutboxStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
    /// Rooms whose outbox marker this process wrote lately.
    pub(crate) outbox_marks: std::sync::Arc<Marks>,
}

impl OutboxStore {
    /// Makes sure the timer will look at `room` (before a send's transaction).
    pub async fn mark_outbox(&self, room: &RoomId) -> Result<()> {
        let fresh = {
            let written = self.outbox_marks.written.lock().expect("marks lock");
            written.get(room.as_str()).is_some_and(|at| at.elapsed() < MARK_REFRESH)
        };
        if fresh {
            return Ok(());
        }
        let marker = Entity::new(OUTBOX_PARTITION, room.as_str()).with("markedAt", Value::datetime(self.clock.now()));
        self.tables
            .upsert(&self.schema.housekeeping, &marker, UpdateMode::Replace)
            .await?;
        let mut written = self.outbox_marks.written.lock().expect("marks lock");
        if written.len() > 10_000 {
            written.retain(|_, at| at.elapsed() < MARK_REFRESH);
        }
        written.insert(room.to_string(), Instant::now());
        Ok(())
    }

    /// Records `event` pending while its fan-out runs in the background: the row's key and
    /// ETag, which clear it.
    pub async fn record_fan_out(&self, room: &RoomId, event: &MessageEvent) -> Result<(String, ETag)> {
        self.mark_outbox(room).await?;
        let row = pending_row(room, fan_out_key(&event.message_id), event)?;
        let etag = self
            .tables
            .upsert(&self.schema.messages, &row, UpdateMode::Replace)
            .await?;
        Ok((row.row_key, etag))
    }

    /// Clears a row [`Store::record_fan_out`] wrote, unless another run has written it since.
    pub async fn clear_fan_out(&self, room: &RoomId, (row_key, etag): (String, ETag)) {
        match self
            .tables
            .delete(&self.schema.messages, room.as_str(), &row_key, &IfMatch::Etag(etag))
            .await
        {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => {}
            Err(e) => tracing::warn!(%room, error = %e, "a done event's outbox row stays; the timer clears it"),
        }
    }

    /// Deletes a pending event's row (it was published, is done, or cannot be read).
    pub async fn clear_pending(&self, room: &RoomId, row_key: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.messages, room.as_str(), row_key).await
    }

    /// [`OutboxStore::clear_pending`] for an event just published, whose row may linger: it
    /// rides in a later commit ([`tabletalk_tables::TableBackend::delete_deferred`]).
    pub async fn clear_published(&self, room: &RoomId, row_key: &str) -> Result<()> {
        match (self.tables)
            .delete_deferred(&self.schema.messages, room.as_str(), row_key, &IfMatch::Any)
            .await
        {
            Err(e) if !e.is(ErrorKind::NotFound) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Every room whose marker says it may hold pending events.
    pub async fn outbox_markers(&self) -> Result<Vec<Marker>> {
        let markers = RangeQuery::partition(OUTBOX_PARTITION, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &markers, 10_000_000)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(Marker {
                    room: RoomId::parse(&row.row_key).ok()?,
                    marked_at: row.datetime("markedAt"),
                    etag: row.etag.clone(),
                })
            })
            .collect())
    }

    /// A room's pending events.
    pub async fn pending_events(&self, room: &RoomId) -> Result<Vec<Pending>> {
        let pending = RangeQuery::prefix(room.as_str(), OUTBOX_PREFIX, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.messages, &pending, 100_000)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| Pending {
                created_at: row.datetime("createdAt"),
                event: row
                    .str("event")
                    .and_then(|json| serde_json::from_str::<MessageEvent>(json).ok()),
                words_of: super::words::job_message(&row).map(str::to_owned),
                row_key: row.row_key,
            })
            .collect())
    }

    /// Removes a room's marker, unless it was written again since it was read.
    pub async fn remove_marker(&self, marker: &Marker) -> Result<()> {
        let Some(etag) = marker.etag.clone() else {
            return Ok(());
        };
        match self
            .tables
            .delete(
                &self.schema.housekeeping,
                OUTBOX_PARTITION,
                marker.room.as_str(),
                &IfMatch::Etag(etag),
            )
            .await
        {
            Ok(()) => Ok(()),
            // Re-marked or removed meanwhile: leave it.
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
