//! The composition root: the settings choose the store's backend (Azure Tables for a
//! connection string, else the embedded SQLite store) and the adapters (Azure Web PubSub, an
//! Event Grid topic, Web Push through the SSRF-safe client, the object store for attachments:
//! Blob Storage or files under the data directory), and the service is assembled from
//! them. Nothing below this module decides what it runs on.

use std::sync::Arc;

use tabletalk::Chat;
use tabletalk::adapters::clock::{Clock, FileClock, SystemClock};
use tabletalk::adapters::events::EventGrid;
use tabletalk::adapters::link_preview::{self, PreviewFetcher};
use tabletalk::adapters::live::web_pubsub::WebPubSub;
use tabletalk::adapters::objects::Objects;
use tabletalk::adapters::objects::azure_blob::AzureBlobObjects;
use tabletalk::adapters::objects::embedded::EmbeddedObjects;
use tabletalk::adapters::outbound::{OutboundClient, Reach};
use tabletalk::adapters::push::{PushSender, REQUEST_TIMEOUT};
use tabletalk::config::{Settings, StorageSettings};
use tabletalk::notify::PushSettings;
use tabletalk::service::attachments::AttachmentSettings;
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

/// The object store for attachments: Blob Storage for a blob connection string, else files
/// under the data directory with links served by this binary at `public_url`.
pub async fn attachments(settings: &Settings) -> Result<AttachmentSettings, String> {
    let config = &settings.attachments;
    let (objects, embedded) = match &config.blob_connection {
        Some(connection) => (
            Objects::new(
                AzureBlobObjects::with_identity(connection, &config.container, || {
                    tabletalk::storage::azure::identity::managed_identity()
                        .map_err(|e| tabletalk::Error::Unavailable(e.to_string()))
                })
                .map_err(|e| e.to_string())?,
            ),
            None,
        ),
        None => {
            let public_url = config.public_url.as_deref().unwrap_or("http://127.0.0.1:7071");
            let store = EmbeddedObjects::open(&config.data_dir, public_url).map_err(|e| e.to_string())?;
            (Objects::new(store.clone()), Some(store))
        }
    };
    objects.prepare().await.map_err(|e| e.to_string())?;
    Ok(AttachmentSettings {
        objects,
        embedded,
        rules: config.rules.clone(),
        clock: clock(settings),
    })
}

/// The clock of everything that reads the time through one (the limits, scheduled messages,
/// attachment links): the system's, or in tests the file both processes of a test share.
fn clock(settings: &Settings) -> Arc<dyn Clock> {
    match &settings.test_clock_file {
        Some(path) => Arc::new(FileClock::new(path)),
        None => Arc::new(SystemClock),
    }
}

/// The origins the web page may connect to besides its own: the attachment store's blob
/// endpoint and the live channel's WebSocket endpoint, when they are Azure services.
pub fn page_origins(settings: &Settings) -> Result<Vec<String>, String> {
    let mut origins = Vec::new();
    if let Some(connection) = &settings.attachments.blob_connection {
        origins.push(tabletalk::adapters::objects::azure_blob::origin_of(connection).map_err(|e| e.to_string())?);
    }
    if let Some(connection) = &settings.web_pubsub_connection {
        let web_pubsub =
            WebPubSub::from_connection_string(connection, &settings.web_pubsub_hub).map_err(|e| e.to_string())?;
        origins.push(web_pubsub.client_origin());
    }
    // The embedded object store's links name the public URL, which may not be the address the
    // page was opened at.
    let public = settings.attachments.public_url.as_deref();
    if let Some(url) = public.and_then(|url| url.parse::<axum::http::Uri>().ok())
        && let (Some(scheme), Some(authority)) = (url.scheme_str(), url.authority())
    {
        origins.push(format!("{scheme}://{authority}"));
    }
    Ok(origins)
}

/// The service the settings describe.
pub async fn chat(settings: &Settings) -> Result<Chat, String> {
    let schema = Schema::with_prefix(&settings.table_prefix).map_err(|e| e.to_string())?;
    let mut chat = Chat::open(tables(&settings.storage)?, schema)
        .await
        .map_err(|e| e.to_string())?
        .with_workspace(&settings.workspace_id);
    if let Some(url) = settings
        .attachments
        .public_url
        .as_ref()
        .or(settings.azure_site_url.as_ref())
    {
        chat = chat.with_public_url(url);
    }
    if let Some(connection) = &settings.web_pubsub_connection {
        let web_pubsub = WebPubSub::from_connection_string(connection, &settings.web_pubsub_hub)
            .map_err(|e| e.to_string())?
            .with_tasks(chat.supervisor().clone());
        chat = chat.with_upstream(web_pubsub.upstream());
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
    if let Some((endpoint, key)) = &settings.automation_event_grid {
        chat = chat
            .with_automation_topic(EventGrid::new(endpoint, key, &settings.workspace_id).map_err(|e| e.to_string())?);
    }
    // Outgoing webhooks reach what push endpoints may: public HTTPS only, unless the operator
    // allowed private endpoints (development).
    let sealing = settings
        .webhook_sealing_key
        .as_deref()
        .or(settings.auth.hs256_secret.as_deref());
    if let Some(material) = sealing {
        let reach = Reach::allowing_private(settings.push_allow_private_endpoints);
        let client =
            OutboundClient::new(reach, tabletalk::adapters::outgoing::REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
        chat = chat.with_outgoing_webhooks(tabletalk::adapters::outgoing::HookSender::new(
            client,
            tabletalk::adapters::outgoing::Sealer::new(material.as_bytes()),
        ));
    }
    if !settings.search_index {
        chat = chat.without_search_index();
    }
    chat = chat.with_erasure(settings.erasure);
    chat = chat.with_attachments(attachments(settings).await?);
    let clock = clock(settings);
    chat = chat.with_time(clock.clone());
    if settings.write_limits {
        let newcomer_period = chrono::Duration::from_std(settings.newcomer_period).map_err(|e| e.to_string())?;
        let thresholds = settings
            .trust_thresholds
            .unwrap_or_else(|| tabletalk::trust::Thresholds::defaults(newcomer_period));
        chat = chat.with_limits(LimitSettings { thresholds, clock });
    }
    if settings.link_previews {
        let reach = Reach::allowing_loopback(settings.link_previews_allow_loopback);
        let client = OutboundClient::new(reach, link_preview::REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
        chat = chat.with_previews(PreviewFetcher::new(client));
    }
    Ok(chat.with_push(PushSettings {
        sender,
        allow_private_endpoints: settings.push_allow_private_endpoints,
        claim_lease: settings.push_claim_lease,
        ..PushSettings::default()
    }))
}
