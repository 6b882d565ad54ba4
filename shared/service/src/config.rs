//! Configuration: app settings as Azure Functions passes them (environment variables), with the
//! local server also reading the `Values` of `local.settings.json`. Every setting is named here
//! once, with what it does and when it applies.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::sqlite::Durability;

/// Azure Table connection string (Azure, Azurite via `UseDevelopmentStorage=true`, or Cosmos DB
/// for Table). Empty or absent: the embedded store.
pub const STORAGE_CONNECTION: &str = "TABLETALK_STORAGE_CONNECTION";
/// Directory of the embedded store. Default `data`.
pub const DATA_DIR: &str = "TABLETALK_DATA_DIR";
/// Embedded store durability: `full` (default; fsync every commit) or `normal`.
pub const SQLITE_SYNC: &str = "TABLETALK_SQLITE_SYNC";
/// Prefix for every table name (letters and digits), to share one account between deployments.
pub const TABLE_PREFIX: &str = "TABLETALK_TABLE_PREFIX";
/// HS256 secret for bearer tokens (local use and tests).
pub const JWT_SECRET: &str = "TABLETALK_JWT_SECRET";
/// The `TABLETALK_JWT_SECRET` of the repository's `local.settings.json`. It is published, so
/// anyone can sign tokens with it: fine on loopback, refused on any address others can reach
/// (`AuthSettings::check_listen_address`).
pub const DEVELOPMENT_JWT_SECRET: &str = "local-development-secret-not-for-production";
/// URL of a JWKS with RS256 keys for bearer tokens (production).
pub const JWKS_URL: &str = "TABLETALK_JWKS_URL";
/// Required `iss` of bearer tokens; must be set with `TABLETALK_JWKS_URL`.
pub const JWT_ISSUER: &str = "TABLETALK_JWT_ISSUER";
/// Required `aud` of bearer tokens; must be set with `TABLETALK_JWKS_URL`.
pub const JWT_AUDIENCE: &str = "TABLETALK_JWT_AUDIENCE";

/// The workspace id `messageChanges` accepts as its `serverId` (tabletalk has no workspaces of
/// its own; the field is kept for clients of the change-feed contract). Default `default`.
pub const WORKSPACE_ID: &str = "TABLETALK_WORKSPACE_ID";
/// Seconds between housekeeping runs (retention purge, expired idempotency records) in the
/// local server. Default 60; `0` turns it off. On Azure a timer function runs it instead.
pub const HOUSEKEEPING_SECONDS: &str = "TABLETALK_HOUSEKEEPING_SECONDS";

/// The VAPID private key for Web Push: 32 bytes of a P-256 key, base64url. Absent: no push.
pub const VAPID_PRIVATE_KEY: &str = "TABLETALK_VAPID_PRIVATE_KEY";
/// The contact push services see in VAPID tokens (`mailto:` or `https:`).
pub const VAPID_SUBJECT: &str = "TABLETALK_VAPID_SUBJECT";
/// Development only: `true` accepts `http` and loopback/private push endpoints.
pub const PUSH_ALLOW_PRIVATE_ENDPOINTS: &str = "TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS";
/// Seconds a notification run's claim on an event holds off other deliveries of it between
/// renewals (the run renews it while it pushes). Default 180; tests shorten it.
pub const PUSH_CLAIM_LEASE_SECONDS: &str = "TABLETALK_PUSH_CLAIM_LEASE_SECONDS";

