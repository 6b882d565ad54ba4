//! Service-level tests of the send and read paths, of rooms and of erasure, on a real
//! embedded store, with faults injected where a failure path needs one.

#[macro_use]
mod counting;
mod activity;
mod attachments;
mod erasure;
mod fan_out;
mod limits;
mod messages;
mod moderation;
mod notices;
mod notify;
mod outgoing;
mod pins;
mod presence;
mod previews;
mod room_list;
mod rooms;
mod round_trips;
mod scheduled;
mod search;
