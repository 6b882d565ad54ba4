//! Service-level failure paths of erasure: a store failing at any point of a job, a commit
//! reported as failed, a job taken over while its first holder still runs, and the requests
//! refused while a job runs.

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;

use crate::auth::Principal;
use crate::erasure::{ErasureSettings, ErasureStatus};
use crate::ids::RoomId;
use crate::members::MemberRole;
use crate::messages::send::NewMessage;
use crate::rooms::NewRoom;
use crate::service::Chat;
use crate::service::erasure::Stop;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, RangeQuery, StoreError, Tables};
use crate::store::schema::user_key;

fn unavailable() -> StoreError {
    StoreError::new(ErrorKind::Unavailable, "injected")
}

/// Small batches, no pause: a job of a few messages goes through many checkpoints.
fn settings() -> ErasureSettings {
    ErasureSettings {
        batch: 2,
        pause: Duration::ZERO,
        lease: Duration::from_secs(60),
    }
}

/// Long after any lease taken now has lapsed.
fn later() -> chrono::DateTime<Utc> {
    Utc::now() + chrono::Duration::minutes(5)
}

/// Alice's world: she owns `owned` (bob is in it), is a member of bob's `joined`, and has
/// five messages in each (and, in `joined`, the server's line of her join, in her name); bob
/// has a message in each, which alice reacted to, and he reacted to one of hers; alice voted
/// on bob's poll.
struct World {
    chat: Chat,
    owned: RoomId,
    joined: RoomId,
    /// Each room's version before the erasure.
    versions: HashMap<RoomId, u64>,
}

/// Alice's five messages in each room, and her join line in `joined`.
const ALICES_MESSAGES: u64 = 11;

