//! How many sequential store round trips a send waits for before its message is stored (issue
//! 17's Azure targets), counted, not timed, on the embedded store and on Azurite.
//!
//! The counting is the fault wrapper's (`storage::faults`, see its module doc): a call's round
//! is one more than the highest round among the calls finished when it started, so calls a send
//! issues together share a round and calls it makes one after another each count. A latency on
//! every call makes calls issued together overlap for sure, on either backend.
//!
//! **The critical path** of a send is its rounds up to and including the one whose transaction
//! stores the message (the room counter's entity group transaction on `Messages`). What the
//! send does after that durable write — the live rows of who looks at the room (tiered
//! delivery), notices, a link preview's job row — is counted separately: it cannot fail the
//! send, and it is bounded here too so that it cannot grow unseen.

use std::time::Duration;

use super::counting::{Backend, counting};
use crate::adapters::clock::ManualClock;
use crate::adapters::link_preview::PreviewFetcher;
use crate::adapters::outbound::{OutboundClient, Reach};
use crate::ids::RoomId;
use crate::members::MemberRoles;
use crate::messages::send::NewMessage;
use crate::permissions::Permissions;
use crate::roles::NewRole;
use crate::rooms::{NewRoom, RoomChange, Visibility};
use crate::service::Chat;
use crate::service::limits::LimitSettings;
use crate::service::testing::{alice, user};
use crate::storage::faults::{FaultyTables, RecordedCall};
use crate::storage::{RangeQuery, Tables};
use crate::store::schema::Schema;

/// The targets: sequential round trips on a send's critical path.
const PLAIN: usize = 2;
/// The store requests a plain send waits for.
const PLAIN_REQUESTS: usize = 4;
const SLOWMODE_OR_ROLES: usize = 3;
/// What losing the room counter's race to another process may add, once the process saw
/// it lost lately (its commits read the counter along).
const LOST_RACE: usize = 1;
/// What the first race lost in a room this process commits alone may add: the re-read, then
/// the write again.
const FIRST_LOST_RACE: usize = 2;
/// What the side effects after the durable write may take (not the send's critical path).
const AFTER_THE_WRITE: usize = 2;

/// Long enough that calls issued together are all in flight before the first answers.
const LATENCY: Duration = Duration::from_millis(15);

/// A send's calls, split at its durable write.
#[derive(Debug)]
struct Counted {
    critical: usize,
    after: usize,
    calls: Vec<RecordedCall>,
}

impl Counted {
    fn of(calls: Vec<RecordedCall>, messages: &str) -> Counted {
        let commit = calls
            .iter()
            .filter(|c| c.operation == "transact" && c.table == messages && !c.failed)
            .map(|c| c.round)
            .max()
            .unwrap_or_else(|| panic!("no transaction stored the message: {calls:#?}"));
        let last = calls.iter().map(|c| c.round).max().unwrap_or(0);
        Counted {
            critical: commit,
            after: last - commit,
            calls,
        }
    }

    /// The calls as a list a failure message can show.
    fn shown(&self) -> String {
        let lines: Vec<String> = self
            .calls
            .iter()
            .map(|c| {
                let failed = if c.failed { " (failed)" } else { "" };
                format!("  round {}: {} {}{failed}", c.round, c.operation, c.table)
            })
            .collect();
        format!(
            "{} rounds to the durable write, {} after it:\n{}",
            self.critical,
            self.after,
            lines.join("\n")
        )
    }
}

/// A service as a server runs it (a live hub, so the send reads who looks at the room), over
/// `tables`.
async fn service(tables: &FaultyTables, schema: &Schema) -> Chat {
    Chat::open(Tables::new(tables.clone()), schema.clone())
        .await
        .expect("Azurite must answer on 127.0.0.1:10002 (or TABLETALK_TEST_AZURITE)")
        .with_local_hub("rounds")
}

/// A public room alice owns and bob has joined, with one message already sent (so the
/// process knows the room's counter, as a process that has been running does).
async fn room_with_bob(chat: &Chat) -> RoomId {
    let room = chat
        .rooms
        .create_room(
            &alice(),
            NewRoom {
                name: "r".into(),
                description: None,
                visibility: Visibility::Public,
            },
        )
        .await
        .unwrap();
    let room = RoomId::parse(&room.id).unwrap();
    chat.rooms.join_room(&user("bob"), &room).await.unwrap();
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("hello"))
        .await
        .unwrap();
    room
}

