//! Presence rows: `Presence`, partition = user. One row per live connection
//! (`c:<connection id>`) and one presence row (`state`).
//!
//! Why rows per connection and not a counter: a counter is only right if every open and close
//! is counted exactly once. Web PubSub's events may come twice, late or out of order, and a
//! self-hosted deployment may run two processes on one store, each with its own hub. With a row
//! per connection, opening and closing are idempotent: an open inserts the row (a repeat, or a
//! late open after its close, finds the row there and changes nothing) and a close marks it
//! closed. Online is "some row not closed".
//!
//! The presence row is then made to agree with the connection rows ([`Store::settle_presence`]):
//! read the presence row (and its version), then the connection rows, then write the derived
//! state on that version. A concurrent settle that wrote in between makes the write fail, and
//! the loop reads again; one that wrote before the read finished its own connection write
//! before it, so the listing sees it. So the stored state ends where the rows say, and each
//! flip is written, and so announced, by exactly one caller.

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::schema::{
    CONNECTION_PREFIX, HUB_CONNECTIONS_PREFIX, HUBS_PARTITION, PRESENCE_ROW, connection_key, encode_key_part, user_key,
};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::UserId;
use tabletalk_domain::presence::{CustomStatus, OnlineWindow, Presence, PresenceState};
use tabletalk_tables::conditional::{Attempt, retry_lost_races};
use tabletalk_tables::{Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Connection rows of one user read at most (a user with more open connections than this
/// still reads as online).
const MAX_CONNECTIONS: usize = 1000;
/// How long a closed connection's row is kept, so that a late or repeated `connected` event
/// for it cannot count it open again; older ones are removed when the user's presence settles.
const CLOSED_KEPT: Duration = Duration::minutes(10);

fn parse_presence(entity: &Entity) -> Presence {
    Presence {
        state: entity
            .str("state")
            .and_then(PresenceState::parse)
            .unwrap_or(PresenceState::Away),
        last_seen: entity.datetime("lastSeen"),
        status: entity
            .str("status")
            .filter(|s| !s.is_empty())
            .and_then(|s| serde_json::from_str(s).ok()),
    }
}

fn status_value(status: Option<&CustomStatus>) -> Value {
    Value::String(status.and_then(|s| serde_json::to_string(s).ok()).unwrap_or_default())
}

/// Presence, from the connections a user has open. Holds the tables it uses and, as fields, the
/// surfaces it calls.
#[derive(Debug, Clone)]
pub struct PresenceStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl PresenceStore {
    /// Records a live connection of `user` as open; a repeat, or an open that comes after the
    /// same connection's close, changes nothing.
    pub async fn open_connection(&self, user: &UserId, connection: &str, now: DateTime<Utc>) -> Result<()> {
        let row = Entity::new(user_key(user), connection_key(connection)).with("openedAt", Value::datetime(now));
        match self.tables.insert(&self.schema.presence, &row).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Records a live connection of `user` as closed (kept a while, see [`CLOSED_KEPT`]).
    pub async fn close_connection(&self, user: &UserId, connection: &str, now: DateTime<Utc>) -> Result<()> {
        let row = Entity::new(user_key(user), connection_key(connection)).with("closedAt", Value::datetime(now));
        self.tables
            .upsert(&self.schema.presence, &row, UpdateMode::Merge)
            .await?;
        Ok(())
    }

    /// Whether `user`'s live connection `connection` is open: `None` when no event of it has
    /// been recorded in their partition (a connection of another user's is never found here),
    /// else whether it has not closed. One point read.
    pub async fn connection_open(&self, user: &UserId, connection: &str) -> Result<Option<bool>> {
        let row = self
            .tables
            .get(&self.schema.presence, &user_key(user), &connection_key(connection))
            .await?;
        Ok(row.map(|row| row.datetime("closedAt").is_none()))
    }

    /// When `user` was online, from their presence row (one point read): the session they are
    /// in, or their last one. A row from before sessions were recorded, online, started its
    /// session when it was last seen.
    pub async fn online_window(&self, user: &UserId) -> Result<OnlineWindow> {
        let row = self
            .tables
            .get(&self.schema.presence, &user_key(user), PRESENCE_ROW)
            .await?;
        let Some(row) = row else {
            return Ok(OnlineWindow::default());
        };
        let last_seen = row.datetime("lastSeen");
        Ok(match parse_presence(&row).state {
            PresenceState::Online => OnlineWindow {
                since: row.datetime("onlineSince").or(last_seen),
                until: None,
            },
            PresenceState::Away => OnlineWindow {
                since: row.datetime("onlineSince"),
                until: last_seen,
            },
        })
    }

    /// `user`'s presence as stored (a user never seen: away, no status), expired status and all.
    pub async fn presence(&self, user: &UserId) -> Result<Presence> {
        let row = self
            .tables
            .get(&self.schema.presence, &user_key(user), PRESENCE_ROW)
            .await?;
        Ok(row.as_ref().map_or_else(Presence::unknown, parse_presence))
    }

    /// Sets (or with `None` clears) `user`'s custom status, leaving their state alone.
    pub async fn set_status(&self, user: &UserId, status: Option<&CustomStatus>) -> Result<Presence> {
        let row = Entity::new(user_key(user), PRESENCE_ROW).with("status", status_value(status));
        self.tables
            .upsert(&self.schema.presence, &row, UpdateMode::Merge)
            .await?;
        self.presence(user).await
    }

    /// Makes `user`'s presence row agree with their connection rows. Answers the presence when
    /// this call changed the state (online to away or back), none when it already agreed.
    pub async fn settle_presence(&self, user: &UserId, now: DateTime<Utc>) -> Result<Option<Presence>> {
        let partition = &user_key(user);
        let attempt = move || async move {
            let stored = self.tables.get(&self.schema.presence, partition, PRESENCE_ROW).await?;
            let query = RangeQuery::prefix(partition, CONNECTION_PREFIX, 1000);
            let (rows, _) = self
                .tables
                .query_up_to(&self.schema.presence, &query, MAX_CONNECTIONS)
                .await?;
            let open = rows.iter().any(|row| row.datetime("closedAt").is_none());
            self.forget_closed(&rows, now).await;
            let state = match open {
                true => PresenceState::Online,
                false => PresenceState::Away,
            };
            let current = stored.as_ref().map_or_else(Presence::unknown, parse_presence);
            if current.state == state {
                return Ok(Attempt::Done(None));
            }
            let mut row = Entity::new(partition.as_str(), PRESENCE_ROW)
                .with("state", Value::String(state.as_str().to_owned()))
                .with("lastSeen", Value::datetime(now));
            if state == PresenceState::Online {
                // The session's start stays when it ends, for `@here` (`online_window`).
                row.set("onlineSince", Value::datetime(now));
            }
            let written = match stored.as_ref().and_then(Entity::etag) {
                Some(etag) => {
                    let condition = IfMatch::Etag(etag.clone());
                    self.tables
                        .update(&self.schema.presence, &row, UpdateMode::Merge, &condition)
                        .await
                }
                None => {
                    row.set("status", status_value(None));
                    self.tables.insert(&self.schema.presence, &row).await
                }
            };
            match written {
                Ok(_) => Ok(Attempt::Done(Some(Presence {
                    state,
                    last_seen: Some(crate::stored_time(now)),
                    status: current.status,
                }))),
                Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::AlreadyExists) => {
                    Ok(Attempt::LostRace)
                }
                Err(e) if e.is(ErrorKind::NotFound) => Ok(Attempt::LostRace),
                Err(e) => Err(e.into()),
            }
        };
        retry_lost_races::<_, super::error::Error, _, _>(attempt)
            .await?
            .ok_or_else(|| {
                Error::Unavailable("presence kept changing; it settles with the next connection event".into()).into()
            })
    }

    /// Removes connection rows closed longer than [`CLOSED_KEPT`] ago; best effort.
    async fn forget_closed(&self, rows: &[Entity], now: DateTime<Utc>) {
        for row in rows {
            if row.datetime("closedAt").is_some_and(|at| at < now - CLOSED_KEPT)
                && let Err(e) =
                    crate::delete_if_present(&self.tables, &self.schema.presence, &row.partition_key, &row.row_key)
                        .await
            {
                tracing::debug!(error = %e, "an old connection row stays until the next settle");
            }
        }
    }

    /// Marks the local hub of process `tag` alive until `until`.
    pub async fn beat_hub(&self, tag: &str, until: DateTime<Utc>) -> Result<()> {
        let row = Entity::new(HUBS_PARTITION, encode_key_part(tag)).with("aliveUntil", Value::datetime(until));
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Lists `connection` of `user` as open on the local hub of process `tag`.
    pub async fn index_hub_connection(&self, tag: &str, connection: &str, user: &UserId) -> Result<()> {
        let row =
            Entity::new(hub_partition(tag), encode_key_part(connection)).with("user", Value::String(user.to_string()));
        self.tables
            .upsert(&self.schema.housekeeping, &row, UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// Takes `connection` off the list of the local hub of process `tag`.
    pub async fn unindex_hub_connection(&self, tag: &str, connection: &str) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.housekeeping,
            &hub_partition(tag),
            &encode_key_part(connection),
        )
        .await
    }

    /// The tags of local hubs whose heartbeat lapsed before `now` (their process stopped).
    pub async fn lapsed_hubs(&self, now: DateTime<Utc>) -> Result<Vec<String>> {
        let query = RangeQuery::partition(HUBS_PARTITION, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.housekeeping, &query, MAX_CONNECTIONS)
            .await?;
        Ok(rows
            .iter()
            .filter(|row| row.datetime("aliveUntil").is_none_or(|until| until < now))
            .map(|row| row.row_key.clone())
            .collect())
    }

    /// Up to `max` connections still listed open on the hub of `tag` (as `lapsed_hubs` names
    /// it): the connection and its user.
    pub async fn hub_connections(&self, tag_key: &str, max: usize) -> Result<Vec<(String, UserId)>> {
        let query = RangeQuery::partition(format!("{HUB_CONNECTIONS_PREFIX}{tag_key}"), 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.housekeeping, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((row.row_key.clone(), UserId::parse(row.str("user")?).ok()?)))
            .collect())
    }

    /// Forgets the heartbeat of the hub of `tag_key` (as `lapsed_hubs` names it).
    pub async fn forget_hub(&self, tag_key: &str) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.housekeeping, HUBS_PARTITION, tag_key).await
    }

    /// Deletes every presence row of `user` (an erasure: their status is theirs).
    pub async fn delete_presence(&self, user: &UserId) -> Result<()> {
        let query = RangeQuery::partition(user_key(user), 1000);
        self.tables.delete_range(&self.schema.presence, &query).await?;
        Ok(())
    }
}

fn hub_partition(tag: &str) -> String {
    format!("{HUB_CONNECTIONS_PREFIX}{}", encode_key_part(tag))
}
