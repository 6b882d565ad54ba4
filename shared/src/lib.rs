//! tabletalk's library: the domain and the message service (the one door every message goes
//! through), over table storage (the `tabletalk-tables` crate, re-exported as `storage`). No HTTP framework types live here; `functions/` adapts HTTP and
//! triggers to what this crate offers.

pub mod access;
pub mod adapters;
pub mod auth;
pub mod config;
pub mod error;
pub mod events;
pub mod housekeeping;
pub mod html;
pub mod ids;
pub mod keys;
pub mod members;
pub mod messages;
pub mod notify;
pub mod outbox;
pub mod permissions;
pub mod push;
pub mod roles;
pub mod rooms;
pub mod service;
pub mod signals;
pub mod store;
pub(crate) mod text;
pub mod word_filter;

pub use tabletalk_tables as storage;

pub use error::{Error, Result};
pub use service::Chat;