/// Rows an erasure reads per batch before it records its checkpoint. Default 100.
pub const ERASURE_BATCH: &str = "TABLETALK_ERASURE_BATCH";
/// Milliseconds an erasure pauses after each batch, so it never crowds out live traffic.
/// Default 50.
pub const ERASURE_PAUSE_MS: &str = "TABLETALK_ERASURE_PAUSE_MS";
/// Seconds an erasure stays with its process between checkpoints; once lapsed (the process
/// died) the next housekeeping run takes it over. Default 60; tests shorten it.
pub const ERASURE_LEASE_SECONDS: &str = "TABLETALK_ERASURE_LEASE_SECONDS";
/// The limits against abuse on members' writes: `on` (default) or `off` (benchmarks and load
/// tests that measure the store, not the limits; never in front of real users).
pub const WRITE_LIMITS: &str = "TABLETALK_WRITE_LIMITS";
/// Link previews of members' messages (the server fetches each message's first link): `on`
/// (default) or `off`.
pub const LINK_PREVIEWS: &str = "TABLETALK_LINK_PREVIEWS";
/// `on` (default) or `off`: whether messages are written to the word index search reads.
pub const SEARCH_INDEX: &str = "TABLETALK_SEARCH_INDEX";
/// Development and tests only: `true` lets link previews fetch pages on IPv4 loopback
/// (127.0.0.0/8), and no other private address, so a redirect elsewhere is still refused.
pub const LINK_PREVIEWS_ALLOW_LOOPBACK: &str = "TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK";
/// Seconds after joining a room during which a member is a newcomer there (trust level 0: a
/// lower write rate in it, and no `@everyone`, `@here`, links or files). Default 600; `0`: no
/// newcomers. It is level 1's time in the default trust thresholds (unused when
/// `TRUST_THRESHOLDS` is set).
pub const NEWCOMER_SECONDS: &str = "TABLETALK_NEWCOMER_SECONDS";
/// The trust thresholds of levels 1, 2 and 3 (`crate::trust`), as JSON: an array of three
/// `{"joinedSeconds", "messages", "activeDays"}`, each at least the one before. Rooms may
/// override them. Default: level 1 after the newcomer period; 2 after a day, 10 messages on 2
/// days; 3 after a week, 50 messages on 4 days.
pub const TRUST_THRESHOLDS: &str = "TABLETALK_TRUST_THRESHOLDS";
/// Tests only: a file holding the Unix milliseconds the limits take as the time, read on every
/// write, so an end-to-end test moves time without sleeping and two processes share it.
/// Honoured only with the published development secret (`DEVELOPMENT_JWT_SECRET`), with which
/// anyone can sign tokens as anyone anyway, so it adds no power a deployment with a secret of
/// its own could be tricked into; with any other secret the server refuses to start.
pub const TEST_CLOCK_FILE: &str = "TABLETALK_TEST_CLOCK_FILE";

/// Azure Web PubSub connection string (`Endpoint=…;AccessKey=…;Version=1.0;`).
pub const WEBPUBSUB_CONNECTION: &str = "TABLETALK_WEBPUBSUB_CONNECTION";
/// The Web PubSub hub. Default `chat`.
pub const WEBPUBSUB_HUB: &str = "TABLETALK_WEBPUBSUB_HUB";

/// The Event Grid custom topic endpoint message events are published to
/// (`https://<topic>.<region>-1.eventgrid.azure.net/api/events`; `?api-version=2018-01-01` is
/// added when absent). Absent: events go straight to
/// the in-process notification consumer.
pub const EVENTGRID_ENDPOINT: &str = "TABLETALK_EVENTGRID_ENDPOINT";
/// The topic's access key (sent as `aeg-sas-key`).
pub const EVENTGRID_KEY: &str = "TABLETALK_EVENTGRID_KEY";

/// The key outgoing webhooks' secrets are sealed with (any long random string; keep it in Key
/// Vault). Absent: a key derived from `TABLETALK_JWT_SECRET`; with neither, outgoing webhooks
/// are off (their routes answer 503). Changing it makes every stored secret unusable.
pub const WEBHOOK_SEALING_KEY: &str = "TABLETALK_WEBHOOK_SEALING_KEY";
/// The Event Grid custom topic automation events are published to (docs/AUTOMATION_EVENTS.md),
/// and its access key. Absent: no automation events.
pub const AUTOMATION_EVENTGRID_ENDPOINT: &str = "TABLETALK_AUTOMATION_EVENTGRID_ENDPOINT";
pub const AUTOMATION_EVENTGRID_KEY: &str = "TABLETALK_AUTOMATION_EVENTGRID_KEY";