async fn world(tables: Tables) -> World {
    let (chat, owned) = chat_on(tables).await;
    let chat = chat.with_erasure(settings());
    let bob = user("bob");
    chat.rooms.join_room(&bob, &owned).await.unwrap();
    let joined = chat
        .rooms
        .create_room(
            &bob,
            NewRoom {
                name: "bob's".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let joined = RoomId::parse(&joined.id).unwrap();
    chat.rooms.join_room(&alice(), &joined).await.unwrap();
    for room in [&owned, &joined] {
        let mut first = None;
        for i in 0..5 {
            let sent = chat
                .sending
                .send_message(&alice(), room, NewMessage::text(format!("alice {i}")))
                .await
                .unwrap();
            first.get_or_insert(sent.message.id);
        }
        let theirs = chat
            .sending
            .send_message(&bob, room, NewMessage::text("bob"))
            .await
            .unwrap()
            .message;
        chat.reactions.react(&alice(), room, &theirs.key(), "👍").await.unwrap();
        chat.reactions
            .react(
                &bob,
                room,
                &crate::keys::MessageKey::parse(first.as_deref().unwrap()).unwrap(),
                "🎉",
            )
            .await
            .unwrap();
    }
    let poll: NewMessage = serde_json::from_value(serde_json::json!({
        "type": "Poll",
        "poll": { "question": "lunch?", "options": ["soup", "salad"] }
    }))
    .unwrap();
    let poll = chat.sending.send_message(&bob, &joined, poll).await.unwrap().message;
    let option = poll.poll.as_ref().unwrap().options[0].id.clone();
    let vote = crate::messages::polls::Vote {
        option_id: Some(option),
    };
    chat.reactions.vote(&alice(), &joined, &poll.key(), vote).await.unwrap();
    let mut versions = HashMap::new();
    for room in [&owned, &joined] {
        versions.insert(
            room.clone(),
            chat.wiring.store.ledger.counter(room).await.unwrap().version,
        );
    }
    World {
        chat,
        owned,
        joined,
        versions,
    }
}

impl World {
    /// Everything the erasure must have done, checked against the store.
    async fn assert_erased(&self) {
        let chat = &self.chat;
        let job = chat.eraser.my_erasure(&alice()).await.unwrap();
        assert_eq!(job.status, ErasureStatus::Done, "{job:?}");
        assert_eq!(job.counts.messages_erased, ALICES_MESSAGES, "{job:?}");
        assert_eq!(job.rooms_left, 0);
        for (room, hers) in [(&self.owned, 5), (&self.joined, 6)] {
            // Each of alice's messages took exactly one new version: none was tombstoned
            // twice, and nothing else changed.
            let before = self.versions[room];
            let after = chat.wiring.store.ledger.counter(room).await.unwrap().version;
            assert_eq!(after, before + hers, "{room}: versions {before} -> {after}");
            let (changes, _) = chat.wiring.store.messages.feed_after(room, before, 100).await.unwrap();
            assert_eq!(changes.len() as u64, hers);
            for (_, message) in &changes {
                assert_eq!(message.author_id, "alice");
                assert!(!message.is_live() && message.author_name.is_empty(), "{message:?}");
            }
            let (messages, _) = chat
                .wiring
                .store
                .messages
                .messages_newest_first(room, None, 100)
                .await
                .unwrap();
            assert!(
                messages.iter().all(|m| m.author_id != "alice" || !m.is_live()),
                "{messages:?}"
            );
            // No reaction or vote of alice's, nor any on her messages, is left.
            let (marks, _) = chat
                .wiring
                .store
                .tables()
                .query_up_to(
                    &chat.wiring.store.schema().metadata,
                    &RangeQuery::partition(room.as_str(), 1000),
                    1000,
                )
                .await
                .unwrap();
            let alices: std::collections::HashSet<&str> = changes.iter().map(|(_, m)| m.id.as_str()).collect();
            for mark in &marks {
                assert_ne!(mark.str("userId"), Some("alice"), "{mark:?}");
                let message = mark.row_key.split(':').next().unwrap();
                assert!(!alices.contains(message), "a mark on an erased message: {mark:?}");
            }
            assert!(
                chat.wiring
                    .store
                    .members
                    .member(room, &alice().user_id)
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        let bob = chat
            .wiring
            .store
            .members
            .member(&self.owned, &user("bob").user_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(bob.role, MemberRole::Owner, "the room went to its other member");
        assert!(chat.rooms.my_rooms(&alice()).await.unwrap().is_empty());
        for table in [
            &chat.wiring.store.schema().user_rooms,
            &chat.wiring.store.schema().user_history,
        ] {
            let (rows, _) = chat
                .wiring
                .store
                .tables()
                .query_up_to(table, &RangeQuery::partition(user_key(&alice().user_id), 10), 10)
                .await
                .unwrap();
            assert!(rows.is_empty(), "{table}: {rows:?}");
        }
    }
}

/// A store failing at any one point of the job stops it there; the job taken over afterwards
/// finishes it, and every message is still tombstoned exactly once.
#[tokio::test]
async fn an_erasure_stopped_by_a_store_failure_anywhere_is_finished_by_the_next_process() {
    let mut stopped = 0;
    for nth in [1, 4, 9, 15, 22, 30, 41, 55, 70, 90] {
        let faults = FaultyTables::new(store());
        let world = world(Tables::new(faults.clone())).await;
        let chat = &world.chat;
        let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
        let mut run = run.expect("a new job");
        faults.fail_nth_call(nth, unavailable());
        let first = chat.eraser.erase_everything(&mut run).await;
        faults.clear();
        if let Err(stop) = first {
            assert!(matches!(stop, Stop::Failed(_)), "{stop:?}");
            stopped += 1;
            let status = chat.eraser.my_erasure(&alice()).await.unwrap();
            assert_eq!(status.status, ErasureStatus::Running, "call {nth}");
            assert!(
                chat.eraser.take_over_erasures(Utc::now()).await.unwrap().is_empty(),
                "held until its lease lapses"
            );
            let mut taken = chat.eraser.take_over_erasures(later()).await.unwrap();
            assert_eq!(taken.len(), 1, "call {nth}");
            chat.eraser.erase_everything(&mut taken[0]).await.unwrap();
        }
        world.assert_erased().await;
    }
    // Some calls run concurrently, and a few (closing a deleted message's reports) only log
    // their failure, so which call is the nth varies between runs: most, not all, must stop
    // the job, or the test would prove nothing.
    assert!(stopped >= 5, "the failures landed inside the job: {stopped}");
}

/// Tombstones the store commits but answers as failed (a timeout after the commit): the
/// ledger learns they landed, so the job goes on and no message takes a second version.
#[tokio::test]
async fn a_tombstone_committed_but_reported_failed_takes_one_version() {
    let faults = FaultyTables::new(store());
    let world = world(Tables::new(faults.clone())).await;
    let chat = &world.chat;
    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    let mut run = run.unwrap();
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema().messages),
        3,
        StoreError::new(ErrorKind::Unavailable, "injected after commit"),
    );
    chat.eraser.erase_everything(&mut run).await.unwrap();
    world.assert_erased().await;
}

/// Two processes: the one that took a lapsed job over runs it; the first holder stops at its
/// next checkpoint, and what it did before is not done twice.
#[tokio::test]
async fn a_job_taken_over_stops_its_first_holder() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let (started, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    let mut first = run.unwrap();
    let mut taken = chat.eraser.take_over_erasures(later()).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].job.id, started.id, "the same job");
    let lost = chat.eraser.erase_everything(&mut first).await;
    assert!(matches!(lost, Err(Stop::Lost)), "{lost:?}");
    chat.eraser.erase_everything(&mut taken[0]).await.unwrap();
    world.assert_erased().await;
}

/// A repeat while the job runs answers the same job; joining or creating a room and
/// registering a push subscription are refused until it is done; then the user starts afresh.
#[tokio::test]
async fn while_an_erasure_runs_a_repeat_is_the_same_job_and_joins_are_refused() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let stranger = chat
        .rooms
        .create_room(
            &user("carol"),
            NewRoom {
                name: "carol's".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let stranger = RoomId::parse(&stranger.id).unwrap();
    let (started, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    let mut run = run.unwrap();
    assert_eq!(started.rooms_left, 2);
    let (again, none) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    assert!(none.is_none(), "a repeat starts nothing");
    assert_eq!(again.id, started.id);

    let code = |e: crate::error::Error| e.code();
    assert_eq!(
        code(chat.rooms.join_room(&alice(), &stranger).await.unwrap_err()),
        "CONFLICT"
    );
    let room = NewRoom {
        name: "new".into(),
        description: None,
        visibility: crate::rooms::Visibility::Public,
    };
    assert_eq!(
        code(chat.rooms.create_room(&alice(), room.clone()).await.unwrap_err()),
        "CONFLICT"
    );
    let subscription = serde_json::from_value(serde_json::json!({
        "endpoint": "https://push.example.com/alice",
        "keys": {
            "p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
            "auth": "tBHItJI5svbpez7KI4CCXg"
        }
    }))
    .unwrap();
    assert_eq!(
        code(chat.accounts.subscribe(&alice(), subscription).await.unwrap_err()),
        "CONFLICT"
    );
    // Someone else is not held up.
    chat.rooms.join_room(&user("dan"), &stranger).await.unwrap();

    chat.eraser.erase_everything(&mut run).await.unwrap();
    world.assert_erased().await;
    chat.rooms.join_room(&alice(), &stranger).await.unwrap();
    let (fresh, _) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    assert_ne!(fresh.id, started.id, "a new erasure after the last one is done");
}

/// An owned room nobody else is in is deleted with everything in it.
#[tokio::test]
async fn an_owned_room_with_no_other_member_is_deleted() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let chat = chat.with_erasure(settings());
    chat.sending
        .send_message(&alice(), &room, NewMessage::text("alone"))
        .await
        .unwrap();
    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    let job = chat.eraser.my_erasure(&alice()).await.unwrap();
    assert_eq!((job.counts.rooms_deleted, job.counts.rooms_done), (1, 1), "{job:?}");
    assert!(
        chat.wiring.store.rooms.room_row(&room).await.unwrap().is_none(),
        "the room is gone"
    );
    let bob: Principal = user("bob");
    assert_eq!(chat.rooms.join_room(&bob, &room).await.unwrap_err().code(), "NOT_FOUND");
}

/// Memberships from before the history index have no history row: the job finds the user's
/// current rooms anyway and scans them whole.
#[tokio::test]
async fn memberships_older_than_the_history_index_are_erased_too() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let history = RangeQuery::partition(user_key(&alice().user_id), 100);
    chat.wiring
        .store
        .tables()
        .delete_range(&chat.wiring.store.schema().user_history, &history)
        .await
        .unwrap();
    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    world.assert_erased().await;
}

/// The threads the erased user follows (a replier follows on their own) forget them: their id
/// leaves every follower list, and their own list goes.
#[tokio::test]
async fn an_erasure_leaves_the_user_in_no_follower_list() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let bob = user("bob");
    let root = chat
        .sending
        .send_message(&bob, &world.joined, NewMessage::text("a thread"))
        .await
        .unwrap()
        .message;
    let mut reply = NewMessage::text("alice replies");
    reply.reply_to = Some(root.id.clone());
    chat.sending.send_message(&alice(), &world.joined, reply).await.unwrap();
    let followers = |chat: &Chat| {
        let (room, root) = (world.joined.clone(), root.id.clone());
        let store = chat.wiring.store.clone();
        async move { store.follows.followers(&room, &root, 100).await.unwrap() }
    };
    assert!(followers(chat).await.contains(&alice().user_id), "a replier follows");

    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    assert!(!followers(chat).await.contains(&alice().user_id));
    assert!(
        chat.wiring
            .store
            .follows
            .followed(&alice().user_id, 100)
            .await
            .unwrap()
            .is_empty()
    );
}

