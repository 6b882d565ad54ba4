//! `Chat`, the service every caller goes through: it owns the store and the schema, and the
//! operations on rooms and messages are `impl Chat` blocks in their own modules (`rooms`,
//! `messages::send`, `messages::read`).

use std::sync::Arc;

use crate::config::{Settings, StorageSettings};
use crate::error::Result;
use crate::events::EventGrid;
use crate::keys::Ticks;
use crate::live::local_hub::LocalHub;
use crate::live::web_pubsub::WebPubSub;
use crate::live::{Live, TypingGate};
use crate::outbound::{OutboundClient, Reach};
use crate::push::PushSettings;
use crate::push::sender::PushSender;
use crate::storage::Tables;
use crate::storage::azure::AzureTables;
use crate::storage::sqlite::SqliteTables;
use crate::store::{Schema, Store};

/// The chat service. Cloning is cheap (an `Arc` and a store handle).
#[derive(Debug, Clone)]
pub struct Chat {
    /// Every table and row the service reads and writes.
    pub(crate) store: Store,
    /// Where send times come from; tests freeze it to force key collisions.
    pub(crate) clock: fn() -> Ticks,
    /// The workspace id the change feed answers for.
    pub(crate) workspace_id: Arc<str>,
    /// Web Push: the sender (when a VAPID key is configured) and what endpoints are accepted.
    pub(crate) push: Arc<PushSettings>,
    /// Where live signals go: Azure Web PubSub, the local hub, or nowhere.
    pub(crate) live: Live,
    /// The Event Grid topic message events go to; without one, to `notify` in process.
    pub(crate) event_grid: Option<Arc<EventGrid>>,
    /// Who typed when, to rate-limit typing signals.
    pub(crate) typing: Arc<TypingGate>,
    /// Publish each event before the send answers instead of in the background.
    pub(crate) inline_events: bool,
}

impl Chat {
    /// A service over `tables`, creating any missing table first.
    pub async fn open(tables: Tables, schema: Schema) -> Result<Chat> {
        Ok(Chat {
            store: Store::open(tables, schema).await?,
            clock: Ticks::now,
            workspace_id: Arc::from("default"),
            push: Arc::default(),
            live: Live::Off,
            event_grid: None,
            typing: Arc::default(),
            inline_events: false,
        })
    }

    /// The service the settings describe.
    pub async fn from_settings(settings: &Settings) -> Result<Chat> {
        let tables = open_tables(&settings.storage)?;
        let schema = Schema::with_prefix(&settings.table_prefix)?;
        let mut chat = Chat::open(tables, schema).await?;
        chat.workspace_id = Arc::from(settings.workspace_id.as_str());
        let sender = settings
            .vapid_private_key
            .as_deref()
            .map(|key| -> Result<PushSender> {
                let reach = Reach::allowing_private(settings.push_allow_private_endpoints);
                let client = OutboundClient::new(reach, crate::push::sender::REQUEST_TIMEOUT)?;
                Ok(PushSender::new(key, &settings.vapid_subject)?.with_client(client))
            })
            .transpose()?;
        if let Some(connection) = &settings.web_pubsub_connection {
            let web_pubsub = WebPubSub::from_connection_string(connection, &settings.web_pubsub_hub)?;
            chat.live = Live::Azure(Arc::new(web_pubsub));
        }
        if let Some((endpoint, key)) = &settings.event_grid {
            chat.event_grid = Some(Arc::new(EventGrid::new(endpoint, key)?));
        }
        chat.push = Arc::new(PushSettings {
            sender,
            allow_private_endpoints: settings.push_allow_private_endpoints,
            claim_lease: settings.push_claim_lease,
            ..PushSettings::default()
        });
        Ok(chat)
    }

    /// The same service with its own live hub, when no Web PubSub is configured (the
    /// self-hosted server; a Functions host cannot carry WebSockets).
    pub fn with_local_hub(mut self, hub: &str) -> Chat {
        if matches!(self.live, Live::Off) {
            self.live = Live::Local(Arc::new(LocalHub::new(hub)));
        }
        self
    }

    /// The local live hub, when this process runs one.
    pub fn local_hub(&self) -> Option<&Arc<LocalHub>> {
        match &self.live {
            Live::Local(hub) => Some(hub),
            _ => None,
        }
    }

    /// The same service publishing each event before the send answers: for hosts that freeze
    /// the process once it has answered (AWS Lambda), where background work would not run.
    pub fn with_inline_events(mut self) -> Chat {
        self.inline_events = true;
        self
    }

    /// The same service with another clock (tests: a frozen clock makes every send collide).
    pub fn with_clock(mut self, clock: fn() -> Ticks) -> Chat {
        self.clock = clock;
        self
    }

    /// The raw tables, for tests and tools that inspect what is stored.
    pub fn tables(&self) -> &Tables {
        self.store.tables()
    }

    pub fn schema(&self) -> &Schema {
        self.store.schema()
    }

    /// The VAPID public key browsers subscribe with, when push is configured.
    pub fn vapid_public_key(&self) -> Option<&str> {
        self.push.sender.as_ref().map(PushSender::public_key)
    }
}

/// The store the settings name: Azure Tables for a connection string, else the embedded one.
pub fn open_tables(storage: &StorageSettings) -> Result<Tables> {
    Ok(match storage {
        StorageSettings::Azure { connection_string } => {
            Tables::new(AzureTables::from_connection_string(connection_string)?)
        }
        StorageSettings::Embedded { data_dir, durability } => {
            Tables::new(SqliteTables::open(data_dir.join("tabletalk.sqlite"), *durability)?)
        }
    })
}

/// What the service-level tests share: a scratch embedded store and a room in it.
#[cfg(test)]
pub(crate) mod testing {
    use super::Chat;
    use crate::auth::Principal;
    use crate::ids::{RoomId, UserId};
    use crate::rooms::NewRoom;
    use crate::storage::Tables;
    use crate::storage::sqlite::{Durability, SqliteTables};
    use crate::store::Schema;

    pub fn user(id: &str) -> Principal {
        Principal {
            user_id: UserId::parse(id).unwrap(),
            name: id.to_uppercase(),
        }
    }

    pub fn alice() -> Principal {
        user("alice")
    }

    pub fn store() -> SqliteTables {
        let dir = std::env::temp_dir().join(format!("tt-svc-{}", uuid::Uuid::new_v4()));
        SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap()
    }

    /// The service over `tables`, with a room alice owns.
    pub async fn chat_on(tables: Tables) -> (Chat, RoomId) {
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let room = chat
            .create_room(
                &alice(),
                NewRoom {
                    name: "r".into(),
                    description: None,
                },
            )
            .await
            .unwrap();
        (chat, RoomId::parse(&room.id).unwrap())
    }
}