/// Blob Storage connection string for attachments (`UseDevelopmentStorage=true` for Azurite,
/// or `AccountName=..;AccountKey=..[;BlobEndpoint=..]`). Empty or absent: attachments are files
/// under the data directory, with links served by this binary.
pub const BLOB_CONNECTION: &str = "TABLETALK_BLOB_CONNECTION";
/// The blob container attachments go in. Default `attachments`.
pub const ATTACHMENTS_CONTAINER: &str = "TABLETALK_ATTACHMENTS_CONTAINER";
/// Largest attachment, in bytes. Default 10485760 (10 MiB).
pub const ATTACHMENT_MAX_BYTES: &str = "TABLETALK_ATTACHMENT_MAX_BYTES";
/// The attachment types allowed, comma-separated. Default
/// `image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain`.
pub const ATTACHMENT_TYPES: &str = "TABLETALK_ATTACHMENT_TYPES";
/// The base URL clients reach this server at: the links of the embedded object store, and the
/// `response_url` a room's own slash commands answer later at. Default: self-hosted
/// `http://<the address it listens on>`; in a Functions app running on Azure, the app's own
/// `https://<WEBSITE_HOSTNAME>` for the `response_url` only.
pub const PUBLIC_URL: &str = "TABLETALK_PUBLIC_URL";

/// Where attachments are stored and what may be uploaded. Its `Debug` leaves the connection
/// string out.
#[derive(Clone)]
pub struct AttachmentConfig {
    pub blob_connection: Option<String>,
    pub container: String,
    pub rules: crate::attachments::AttachmentRules,
    /// The embedded store's directory (the data directory).
    pub data_dir: PathBuf,
    pub public_url: Option<String>,
}

impl fmt::Debug for AttachmentConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttachmentConfig")
            .field("blob_connection", &redacted(&self.blob_connection))
            .field("container", &self.container)
            .field("rules", &self.rules)
            .field("data_dir", &self.data_dir)
            .field("public_url", &self.public_url)
            .finish()
    }
}

/// Where messages and everything else are stored. Its `Debug` leaves the connection string out
/// (it may hold the account key).
#[derive(Clone)]
pub enum StorageSettings {
    Azure { connection_string: String },
    Embedded { data_dir: PathBuf, durability: Durability },
}

/// How bearer tokens are verified. Both may be configured; a token's `alg` picks. Its `Debug`
/// leaves the secret out.
#[derive(Clone, Default)]
pub struct AuthSettings {
    pub hs256_secret: Option<String>,
    pub jwks_url: Option<String>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
}

impl AuthSettings {
    /// Refuses to listen on `ip` when it is not a loopback address and tokens are checked with
    /// the published development secret: whoever can reach the address could sign in as anyone.
    pub fn check_listen_address(&self, ip: IpAddr) -> Result<()> {
        if ip.is_loopback() || self.hs256_secret.as_deref() != Some(DEVELOPMENT_JWT_SECRET) {
            return Ok(());
        }
        Err(config_error(
            JWT_SECRET,
            &format!(
                "refusing to listen on {ip} with the development secret of local.settings.json: it is published, so anyone reaching this address could sign tokens as any user; set a secret of your own, or listen on loopback (the default)"
            ),
        ))
    }
}

impl Settings {
    /// Refuses to listen on `ip` when it is not a loopback address and a development-only
    /// setting is on: the published development secret (anyone could sign in as anyone), private
    /// push and webhook endpoints (any user could make the server reach the metadata service or
    /// scan the private network), link previews of loopback pages. `local.settings.json` turns
    /// some of these on, so a server started with it on a reachable address must turn them off.
    pub fn check_listen_address(&self, ip: IpAddr) -> Result<()> {
        self.auth.check_listen_address(ip)?;
        let development_only = [
            (PUSH_ALLOW_PRIVATE_ENDPOINTS, self.push_allow_private_endpoints),
            (LINK_PREVIEWS_ALLOW_LOOPBACK, self.link_previews_allow_loopback),
        ];
        match development_only.into_iter().find(|(_, on)| *on && !ip.is_loopback()) {
            None => Ok(()),
            Some((name, _)) => Err(config_error(
                name,
                &format!(
                    "refusing to listen on {ip} with this development-only setting on: anyone reaching this address could make the server connect to private addresses; set it to false, or listen on loopback (the default)"
                ),
            )),
        }
    }
}

