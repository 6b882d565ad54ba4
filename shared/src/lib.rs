//! tabletalk's library: the domain, table storage, and the message service (the one door every
//! message goes through). No HTTP framework types live here; `functions/` adapts HTTP and
//! triggers to what this crate offers.

pub mod keys;
pub mod storage;
