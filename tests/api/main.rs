//! End-to-end tests: the real `tabletalk` binary, started on a random port with its own
//! storage, driven over HTTP. Each test runs on the embedded store and on Azurite.

mod bad_input;
mod bad_input_operations;
mod changes;
mod deploy;
mod edits_and_deletes;
mod entra;
mod events;
mod forwards;
mod helpers;
mod infra;
mod lambda;
mod live;
mod mentions;
mod messages;
mod permissions;
mod pins;
mod polls;
mod push;
mod push_endpoints;
mod reactions;
mod room_admin;
mod rooms;
mod send_checks;
mod serve;
mod threads;
mod web_pubsub_client;