/// Every setting. Its `Debug` shows which secrets are set, never what they are, so settings can
/// appear in logs and test failures.
#[derive(Clone)]
pub struct Settings {
    pub storage: StorageSettings,
    pub table_prefix: String,
    pub auth: AuthSettings,
    pub workspace_id: String,
    /// `None`: the local server runs no housekeeping of its own.
    pub housekeeping_interval: Option<std::time::Duration>,
    pub vapid_private_key: Option<String>,
    pub vapid_subject: String,
    pub push_allow_private_endpoints: bool,
    pub push_claim_lease: std::time::Duration,
    pub web_pubsub_connection: Option<String>,
    pub web_pubsub_hub: String,
    /// The Event Grid topic: endpoint and key.
    pub event_grid: Option<(String, String)>,
    /// How erasures run.
    pub erasure: crate::erasure::ErasureSettings,
    /// Whether members' writes are limited.
    pub write_limits: bool,
    /// Whether members' links get previews.
    pub link_previews: bool,
    /// Whether messages are written to the word index.
    pub search_index: bool,
    /// Development only: link previews may fetch from IPv4 loopback.
    pub link_previews_allow_loopback: bool,
    /// How long a member is a newcomer in a room they joined (zero: never).
    pub newcomer_period: std::time::Duration,
    /// The trust thresholds set for the server, if set.
    pub trust_thresholds: Option<crate::trust::Thresholds>,
    /// Tests only: the file the limits read the time from.
    pub test_clock_file: Option<PathBuf>,
    /// Attachments: the object store and the rules.
    pub attachments: AttachmentConfig,
    /// What outgoing webhooks' secrets are sealed with (`TABLETALK_WEBHOOK_SEALING_KEY`).
    pub webhook_sealing_key: Option<String>,
    /// The automation events' topic: endpoint and key.
    pub automation_event_grid: Option<(String, String)>,
    /// Where a Functions app running on Azure is reached (`https://<WEBSITE_HOSTNAME>`; Azure
    /// sets `WEBSITE_INSTANCE_ID` there, and Core Tools on a developer's machine does not).
    pub azure_site_url: Option<String>,
}

/// How a secret appears in `Debug` output: whether it is set, never its value.
fn redacted<T>(secret: &Option<T>) -> &'static str {
    match secret {
        Some(_) => "<redacted>",
        None => "None",
    }
}

impl fmt::Debug for StorageSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageSettings::Azure { .. } => f
                .debug_struct("Azure")
                .field("connection_string", &"<redacted>")
                .finish(),
            StorageSettings::Embedded { data_dir, durability } => f
                .debug_struct("Embedded")
                .field("data_dir", data_dir)
                .field("durability", durability)
                .finish(),
        }
    }
}

impl fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthSettings")
            .field("hs256_secret", &redacted(&self.hs256_secret))
            .field("jwks_url", &self.jwks_url)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("storage", &self.storage)
            .field("table_prefix", &self.table_prefix)
            .field("auth", &self.auth)
            .field("workspace_id", &self.workspace_id)
            .field("housekeeping_interval", &self.housekeeping_interval)
            .field("vapid_private_key", &redacted(&self.vapid_private_key))
            .field("vapid_subject", &self.vapid_subject)
            .field("push_allow_private_endpoints", &self.push_allow_private_endpoints)
            .field("push_claim_lease", &self.push_claim_lease)
            .field("erasure", &self.erasure)
            .field("web_pubsub_connection", &redacted(&self.web_pubsub_connection))
            .field("web_pubsub_hub", &self.web_pubsub_hub)
            .field("write_limits", &self.write_limits)
            .field("link_previews", &self.link_previews)
            .field("search_index", &self.search_index)
            .field("link_previews_allow_loopback", &self.link_previews_allow_loopback)
            .field("newcomer_period", &self.newcomer_period)
            .field("trust_thresholds", &self.trust_thresholds)
            .field("test_clock_file", &self.test_clock_file)
            .field("attachments", &self.attachments)
            .field(
                "event_grid",
                &self
                    .event_grid
                    .as_ref()
                    .map(|(endpoint, _key)| (endpoint, "<redacted>")),
            )
            .field("webhook_sealing_key", &redacted(&self.webhook_sealing_key))
            .field("azure_site_url", &self.azure_site_url)
            .field(
                "automation_event_grid",
                &self
                    .automation_event_grid
                    .as_ref()
                    .map(|(endpoint, _key)| (endpoint, "<redacted>")),
            )
            .finish()
    }
}

