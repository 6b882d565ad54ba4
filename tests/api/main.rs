//! End-to-end tests: the real `tabletalk` binary, started on a random port with its own
//! storage, driven over HTTP. Each test runs on the embedded store and on Azurite.

mod bad_input;
mod bad_input_operations;
mod changes;
mod deploy;
mod entra;
mod events;
mod forwards;
mod helpers;
mod infra;
mod lambda;
mod live;
mod messages;
mod operations;
mod permissions;
mod push;
mod push_endpoints;
mod room_admin;
mod rooms;
mod send_checks;
mod serve;
mod web_pubsub_client;