/// An invitation waiting for the erased user is theirs: it goes with the rest, so it no
/// longer shows among their invitations nor in the room's list.
#[tokio::test]
async fn an_erasure_leaves_no_invitation_waiting_for_the_user() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let carol = user("carol");
    let private = chat
        .rooms
        .create_room(
            &carol,
            NewRoom {
                name: "carol's private".into(),
                description: None,
                visibility: crate::rooms::Visibility::Private,
            },
        )
        .await
        .unwrap();
    let private = RoomId::parse(&private.id).unwrap();
    let invite = crate::rooms::invitations::NewInvitation {
        user_id: Some("alice".into()),
        expires_in_seconds: None,
        max_uses: None,
    };
    chat.rooms.create_invitation(&carol, &private, invite).await.unwrap();
    assert_eq!(chat.rooms.my_invitations(&alice()).await.unwrap().len(), 1);

    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    world.assert_erased().await;
    assert!(chat.rooms.my_invitations(&alice()).await.unwrap().is_empty());
    let listed = chat.rooms.list_invitations(&carol, &private).await.unwrap();
    assert!(
        listed.iter().all(|i| i.user_id.as_deref() != Some("alice")),
        "{listed:?}"
    );
}

/// The reports the erased user filed carry their name and their own words: they go, and the
/// queue no longer counts them.
#[tokio::test]
async fn an_erasure_removes_the_reports_the_user_filed() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let bob = user("bob");
    let theirs = chat
        .sending
        .send_message(&bob, &world.joined, NewMessage::text("reported"))
        .await
        .unwrap()
        .message;
    let report = crate::reports::NewReport {
        reason: "alice's own words about it".into(),
    };
    chat.editing
        .report_message(&alice(), &world.joined, &theirs.key(), report)
        .await
        .unwrap();
    assert_eq!(
        chat.editing
            .report_queue(&bob, &world.joined)
            .await
            .unwrap()
            .groups
            .len(),
        1
    );

    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    let queue = chat.editing.report_queue(&bob, &world.joined).await.unwrap();
    let left: Vec<_> = queue.groups.iter().flat_map(|g| g.reports.iter()).collect();
    assert!(left.iter().all(|r| r.reporter_id != "alice"), "{left:?}");
    assert!(
        queue.groups.iter().all(|g| g.count == 0 || !g.reports.is_empty()),
        "{queue:?}"
    );
    let (rows, _) = chat
        .wiring
        .store
        .tables()
        .query_up_to(
            &chat.wiring.store.schema().rooms,
            &RangeQuery::prefix(world.joined.as_str(), "report:", 100),
            100,
        )
        .await
        .unwrap();
    assert!(rows.iter().all(|r| r.str("reporterId") != Some("alice")), "{rows:?}");
}