impl Settings {
    /// Reads settings from `values` (later sources already merged over earlier ones).
    pub fn from_values(values: &HashMap<String, String>) -> Result<Settings> {
        // App Service hands an unresolved Key Vault reference over as its own text: say so
        // rather than failing later on a "malformed" value.
        if let Some((name, _)) = values.iter().find(|(name, value)| {
            name.starts_with("TABLETALK_") && value.trim_start().starts_with("@Microsoft.KeyVault(")
        }) {
            return Err(config_error(
                name,
                "is an unresolved Key Vault reference: the app's identity cannot read the secret (yet); check its Key Vault Secrets User role and the secret's name",
            ));
        }
        let get = |name: &str| values.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let storage = match get(STORAGE_CONNECTION) {
            Some(connection_string) => StorageSettings::Azure { connection_string },
            None => StorageSettings::Embedded {
                data_dir: PathBuf::from(get(DATA_DIR).unwrap_or_else(|| "data".into())),
                durability: match get(SQLITE_SYNC).as_deref() {
                    None | Some("full") => Durability::Full,
                    Some("normal") => Durability::Normal,
                    Some(other) => return Err(config_error(SQLITE_SYNC, &format!("{other:?} is not full or normal"))),
                },
            },
        };
        let table_prefix = get(TABLE_PREFIX).unwrap_or_default();
        if !table_prefix.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(config_error(TABLE_PREFIX, "only letters and digits are allowed"));
        }
        let auth = AuthSettings {
            hs256_secret: get(JWT_SECRET),
            jwks_url: get(JWKS_URL),
            issuer: get(JWT_ISSUER),
            audience: get(JWT_AUDIENCE),
        };
        if auth.hs256_secret.is_none() && auth.jwks_url.is_none() {
            return Err(config_error(
                JWT_SECRET,
                &format!("set it or {JWKS_URL} so callers can authenticate"),
            ));
        }
        // A JWKS's keys sign tokens for every application of the identity provider (every
        // tenant, for Entra ID's common keys): only the issuer and audience make one ours.
        if auth.jwks_url.is_some() {
            for (setting, value) in [(JWT_ISSUER, &auth.issuer), (JWT_AUDIENCE, &auth.audience)] {
                if value.is_none() {
                    return Err(config_error(
                        setting,
                        &format!(
                            "must be set with {JWKS_URL}: without it tokens issued for other applications would be accepted"
                        ),
                    ));
                }
            }
        }
        let housekeeping_interval = match get(HOUSEKEEPING_SECONDS).map(|s| s.parse::<u64>()) {
            None => Some(std::time::Duration::from_secs(60)),
            Some(Ok(0)) => None,
            Some(Ok(seconds)) => Some(std::time::Duration::from_secs(seconds)),
            Some(Err(_)) => return Err(config_error(HOUSEKEEPING_SECONDS, "must be a whole number of seconds")),
        };
        let push_claim_lease = match get(PUSH_CLAIM_LEASE_SECONDS).map(|s| s.parse::<u64>()) {
            None => crate::notify::CLAIM_LEASE,
            Some(Ok(seconds)) if seconds > 0 => std::time::Duration::from_secs(seconds),
            Some(_) => {
                return Err(config_error(
                    PUSH_CLAIM_LEASE_SECONDS,
                    "must be a positive whole number of seconds",
                ));
            }
        };
        let event_grid = match (get(EVENTGRID_ENDPOINT), get(EVENTGRID_KEY)) {
            (Some(endpoint), Some(key)) => Some((endpoint, key)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(config_error(
                    EVENTGRID_KEY,
                    "the topic's key must be set with its endpoint",
                ));
            }
            (None, Some(_)) => return Err(config_error(EVENTGRID_ENDPOINT, "must be set with the topic's key")),
        };
        let automation_event_grid = match (get(AUTOMATION_EVENTGRID_ENDPOINT), get(AUTOMATION_EVENTGRID_KEY)) {
            (Some(endpoint), Some(key)) => Some((endpoint, key)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(config_error(
                    AUTOMATION_EVENTGRID_KEY,
                    "the topic's key must be set with its endpoint",
                ));
            }
            (None, Some(_)) => {
                return Err(config_error(
                    AUTOMATION_EVENTGRID_ENDPOINT,
                    "must be set with the topic's key",
                ));
            }
        };
        let positive = |name: &str, default: u64| match get(name).map(|s| s.parse::<u64>()) {
            None => Ok(default),
            Some(Ok(n)) if n > 0 => Ok(n),
            Some(_) => Err(config_error(name, "must be a positive whole number")),
        };
        let erasure = crate::erasure::ErasureSettings {
            batch: positive(ERASURE_BATCH, 100)?.min(1000) as usize,
            pause: std::time::Duration::from_millis(match get(ERASURE_PAUSE_MS).map(|s| s.parse::<u64>()) {
                None => 50,
                Some(Ok(ms)) => ms,
                Some(Err(_)) => return Err(config_error(ERASURE_PAUSE_MS, "must be a whole number of milliseconds")),
            }),
            lease: std::time::Duration::from_secs(positive(ERASURE_LEASE_SECONDS, 60)?),
        };
        // A switch that is on unless set `off`.
        let on_unless_off = |name: &str| match get(name).as_deref() {
            None | Some("on") => Ok(true),
            Some("off") => Ok(false),
            Some(other) => Err(config_error(name, &format!("{other:?} is not on or off"))),
        };
        let write_limits = on_unless_off(WRITE_LIMITS)?;
        let link_previews = on_unless_off(LINK_PREVIEWS)?;
        let search_index = on_unless_off(SEARCH_INDEX)?;
        let link_previews_allow_loopback = match get(LINK_PREVIEWS_ALLOW_LOOPBACK).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(config_error(
                    LINK_PREVIEWS_ALLOW_LOOPBACK,
                    &format!("{other:?} is not true or false"),
                ));
            }
        };
        let newcomer_period = match get(NEWCOMER_SECONDS).map(|s| s.parse::<u32>()) {
            None => std::time::Duration::from_secs(600),
            Some(Ok(seconds)) => std::time::Duration::from_secs(u64::from(seconds)),
            Some(Err(_)) => return Err(config_error(NEWCOMER_SECONDS, "must be a whole number of seconds")),
        };
        let trust_thresholds = match get(TRUST_THRESHOLDS) {
            None => None,
            Some(json) => Some(
                serde_json::from_str::<crate::trust::Thresholds>(&json)
                    .map_err(|e| config_error(TRUST_THRESHOLDS, &e.to_string()))?,
            ),
        };
        let test_clock_file = get(TEST_CLOCK_FILE).map(PathBuf::from);
        if test_clock_file.is_some() && auth.hs256_secret.as_deref() != Some(DEVELOPMENT_JWT_SECRET) {
            return Err(config_error(
                TEST_CLOCK_FILE,
                "moves the limits' clock, for tests; it is honoured only with the development secret of local.settings.json",
            ));
        }
        let defaults = crate::attachments::AttachmentRules::default();
        let attachments = AttachmentConfig {
            blob_connection: get(BLOB_CONNECTION),
            container: get(ATTACHMENTS_CONTAINER).unwrap_or_else(|| "attachments".into()),
            rules: crate::attachments::AttachmentRules {
                max_bytes: positive(ATTACHMENT_MAX_BYTES, defaults.max_bytes)?,
                allowed_types: match get(ATTACHMENT_TYPES) {
                    Some(list) => list
                        .split(',')
                        .map(|t| t.trim().to_ascii_lowercase())
                        .filter(|t| !t.is_empty())
                        .collect(),
                    None => defaults.allowed_types,
                },
            },
            data_dir: PathBuf::from(get(DATA_DIR).unwrap_or_else(|| "data".into())),
            public_url: get(PUBLIC_URL),
        };
        Ok(Settings {
            webhook_sealing_key: get(WEBHOOK_SEALING_KEY),
            azure_site_url: get("WEBSITE_INSTANCE_ID")
                .and(get("WEBSITE_HOSTNAME"))
                .map(|host| format!("https://{host}")),
            automation_event_grid,
            attachments,
            erasure,
            write_limits,
            link_previews,
            search_index,
            link_previews_allow_loopback,
            newcomer_period,
            trust_thresholds,
            test_clock_file,
            event_grid,
            storage,
            table_prefix,
            auth,
            workspace_id: get(WORKSPACE_ID).unwrap_or_else(|| "default".into()),
            housekeeping_interval,
            web_pubsub_connection: get(WEBPUBSUB_CONNECTION),
            web_pubsub_hub: get(WEBPUBSUB_HUB).unwrap_or_else(|| "chat".into()),
            vapid_private_key: get(VAPID_PRIVATE_KEY),
            push_claim_lease,
            vapid_subject: get(VAPID_SUBJECT).unwrap_or_else(|| "mailto:admin@localhost".into()),
            push_allow_private_endpoints: match get(PUSH_ALLOW_PRIVATE_ENDPOINTS).as_deref() {
                None | Some("false") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(config_error(
                        PUSH_ALLOW_PRIVATE_ENDPOINTS,
                        &format!("{other:?} is not true or false"),
                    ));
                }
            },
        })
    }

    /// The process environment over the `Values` of a `local.settings.json`, if one is given.
    pub fn load(local_settings: Option<&Path>) -> Result<Settings> {
        let mut values = match local_settings {
            Some(path) => read_local_settings(path)?,
            None => HashMap::new(),
        };
        values.extend(std::env::vars());
        Settings::from_values(&values)
    }
}