/// Bob's send of a plain line with a client id, counted.
async fn counted_send(chat: &Chat, tables: &FaultyTables, room: &RoomId, client_id: &str) -> Counted {
    counted_send_of(chat, tables, room, client_id, "a plain line").await
}

/// Bob's send of `text` with a client id, counted.
async fn counted_send_of(chat: &Chat, tables: &FaultyTables, room: &RoomId, client_id: &str, text: &str) -> Counted {
    let message = NewMessage {
        client_id: Some(client_id.into()),
        ..NewMessage::text(text)
    };
    tables.set_latency(Some(LATENCY));
    tables.forget_calls();
    let sent = chat.sending.send_message(&user("bob"), room, message).await.unwrap();
    let calls = tables.calls_made();
    tables.set_latency(None);
    assert!(sent.created);
    Counted::of(calls, &chat.wiring.store.schema.messages.as_str().to_ascii_lowercase())
}

async fn a_plain_send_waits_for_at_most_two_round_trips(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let counted = counted_send(&chat, &tables, &room, "plain-1").await;
    eprintln!("{backend:?} plain send: {}", counted.shown());
    assert!(counted.critical <= PLAIN, "{backend:?}: {}", counted.shown());
    assert!(counted.after <= AFTER_THE_WRITE, "{backend:?}: {}", counted.shown());
}

/// The store requests a plain send waits for, counted (not rounds: every call up to and
/// including the transaction that stores the message): the member row, the index row, the
/// transaction and the sender's read position. The room row comes from the copy kept since
/// the sender's last send (checked against the room stamp in the transaction), whether the
/// room has outgoing webhooks from the counter the transaction moves, the counter from this
/// process's last commit, and a repeat of the client id is told by the transaction itself.
async fn a_plain_send_makes_at_most_four_store_requests(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    counted_send(&chat, &tables, &room, "warm-1").await;
    let counted = counted_send(&chat, &tables, &room, "plain-2").await;
    eprintln!("{backend:?} plain send, requests: {}", counted.shown());
    let requests = counted.calls.iter().filter(|c| c.round <= counted.critical).count();
    assert!(
        requests <= PLAIN_REQUESTS,
        "{backend:?}: {requests} requests: {}",
        counted.shown()
    );
    assert!(counted.critical <= PLAIN, "{backend:?}: {}", counted.shown());
}

/// A room change made through another process applies to the very next send of a process
/// that kept the room row: the change moved the room stamp, so the send admitted on the kept
/// row does not commit and is admitted again on the row as it is now.
async fn a_send_after_a_room_change_through_another_process_applies(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let other = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    counted_send(&chat, &tables, &room, "warm-1").await;
    let read_only = RoomChange {
        read_only: Some(true),
        ..RoomChange::default()
    };
    other.rooms.update_room(&alice(), &room, read_only).await.unwrap();
    tables.set_latency(Some(LATENCY));
    tables.forget_calls();
    let refused = chat
        .sending
        .send_message(&user("bob"), &room, NewMessage::text("after read-only"))
        .await;
    tables.set_latency(None);
    let calls = tables.calls_made();
    eprintln!("{backend:?} send into a room made read-only elsewhere: {calls:#?}");
    assert!(
        matches!(refused, Err(crate::error::Error::Forbidden(_))),
        "{backend:?}: the read-only room refused the send: {refused:?}"
    );
    // A change that does not refuse: the send is admitted again on the new row and stored once.
    let writable = RoomChange {
        read_only: Some(false),
        description: Some("changed elsewhere".into()),
        ..RoomChange::default()
    };
    other.rooms.update_room(&alice(), &room, writable).await.unwrap();
    let counted = counted_send(&chat, &tables, &room, "after-change").await;
    eprintln!("{backend:?} send after a room change elsewhere: {}", counted.shown());
    let messages = schema.messages.as_str().to_ascii_lowercase();
    let stored = counted
        .calls
        .iter()
        .filter(|c| c.operation == "transact" && c.table == messages && !c.failed)
        .count();
    assert_eq!(stored, 1, "{backend:?}: {}", counted.shown());
}

