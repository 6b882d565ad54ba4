//! tabletalk's service crate: the use cases (`service`), with authentication (`auth`) and
//! configuration (`config`). The layers below are crates of their own, each in the folder of
//! its name under `shared/`: the pure domain (`tabletalk-domain`), table storage
//! (`tabletalk-tables`), the store (`tabletalk-store`, the only code that knows tables), the
//! adapters (`tabletalk-adapters`: the live channel, the event sink, push delivery, the
//! SSRF-safe client, the object store) and the notification consumer (`tabletalk-notify`).
//! They are re-exported so that callers name one crate. No HTTP framework types live here:
//! `functions/` adapts HTTP and triggers to what this crate offers.

pub mod auth;
pub mod config;
pub mod service;

pub use tabletalk_adapters as adapters;
pub use tabletalk_domain::erasure;
pub use tabletalk_domain::messages::previews;
pub use tabletalk_domain::outgoing;
pub use tabletalk_domain::presence;
pub use tabletalk_domain::scheduled;
pub use tabletalk_domain::webhooks;
pub use tabletalk_domain::{
    Error, Result, access, attachments, error, events, html, ids, keys, limits, members, messages, permissions,
    principal, roles, rooms, signals, subscriptions, text, word_filter,
};
pub use tabletalk_domain::{commands, emoji, markdown, moderation, reports, search, slash, trust};
pub use tabletalk_notify as notify;
pub use tabletalk_store as store;
pub use tabletalk_tables as storage;

pub use service::Chat;