fn config_error(setting: &str, problem: &str) -> Error {
    Error::Internal(format!("setting {setting}: {problem}"))
}

/// The `Values` object of an Azure Functions `local.settings.json`.
pub fn read_local_settings(path: &Path) -> Result<HashMap<String, String>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::Internal(format!("cannot read {}: {e}", path.display())))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Internal(format!("{} is not JSON: {e}", path.display())))?;
    let values = json
        .get("Values")
        .and_then(|v| v.as_object())
        .map(|values| {
            values
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Settings may be printed (logs, test failures): no secret's value ever appears.
    #[test]
    fn settings_print_without_their_secrets() {
        let secrets = [
            (
                STORAGE_CONNECTION,
                "AccountName=a;AccountKey=c3RvcmFnZS1rZXk=;TableEndpoint=https://a.example/",
            ),
            (JWT_SECRET, "hs256-secret-value"),
            (VAPID_PRIVATE_KEY, "vapid-private-key-value"),
            (
                WEBPUBSUB_CONNECTION,
                "Endpoint=https://w.example;AccessKey=web-pubsub-key;Version=1.0;",
            ),
            (EVENTGRID_ENDPOINT, "https://topic.example/api/events"),
            (EVENTGRID_KEY, "event-grid-key-value"),
        ];
        let printed = format!("{:?}", Settings::from_values(&values(&secrets)).unwrap());
        for secret in [
            "c3RvcmFnZS1rZXk=",
            "hs256-secret-value",
            "vapid-private-key-value",
            "web-pubsub-key",
            "event-grid-key-value",
        ] {
            assert!(!printed.contains(secret), "{secret} printed: {printed}");
        }
        assert!(
            printed.contains("https://topic.example/api/events"),
            "non-secrets still show: {printed}"
        );
    }

    /// App Service passes an unresolved Key Vault reference on as text: it is named as such.
    #[test]
    fn an_unresolved_key_vault_reference_is_named() {
        let reference = "@Microsoft.KeyVault(VaultName=v;SecretName=vapid-private-key)";
        let error = Settings::from_values(&values(&[(JWT_SECRET, "s"), (VAPID_PRIVATE_KEY, reference)]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(VAPID_PRIVATE_KEY) && error.contains("unresolved Key Vault reference"),
            "{error}"
        );
        assert!(Settings::from_values(&values(&[(JWT_SECRET, "s")])).is_ok());
    }

    /// Keys from a JWKS sign tokens for many applications of many tenants: without an issuer
    /// and an audience to check, any of those tokens would be accepted here.
    #[test]
    fn a_jwks_url_needs_an_issuer_and_an_audience() {
        let url = (JWKS_URL, "https://login.example/keys");
        let (issuer, audience) = ((JWT_ISSUER, "https://login.example/"), (JWT_AUDIENCE, "tabletalk"));
        for (missing, given) in [(JWT_ISSUER, audience), (JWT_AUDIENCE, issuer)] {
            let error = Settings::from_values(&values(&[url, given])).unwrap_err().to_string();
            assert!(error.contains(missing) && error.contains(JWKS_URL), "{error}");
        }
        let error = Settings::from_values(&values(&[url, (JWT_ISSUER, " "), audience]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(JWT_ISSUER), "a blank issuer is no issuer: {error}");
        assert!(Settings::from_values(&values(&[url, issuer, audience])).is_ok());
        // HS256 alone needs neither.
        assert!(Settings::from_values(&values(&[(JWT_SECRET, "s")])).is_ok());
    }

    #[test]
    fn the_development_secret_is_the_one_local_settings_publishes() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../local.settings.json");
        let values = read_local_settings(&file).unwrap();
        assert_eq!(values[JWT_SECRET], DEVELOPMENT_JWT_SECRET);
    }

    /// The test clock lets whoever sets it refill every bucket at will: only a server that
    /// already trusts anyone (the published development secret, loopback only) takes it.
    #[test]
    fn the_test_clock_needs_the_development_secret() {
        let clock = (TEST_CLOCK_FILE, "/tmp/clock");
        let error = Settings::from_values(&values(&[(JWT_SECRET, "own-secret"), clock]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(TEST_CLOCK_FILE), "{error}");
        let dev = Settings::from_values(&values(&[(JWT_SECRET, DEVELOPMENT_JWT_SECRET), clock])).unwrap();
        assert_eq!(dev.test_clock_file, Some(PathBuf::from("/tmp/clock")));
    }

    #[test]
    fn limits_are_on_with_ten_newcomer_minutes_unless_set() {
        let default = Settings::from_values(&values(&[(JWT_SECRET, "s")])).unwrap();
        assert!(default.write_limits);
        assert_eq!(default.newcomer_period, std::time::Duration::from_secs(600));
        let set = Settings::from_values(&values(&[
            (JWT_SECRET, "s"),
            (WRITE_LIMITS, "off"),
            (NEWCOMER_SECONDS, "0"),
        ]))
        .unwrap();
        assert!(!set.write_limits);
        assert_eq!(set.newcomer_period, std::time::Duration::ZERO);
        for (setting, bad) in [(WRITE_LIMITS, "maybe"), (NEWCOMER_SECONDS, "-1")] {
            let error = Settings::from_values(&values(&[(JWT_SECRET, "s"), (setting, bad)]))
                .unwrap_err()
                .to_string();
            assert!(error.contains(setting), "{error}");
        }
    }

    #[test]
    fn event_grid_needs_its_endpoint_and_key_together() {
        let endpoint = (
            EVENTGRID_ENDPOINT,
            "https://t.westeurope-1.eventgrid.azure.net/api/events",
        );
        assert!(Settings::from_values(&values(&[(JWT_SECRET, "s"), endpoint])).is_err());
        let both = Settings::from_values(&values(&[(JWT_SECRET, "s"), endpoint, (EVENTGRID_KEY, "k")])).unwrap();
        assert!(both.event_grid.is_some());
        let empty = Settings::from_values(&values(&[
            (JWT_SECRET, "s"),
            (EVENTGRID_ENDPOINT, ""),
            (EVENTGRID_KEY, ""),
        ]));
        assert!(empty.unwrap().event_grid.is_none(), "empty settings are unset");
    }
}