/// In a slowmode room (whose row is never kept: its send moves the sender's slowmode clock), a
/// room change made through another process between a send's admission and its commit leaves
/// the send stored, not refused by its own clock.
async fn a_slowmode_send_after_a_room_change_through_another_process_is_stored(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let other = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let slow = RoomChange {
        slowmode_seconds: Some(30),
        ..RoomChange::default()
    };
    chat.rooms.update_room(&alice(), &room, slow).await.unwrap();
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("the stamp is known"))
        .await
        .unwrap();
    let described = RoomChange {
        description: Some("changed elsewhere".into()),
        ..RoomChange::default()
    };
    other.rooms.update_room(&alice(), &room, described).await.unwrap();
    let sent = chat
        .sending
        .send_message(&user("bob"), &room, NewMessage::text("first in the window"))
        .await;
    assert!(sent.is_ok_and(|s| s.created), "{backend:?}: the send is stored");
}

/// A send admitted on a kept room row that another process changed is admitted again, and
/// draws the rate buckets once: in a room that takes one message a second, it is stored, not
/// refused by its own first admission's token.
async fn a_send_admitted_again_draws_its_rates_once(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let clock = ManualClock::at(chrono::Utc::now());
    let chat = service(&tables, &schema).await.with_limits(LimitSettings {
        thresholds: crate::trust::Thresholds::defaults(chrono::Duration::zero()),
        clock: std::sync::Arc::new(clock.clone()),
    });
    let other = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let ceiling = RoomChange {
        max_sends_per_second: Some(1),
        ..RoomChange::default()
    };
    chat.rooms.update_room(&alice(), &room, ceiling).await.unwrap();
    clock.advance(chrono::Duration::seconds(2));
    chat.sending
        .send_message(&user("bob"), &room, NewMessage::text("the row is kept"))
        .await
        .unwrap();
    clock.advance(chrono::Duration::seconds(2));
    let described = RoomChange {
        description: Some("changed elsewhere".into()),
        ..RoomChange::default()
    };
    other.rooms.update_room(&alice(), &room, described).await.unwrap();
    let sent = chat
        .sending
        .send_message(&user("bob"), &room, NewMessage::text("admitted again"))
        .await;
    assert!(sent.as_ref().is_ok_and(|s| s.created), "{backend:?}: {sent:?}");
}

/// With the limits on, as a server runs by default: a member this process stored a message of
/// claims the text in the send's first round, so the limits add no round trip (the user's
/// bucket is leased a few tokens at once and this send spends one of them). The limits' clock
/// stands still, so the lease (good for a second) is current however slow the store is.
async fn a_plain_send_with_the_limits_on_waits_for_at_most_two_round_trips(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await.with_limits(LimitSettings {
        thresholds: crate::trust::Thresholds::defaults(chrono::Duration::zero()),
        clock: std::sync::Arc::new(ManualClock::at(chrono::Utc::now())),
    });
    let room = room_with_bob(&chat).await;
    chat.sending
        .send_message(&user("bob"), &room, NewMessage::text("hi"))
        .await
        .unwrap();
    let counted = counted_send(&chat, &tables, &room, "limited-1").await;
    eprintln!("{backend:?} plain send, limits on: {}", counted.shown());
    assert!(counted.critical <= PLAIN, "{backend:?}: {}", counted.shown());
    let limits = chat.wiring.store.schema.limits.as_str().to_ascii_lowercase();
    assert!(
        counted
            .calls
            .iter()
            .any(|c| c.table == limits && c.operation == "insert"),
        "the repeat-text rule applied: {}",
        counted.shown()
    );
}

async fn a_slowmode_send_waits_for_at_most_three_round_trips(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let change = RoomChange {
        slowmode_seconds: Some(30),
        ..RoomChange::default()
    };
    chat.rooms.update_room(&alice(), &room, change).await.unwrap();
    let counted = counted_send(&chat, &tables, &room, "slow-1").await;
    eprintln!("{backend:?} slowmode send: {}", counted.shown());
    assert!(
        counted.critical <= SLOWMODE_OR_ROLES,
        "{backend:?}: {}",
        counted.shown()
    );
    // Slowmode still applies: the next send inside the window is refused.
    let again = chat
        .sending
        .send_message(&user("bob"), &room, NewMessage::text("too soon"))
        .await
        .unwrap_err();
    assert_eq!(again.code(), "TOO_MANY_REQUESTS", "{again}");
}

