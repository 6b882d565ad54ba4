//! tabletalk's domain, pure: ids and keys, the models (rooms, members, roles, messages, polls,
//! reactions, subscriptions), the rules (who may do what — `access` and the operation map in
//! `messages::operations` —, the send checks, content validation, the word filter, HTML
//! sanitizing), the change feed's cursors and wire types, and the event and signal types.
//! Nothing here does I/O or knows a table: the store and the adapters depend on this crate,
//! never the other way round.

pub mod access;
pub mod attachments;
pub mod commands;
pub mod emoji;
pub mod erasure;
pub mod error;
pub mod events;
pub mod html;
pub mod ids;
pub mod keys;
pub mod limits;
pub mod markdown;
pub mod members;
pub mod messages;
pub mod moderation;
pub mod outgoing;
pub mod permissions;
pub mod presence;
pub mod principal;
pub mod reports;
pub mod roles;
pub mod rooms;
pub mod scheduled;
pub mod search;
pub mod signals;
pub mod slash;
pub mod subscriptions;
pub mod text;
pub mod trust;
pub mod webhooks;
pub mod word_filter;

pub use error::{Error, Result};
