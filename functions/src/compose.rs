//! The composition root: the settings choose the store's backend (Azure Tables for a
//! connection string, else the embedded SQLite store) and the adapters (Azure Web PubSub, an
//! Event Grid topic, Web Push through the SSRF-safe client), and the service is assembled from
//! them. Nothing below this module decides what it runs on.

use std::sync::Arc;

use tabletalk::Chat;
use tabletalk::adapters::clock::{Clock, FileClock, SystemClock};
use tabletalk::adapters::events::EventGrid;
use tabletalk::adapters::live::web_pubsub::WebPubSub;
use tabletalk::adapters::outbound::{OutboundClient, Reach};
use tabletalk::adapters::push::{PushSender, REQUEST_TIMEOUT};
use tabletalk::config::{Settings, StorageSettings};
use tabletalk::notify::PushSettings;
use tabletalk::service::limits::LimitSettings;
use tabletalk::storage::Tables;
use tabletalk::storage::azure::AzureTables;
use tabletalk::storage::sqlite::SqliteTables;
use tabletalk::store::Schema;

/// The store the settings name: Azure Tables for a connection string, else the embedded one.
pub fn tables(storage: &StorageSettings) -> Result<Tables, String> {
    Ok(match storage {
        StorageSettings::Azure { connection_string } => {
            Tables::new(AzureTables::from_connection_string(connection_string).map_err(|e| e.to_string())?)
        }
        StorageSettings::Embedded { data_dir, durability } => {
            Tables::new(SqliteTables::open(data_dir.join("tabletalk.sqlite"), *durability).map_err(|e| e.to_string())?)
        }
    })
}

/// The service the settings describe.
pub async fn chat(settings: &Settings) -> Result<Chat, String> {
    let schema = Schema::with_prefix(&settings.table_prefix).map_err(|e| e.to_string())?;
    let mut chat = Chat::open(tables(&settings.storage)?, schema)
        .await
        .map_err(|e| e.to_string())?
        .with_workspace(&settings.workspace_id);
    if let Some(connection) = &settings.web_pubsub_connection {
        let web_pubsub =
            WebPubSub::from_connection_string(connection, &settings.web_pubsub_hub).map_err(|e| e.to_string())?;
        chat = chat.with_live(Arc::new(Arc::new(web_pubsub)));
    }
    if let Some((endpoint, key)) = &settings.event_grid {
        chat = chat.with_event_grid(EventGrid::new(endpoint, key, &settings.workspace_id).map_err(|e| e.to_string())?);
    }
    let sender = match &settings.vapid_private_key {
        Some(key) => {
            let reach = Reach::allowing_private(settings.push_allow_private_endpoints);
            let client = OutboundClient::new(reach, REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
            Some(
                PushSender::new(key, &settings.vapid_subject)
                    .map_err(|e| e.to_string())?
                    .with_client(client),
            )
        }
        None => None,
    };
    chat = chat.with_erasure(settings.erasure);
    let clock: Arc<dyn Clock> = match &settings.test_clock_file {
        Some(path) => Arc::new(FileClock::new(path)),
        None => Arc::new(SystemClock),
    };
    chat = chat.with_time(clock.clone());
    if settings.write_limits {
        let newcomer_period = chrono::Duration::from_std(settings.newcomer_period).map_err(|e| e.to_string())?;
        chat = chat.with_limits(LimitSettings { newcomer_period, clock });
    }
    Ok(chat.with_push(PushSettings {
        sender,
        allow_private_endpoints: settings.push_allow_private_endpoints,
        claim_lease: settings.push_claim_lease,
        ..PushSettings::default()
    }))
}
