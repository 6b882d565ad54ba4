//! Service-level tests of the send and read paths and of rooms, on a real embedded store,
//! with faults injected where a failure path needs one.

mod limits;
mod messages;
mod rooms;
