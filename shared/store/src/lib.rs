//! The store: the only code that knows tables, partitions and row keys. [`schema`] lists every
//! table and every row-key format; each aggregate has a module that converts its rows to and
//! from the models and makes the table calls the use cases need (messages, members, rooms,
//! roles, companions — reactions and votes —, subscriptions, the outbox, notification claims,
//! the retention purge, the moderation log, reports, erasures, the limits' buckets and records);
//! [`ledger`] numbers every change to a message with its room's next version (group commit).
//!
//! The service asks the store for what it needs in its own terms — a member, a page of
//! messages, a change committed with the next version — and never sees an `Entity`.

pub mod activity;
pub mod claims;
pub mod companions;
pub mod directory;
pub mod erasure;
pub mod error;
pub mod follows;
pub mod invitations;
pub mod ledger;
pub mod limits;
pub mod live;
pub mod members;
pub mod messages;
pub mod moderation_log;
pub mod outbox;
pub mod outgoing;
pub mod pins;
pub mod presence;
pub mod previews;
pub mod purge;
pub mod reports;
pub mod roles;
pub mod rooms;
pub mod scheduled;
pub mod schema;
pub mod subscriptions;
pub mod uploads;
pub mod webhooks;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use self::error::Result;
use tabletalk_tables::{ErrorKind, IfMatch, TableName, Tables};

pub use schema::Schema;
/// The one bound and pause for a retried race, for a use case whose race spans several store
/// calls (`tabletalk_tables::conditional`).
pub use tabletalk_tables::conditional::{Attempt, retry_lost_races};

use self::ledger::Ledger;

/// Table storage as tabletalk uses it. Cloning is cheap (handles and `Arc`s).
#[derive(Debug, Clone)]
pub struct Store {
    pub tables: Tables,
    pub schema: Arc<Schema>,
    /// Each room's queue of changes waiting for a version, in this process.
    pub ledger: Arc<Ledger>,
    /// Rooms whose outbox marker this process wrote lately.
    pub outbox_marks: Arc<outbox::Marks>,
    /// Rooms whose outgoing webhooks have events this process committed and has not yet
    /// handed to a delivery run.
    pub outgoing_nudges: Arc<outgoing::Nudges>,
}

impl Store {
    /// The store over `tables`, creating any missing table first.
    pub async fn open(tables: Tables, schema: Schema) -> Result<Store> {
        schema.create_tables(&tables).await?;
        Ok(Store {
            tables,
            schema: Arc::new(schema),
            ledger: Arc::default(),
            outbox_marks: Arc::default(),
            outgoing_nudges: Arc::default(),
        })
    }

    /// The raw tables, for tests and tools that inspect what is stored.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Deletes a row, answering success when it is already gone.
    pub async fn delete_if_present(&self, table: &TableName, partition: &str, row: &str) -> Result<()> {
        match self.tables.delete(table, partition, row, &IfMatch::Any).await {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// A time as the tables keep it (to the microsecond), so that what a write answers is what a
/// later read returns.
pub fn stored_time(at: DateTime<Utc>) -> DateTime<Utc> {
    tabletalk_tables::entity::truncate_to_micros(at)
}
