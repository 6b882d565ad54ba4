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
pub mod room_emoji;
pub mod rooms;
pub mod scheduled;
pub mod schema;
pub mod slash;
pub mod subscriptions;
pub mod tally;
pub mod uploads;
pub mod webhooks;
pub mod words;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use self::error::Result;
use tabletalk_clock::{Clock, SystemClock};
use tabletalk_tables::{ErrorKind, IfMatch, TableName, Tables};

pub use schema::Schema;
/// The one bound and pause for a retried race, for a use case whose race spans several store
/// calls (`tabletalk_tables::conditional`).
pub use tabletalk_tables::conditional::{Attempt, retry_lost_races};

/// Table storage as tabletalk uses it: one surface per aggregate, each holding the tables it
/// uses and, as fields, the surfaces it calls, built here bottom-up (so a circle between
/// surfaces cannot be built). A use case takes the surfaces it needs. Cloning is cheap
/// (handles and `Arc`s).
#[derive(Debug, Clone)]
pub struct Store(Arc<Surfaces>);

/// Every surface of the store, and the tables and schema they share.
#[derive(Debug)]
pub struct Surfaces {
    pub tables: Tables,
    pub schema: Arc<Schema>,
    pub clock: Arc<dyn Clock>,
    pub claims: claims::ClaimStore,
    pub companions: companions::CompanionStore,
    pub directory: directory::DirectoryStore,
    pub erasure: erasure::ErasureStore,
    pub follows: follows::FollowStore,
    pub invitations: invitations::InvitationStore,
    pub ledger: ledger::LedgerStore,
    pub limits: limits::LimitStore,
    pub live: live::LiveStore,
    pub members: members::MemberStore,
    pub messages: messages::MessageStore,
    pub moderation_log: moderation_log::ModerationLogStore,
    pub outbox: outbox::OutboxStore,
    pub outgoing: outgoing::OutgoingStore,
    pub pins: pins::PinStore,
    pub presence: presence::PresenceStore,
    pub previews: previews::PreviewStore,
    pub purge: purge::PurgeStore,
    pub reports: reports::ReportStore,
    pub roles: roles::RoleStore,
    pub rooms: rooms::RoomStore,
    pub scheduled: scheduled::ScheduledStore,
    pub slash: slash::SlashStore,
    pub room_emoji: room_emoji::RoomEmojiStore,
    pub subscriptions: subscriptions::SubscriptionStore,
    pub tally: tally::TallyStore,
    pub uploads: uploads::UploadStore,
    pub webhooks: webhooks::WebhookStore,
    pub words: words::WordStore,
}

impl std::ops::Deref for Store {
    type Target = Surfaces;

    fn deref(&self) -> &Surfaces {
        &self.0
    }
}

/// What a store's surfaces share across processes' worth of calls, kept when the store is
/// given another clock.
struct State {
    ledger: Arc<ledger::Ledger>,
    outbox_marks: Arc<outbox::Marks>,
    outgoing_nudges: Arc<outgoing::Nudges>,
    /// Whether messages write word index rows (`store::words`).
    index_words: bool,
}

impl Default for State {
    fn default() -> State {
        State {
            ledger: Arc::default(),
            outbox_marks: Arc::default(),
            outgoing_nudges: Arc::default(),
            index_words: true,
        }
    }
}

impl Store {
    /// The store over `tables`, creating any missing table first, stamping rows at the
    /// system's time.
    pub async fn open(tables: Tables, schema: Schema) -> Result<Store> {
        schema.create_tables(&tables).await?;
        let state = State::default();
        Ok(Store::assemble(tables, Arc::new(schema), Arc::new(SystemClock), state))
    }

    /// The same store stamping rows at `clock`'s time (the clock the service reads).
    pub fn with_clock(&self, clock: Arc<dyn Clock>) -> Store {
        Store::assemble(self.tables.clone(), self.schema.clone(), clock, self.state())
    }

    /// The same store writing no word index rows: messages stored or changed meanwhile are
    /// not found by search (for an operator who does not want search, and for measuring
    /// what the index costs a send).
    pub fn without_word_index(&self) -> Store {
        let state = State {
            index_words: false,
            ..self.state()
        };
        Store::assemble(self.tables.clone(), self.schema.clone(), self.clock.clone(), state)
    }

