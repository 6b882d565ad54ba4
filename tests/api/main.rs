//! End-to-end tests: the real `tabletalk` binary, started on a random port with its own
//! storage, driven over HTTP. A test that holds on both stores is written once, as an
//! `async fn(Backend)`, and `helpers::backend_tests!` makes it two tests, `<file>::embedded::<name>`
//! and `<file>::azurite::<name>`; the rest run on the embedded store alone. Files are named after
//! what the user does; the requests and stand-ins several of them need live in `helpers`.

mod api_reference;
mod attachments;
mod automation_events;
mod bad_input;
mod bad_input_operations;
mod changes;
mod commands;
mod deploy;
mod direct_messages;
mod edits_and_deletes;
mod entra;
mod erasure;
mod events;
mod finding;
mod follows;
mod forwards;
mod helpers;
mod infra;
mod lambda;
mod limits;
mod live;
mod markdown;
mod mentions;
mod messages;
mod moderation_log;
mod notification_rules;
mod object_store;
mod outgoing_webhooks;
mod ownership;
mod permissions;
mod pins;
mod polls;
mod presence;
mod previews;
mod privacy;
mod push;
mod push_endpoints;
mod reactions;
mod receipts;
mod reports;
mod room_admin;
mod room_emoji;
mod room_list;
mod rooms;
mod scheduled;
mod schema_fuzz;
mod search;
mod send_checks;
mod serve;
mod shutdown;
mod slash_commands;
mod threads;
mod thumbnails;
mod tiered_delivery;
mod trust_levels;
mod web_client;
mod web_pubsub_client;
mod webhooks;