async fn a_send_by_a_member_with_roles_waits_for_at_most_three_round_trips(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let role = NewRole {
        name: "helper".into(),
        permissions: Permissions::from_bits(1 << 5), // MentionEveryone: no exemption from anything
        position: 1,
    };
    let role = chat.access.create_role(&alice(), &room, role).await.unwrap();
    let roles = MemberRoles {
        role_ids: vec![role.id],
    };
    chat.moderation
        .set_member_roles(&alice(), &room, &user("bob").user_id, roles)
        .await
        .unwrap();
    let counted = counted_send(&chat, &tables, &room, "roles-1").await;
    eprintln!("{backend:?} send with roles: {}", counted.shown());
    assert!(
        counted.critical <= SLOWMODE_OR_ROLES,
        "{backend:?}: {}",
        counted.shown()
    );
    // Once the process saw bob holding roles, it reads them along with his member row.
    let counted = counted_send(&chat, &tables, &room, "roles-2").await;
    eprintln!("{backend:?} next send with roles: {}", counted.shown());
    assert!(counted.critical <= PLAIN, "{backend:?}: {}", counted.shown());
}

/// Slowmode and roles together: the roles read along with the member row, then the slowmode
/// clock, then the commit.
async fn a_slowmode_send_by_a_member_with_roles_waits_for_at_most_three_round_trips(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    let role = NewRole {
        name: "helper".into(),
        permissions: Permissions::from_bits(1 << 5), // MentionEveryone: no exemption from anything
        position: 1,
    };
    let role = chat.access.create_role(&alice(), &room, role).await.unwrap();
    let roles = MemberRoles {
        role_ids: vec![role.id],
    };
    chat.moderation
        .set_member_roles(&alice(), &room, &user("bob").user_id, roles)
        .await
        .unwrap();
    chat.sending
        .send_message(&user("bob"), &room, NewMessage::text("before slowmode"))
        .await
        .unwrap();
    let change = RoomChange {
        slowmode_seconds: Some(30),
        ..RoomChange::default()
    };
    chat.rooms.update_room(&alice(), &room, change).await.unwrap();
    let counted = counted_send(&chat, &tables, &room, "slow-roles-1").await;
    eprintln!("{backend:?} slowmode send with roles: {}", counted.shown());
    assert!(
        counted.critical <= SLOWMODE_OR_ROLES,
        "{backend:?}: {}",
        counted.shown()
    );
}

/// Another process sends into the room between two of this one's sends, so this process's
/// copy of the room counter is stale and its commit loses the counter's race once.
/// A process reads a room's counter along with its commits only once it saw another process
/// move it (`store::ledger`): the first race lost in a quiet room costs the re-read and the
/// write again; from then on, the read rides along with each write, and a lost race costs one
/// round trip more.
async fn a_send_that_lost_the_counter_race_waits_for_at_most_one_more(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let chat = service(&tables, &schema).await;
    let other = service(&tables, &schema).await;
    let room = room_with_bob(&chat).await;
    for (round, allowed) in [("race-1", PLAIN + FIRST_LOST_RACE), ("race-2", PLAIN + LOST_RACE)] {
        other
            .sending
            .send_message(&alice(), &room, NewMessage::text("from elsewhere"))
            .await
            .unwrap();
        let counted = counted_send(&chat, &tables, &room, round).await;
        eprintln!(
            "{backend:?} send that lost the counter race ({round}): {}",
            counted.shown()
        );
        let lost = counted
            .calls
            .iter()
            .filter(|c| c.operation == "transact" && c.failed)
            .count();
        assert_eq!(lost, 1, "the commit lost the counter's race once: {}", counted.shown());
        assert!(counted.critical <= allowed, "{backend:?}: {}", counted.shown());
    }
}