    fn state(&self) -> State {
        State {
            ledger: self.ledger.ledger.clone(),
            outbox_marks: self.outbox.outbox_marks.clone(),
            outgoing_nudges: self.outgoing.outgoing_nudges.clone(),
            index_words: self.messages.index_words,
        }
    }

    /// The time by the store's clock, which the service shares.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Builds every surface, each from the ones below it.
    fn assemble(tables: Tables, schema: Arc<Schema>, clock: Arc<dyn Clock>, state: State) -> Store {
        let outbox = outbox::OutboxStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
            outbox_marks: state.outbox_marks,
        };
        let words = words::WordStore {
            tables: tables.clone(),
            schema: schema.clone(),
            text_rows: tables.indexes_text(),
        };
        let claims = claims::ClaimStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
        };
        let companions = companions::CompanionStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let directory = directory::DirectoryStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let erasure = erasure::ErasureStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
        };
        let follows = follows::FollowStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let invitations = invitations::InvitationStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let ledger = ledger::LedgerStore {
            tables: tables.clone(),
            schema: schema.clone(),
            ledger: state.ledger,
        };
        let limits = limits::LimitStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let live = live::LiveStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let moderation_log = moderation_log::ModerationLogStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let pins = pins::PinStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let purge = purge::PurgeStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
            companions: companions.clone(),
            ledger: ledger.clone(),
            pins: pins.clone(),
            words: words.clone(),
        };
        let members = members::MemberStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
            moderation_log: moderation_log.clone(),
            erasure: erasure.clone(),
        };
        let rooms = rooms::RoomStore {
            tables: tables.clone(),
            schema: schema.clone(),
            ledger: ledger.clone(),
            directory: directory.clone(),
            invitations: invitations.clone(),
            limits: limits.clone(),
            members: members.clone(),
            moderation_log: moderation_log.clone(),
            purge: purge.clone(),
        };
        let outgoing = outgoing::OutgoingStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
            outgoing_nudges: state.outgoing_nudges,
            ledger: ledger.clone(),
        };
        let tally = tally::TallyStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let messages = messages::MessageStore {
            tables: tables.clone(),
            schema: schema.clone(),
            ledger: ledger.clone(),
            outgoing: outgoing.clone(),
            outbox: outbox.clone(),
            words: words.clone(),
            tally: tally.clone(),
            index_words: state.index_words,
        };
        let presence = presence::PresenceStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let previews = previews::PreviewStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let reports = reports::ReportStore {
            tables: tables.clone(),
            schema: schema.clone(),
            clock: clock.clone(),
            moderation_log: moderation_log.clone(),
        };
        let roles = roles::RoleStore {
            tables: tables.clone(),
            schema: schema.clone(),
            moderation_log: moderation_log.clone(),
        };
        let slash = slash::SlashStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let room_emoji = room_emoji::RoomEmojiStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };

        let scheduled = scheduled::ScheduledStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let subscriptions = subscriptions::SubscriptionStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let uploads = uploads::UploadStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        let webhooks = webhooks::WebhookStore {
            tables: tables.clone(),
            schema: schema.clone(),
        };
        Store(Arc::new(Surfaces {
            tables,
            schema,
            clock,
            claims,
            companions,
            directory,
            erasure,
            follows,
            invitations,
            ledger,
            limits,
            live,
            members,
            messages,
            moderation_log,
            outbox,
            outgoing,
            pins,
            presence,
            previews,
            purge,
            reports,
            roles,
            rooms,
            scheduled,
            slash,
            room_emoji,
            subscriptions,
            tally,
            uploads,
            webhooks,
            words,
        }))
    }

    /// The raw tables, for tests and tools that inspect what is stored.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// Deletes a row, answering success when it is already gone.
pub async fn delete_if_present(tables: &Tables, table: &TableName, partition: &str, row: &str) -> Result<()> {
    match tables.delete(table, partition, row, &IfMatch::Any).await {
        Ok(()) => Ok(()),
        Err(e) if e.is(ErrorKind::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A time as the tables keep it (to the microsecond), so that what a write answers is what a
/// later read returns.
pub fn stored_time(at: DateTime<Utc>) -> DateTime<Utc> {
    tabletalk_tables::entity::truncate_to_micros(at)
}
