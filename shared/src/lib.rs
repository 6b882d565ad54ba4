//! tabletalk's service crate: the store (`store`, the only code that knows tables), the
//! adapters (`adapters`: the live channel, the event sink, push delivery, the SSRF-safe
//! client), the notification consumer (`notify`) and `Chat`, the façade every use case goes
//! through (`service`), with authentication (`auth`) and configuration (`config`). The pure
//! domain is the `tabletalk-domain` crate and table storage the `tabletalk-tables` crate; both
//! are re-exported so that callers name one crate. No HTTP framework types live here:
//! `functions/` adapts HTTP and triggers to what this crate offers.

pub mod adapters;
pub mod auth;
pub mod config;
pub mod notify;
pub mod service;

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
pub use tabletalk_domain::{moderation, reports};
pub use tabletalk_store as store;
pub use tabletalk_tables as storage;

pub use service::Chat;