/// A link's preview job row is written after the durable write, counted with the side
/// effects, never on the send's critical path.
async fn a_link_preview_job_is_written_after_the_durable_write(backend: Backend) {
    let (tables, schema) = counting(&backend, "rt");
    let client = OutboundClient::new(Reach::PublicAndLoopback, Duration::from_secs(5)).unwrap();
    // Jobs are left to the timer (as a host that freezes once it answered does): no fetch
    // runs beside the count.
    let chat = service(&tables, &schema)
        .await
        .with_previews(PreviewFetcher::new(client))
        .with_inline_events();
    let room = room_with_bob(&chat).await;
    let counted = counted_send_of(&chat, &tables, &room, "link-1", "see https://example.com/page").await;
    eprintln!("{backend:?} send with a link: {}", counted.shown());
    assert!(counted.critical <= PLAIN, "{backend:?}: {}", counted.shown());
    assert!(counted.after <= AFTER_THE_WRITE, "{backend:?}: {}", counted.shown());
    let housekeeping = schema.housekeeping.as_str().to_ascii_lowercase();
    let job = counted
        .calls
        .iter()
        .find(|c| c.operation == "upsert" && c.table == housekeeping)
        .unwrap_or_else(|| panic!("no preview job row: {}", counted.shown()));
    assert!(job.round > counted.critical, "{}", counted.shown());
}

on_both_backends!(
    a_plain_send_waits_for_at_most_two_round_trips,
    a_plain_send_makes_at_most_four_store_requests,
    a_send_after_a_room_change_through_another_process_applies,
    a_slowmode_send_after_a_room_change_through_another_process_is_stored,
    a_send_admitted_again_draws_its_rates_once,
    a_plain_send_with_the_limits_on_waits_for_at_most_two_round_trips,
    a_slowmode_send_waits_for_at_most_three_round_trips,
    a_send_by_a_member_with_roles_waits_for_at_most_three_round_trips,
    a_slowmode_send_by_a_member_with_roles_waits_for_at_most_three_round_trips,
    a_send_that_lost_the_counter_race_waits_for_at_most_one_more,
    a_link_preview_job_is_written_after_the_durable_write,
);

/// On the embedded store, a send's writes before its answer — the index row, the message's
/// transaction (made by its own task once it waits), the sender's read position — are one
/// group commit, one fsync, when made in one step as a request's handler makes them
/// (`service::one_request`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_send_is_one_group_commit_of_the_embedded_store() {
    let store = crate::service::testing::store();
    let chat = Chat::open(Tables::new(store.clone()), Schema::with_prefix("one").unwrap())
        .await
        .unwrap()
        .with_local_hub("one");
    let room = room_with_bob(&chat).await;
    for line in ["first", "second", "third"] {
        let before = store.group_commits();
        let sent = crate::service::one_request(chat.sending.send_message(&user("bob"), &room, NewMessage::text(line)))
            .await
            .unwrap();
        assert!(sent.created);
        assert_eq!(store.group_commits() - before, 1, "{line}");
    }
}

/// With events on (push configured, nobody subscribed), sends one after another still cost one
/// group commit each once everything after their answers has run: the outbox row's clearing
/// rides in the next send's commit (`delete_deferred`), and an event with nobody to push to
/// writes nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_with_events_on_cost_one_group_commit_each() {
    use crate::adapters::push::{PushSender, generate_vapid_key};
    use crate::notify::PushSettings;
    let store = crate::service::testing::store();
    let key = generate_vapid_key().unwrap().0;
    let chat = Chat::open(Tables::new(store.clone()), Schema::with_prefix("ev").unwrap())
        .await
        .unwrap()
        .with_local_hub("ev")
        .with_push(PushSettings {
            sender: Some(PushSender::new(&key, "mailto:test@example.com").unwrap()),
            ..PushSettings::default()
        });
    let room = room_with_bob(&chat).await;
    let settled = || async {
        while chat.supervisor().running() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    // The first send writes the room's outbox marker; the count starts after it.
    crate::service::one_request(
        chat.sending
            .send_message(&user("bob"), &room, NewMessage::text("first")),
    )
    .await
    .unwrap();
    settled().await;
    const SENDS: u64 = 20;
    let before = store.group_commits();
    for i in 0..SENDS {
        let text = format!("line {i}");
        crate::service::one_request(chat.sending.send_message(&user("bob"), &room, NewMessage::text(&text)))
            .await
            .unwrap();
    }
    settled().await;
    let commits = store.group_commits() - before;
    // The last clearings have no later send to ride with: they commit together, alone.
    assert!(commits <= SENDS + 1, "{commits} group commits for {SENDS} sends");
    let pending = RangeQuery::prefix(room.as_str(), crate::store::schema::OUTBOX_PREFIX, 100);
    let rows = (chat.wiring.store.tables())
        .query(&chat.wiring.store.schema().messages, &pending)
        .await
        .unwrap();
    assert!(rows.entities.is_empty(), "every published event's row is cleared");
}