/// The limits' rows of the erased user (their write bucket, their newcomer buckets, their
/// repeat-text records) go too.
#[tokio::test]
async fn an_erasure_leaves_no_limit_row_of_the_user() {
    let (chat, owned) = chat_on(Tables::new(store())).await;
    let clock = crate::adapters::clock::ManualClock::at(Utc::now());
    let chat = chat
        .with_erasure(settings())
        .with_limits(crate::service::limits::LimitSettings {
            thresholds: crate::trust::Thresholds::defaults(chrono::Duration::minutes(10)),
            clock: std::sync::Arc::new(clock),
        });
    let bob = user("bob");
    let bobs = chat
        .rooms
        .create_room(
            &bob,
            NewRoom {
                name: "bob's".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let bobs = RoomId::parse(&bobs.id).unwrap();
    chat.rooms.join_room(&alice(), &bobs).await.unwrap();
    for room in [&owned, &bobs] {
        chat.sending
            .send_message(&alice(), room, NewMessage::text("hello there"))
            .await
            .unwrap();
    }
    chat.sending
        .send_message(&bob, &bobs, NewMessage::text("hello there"))
        .await
        .unwrap();

    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    let mut rows = Vec::new();
    for partition in ["user:alice".to_owned(), format!("room:{owned}"), format!("room:{bobs}")] {
        let (found, _) = chat
            .wiring
            .store
            .tables()
            .query_up_to(
                &chat.wiring.store.schema().limits,
                &RangeQuery::partition(partition, 1000),
                1000,
            )
            .await
            .unwrap();
        rows.extend(found);
    }
    let alices: Vec<_> = rows
        .iter()
        .filter(|r| r.partition_key.contains("alice") || r.row_key.contains("alice"))
        .map(|r| (&r.partition_key, &r.row_key))
        .collect();
    assert!(alices.is_empty(), "{alices:?}");
    assert!(
        rows.iter().any(|r| r.row_key.contains("bob")),
        "bob's rows stay: {rows:?}"
    );
}

/// Opening a direct conversation creates a room and a membership: refused while the
/// caller's erasure runs, as joining and creating a room are.
#[tokio::test]
async fn opening_a_direct_conversation_is_refused_while_an_erasure_runs() {
    let world = world(Tables::new(store())).await;
    let chat = &world.chat;
    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    let open = crate::rooms::NewDirect { user_id: "dan".into() };
    let refused = chat.accounts.open_direct(&alice(), open.clone()).await;
    assert_eq!(refused.map(|r| r.id).unwrap_err().code(), "CONFLICT");
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    world.assert_erased().await;
    chat.accounts
        .open_direct(&alice(), open)
        .await
        .expect("afterwards she starts afresh");
}

/// Opening a direct conversation adds a membership to both people, as a join does: while
/// either one's erasure runs it is refused, so the job cannot miss a membership made behind it.
#[tokio::test]
async fn while_an_erasure_runs_no_direct_conversation_is_opened_with_them() {
    let (chat, _) = chat_on(Tables::new(store())).await;
    let chat = chat.with_erasure(settings());
    let (_, run) = chat.eraser.begin_erasure(&alice()).await.unwrap();
    let mut run = run.unwrap();
    let with = |user: &str| crate::rooms::NewDirect { user_id: user.into() };

    let own = chat.accounts.open_direct(&alice(), with("bob")).await;
    assert_eq!(own.map(|r| r.id).unwrap_err().code(), "CONFLICT", "alice opens one");
    let theirs = chat.accounts.open_direct(&user("carol"), with("alice")).await;
    assert_eq!(
        theirs.map(|r| r.id).unwrap_err().code(),
        "CONFLICT",
        "carol opens one with alice"
    );
    let alices = chat
        .wiring
        .store
        .members
        .user_rooms(&alice().user_id, 100)
        .await
        .unwrap();
    assert_eq!(alices.len(), 1, "only the room she is being erased from: {alices:?}");

    chat.eraser.erase_everything(&mut run).await.unwrap();
    let room = chat.accounts.open_direct(&user("carol"), with("alice")).await.unwrap();
    assert!(room.direct, "once it is done, she can be written to again");
}
