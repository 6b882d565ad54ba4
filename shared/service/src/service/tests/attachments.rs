//! Service-level tests of attachments: races between sends naming one upload, and a send
//! whose write fails, on a real embedded store (objects under a scratch directory).

use std::sync::Arc;

use crate::adapters::clock::{Clock as _, ManualClock, SystemClock};
use crate::adapters::objects::embedded::EmbeddedObjects;
use crate::adapters::objects::faults::FaultyObjects;
use crate::adapters::objects::{ObjectKey, Objects};
use crate::attachments::{AttachmentRules, NewUpload};
use crate::auth::Principal;
use crate::ids::RoomId;
use crate::messages::forward::Forward;
use crate::messages::send::NewMessage;
use crate::rooms::RoomChange;
use crate::scheduled::{CLAIM_LEASE, NewScheduled, ScheduledStatus};
use crate::service::Chat;
use crate::service::attachments::AttachmentSettings;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{StoreError, Tables};

/// The service with attachments as files in a scratch directory.
async fn with_objects(tables: Tables) -> (Chat, RoomId, Objects) {
    let (chat, room) = chat_on(tables).await;
    let dir = std::env::temp_dir().join(format!("tt-objects-{}", uuid::Uuid::new_v4().simple()));
    let objects = Objects::new(EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap());
    let chat = chat.with_attachments(AttachmentSettings {
        objects: objects.clone(),
        embedded: None,
        rules: AttachmentRules::default(),
        clock: Arc::new(SystemClock),
    });
    (chat, room, objects)
}

/// Declares an upload and stores its bytes as a client would; its id.
async fn uploaded(chat: &Chat, room: &RoomId, objects: &Objects) -> String {
    uploaded_by(chat, &alice(), room, objects).await
}

/// Declares an upload of `who` and stores its bytes as a client would; its id.
async fn uploaded_by(chat: &Chat, who: &Principal, room: &RoomId, objects: &Objects) -> String {
    let answer = chat
        .files
        .create_upload(
            who,
            room,
            NewUpload {
                name: "a.png".into(),
                mime: "image/png".into(),
                size: 3,
            },
        )
        .await
        .unwrap();
    let key = answer
        .upload
        .url
        .split("/objects/")
        .nth(1)
        .unwrap()
        .split('?')
        .next()
        .unwrap();
    objects
        .put(&ObjectKey::parse(key).unwrap(), "image/png", b"png".to_vec())
        .await
        .unwrap();
    answer.attachment.id
}

fn naming(id: &str, text: &str) -> NewMessage {
    NewMessage {
        attachments: Some(vec![id.to_owned()]),
        ..NewMessage::text(text)
    }
}

/// Many sends naming one upload at once: exactly one carries it, the others are refused as
/// conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_sends_naming_one_upload_at_once_exactly_one_carries_it() {
    let (chat, room, objects) = with_objects(Tables::new(store())).await;
    let id = uploaded(&chat, &room, &objects).await;
    let sends = (0..8).map(|i| {
        let (chat, room, id) = (chat.clone(), room.clone(), id.clone());
        tokio::spawn(async move {
            chat.sending
                .send_message(&alice(), &room, naming(&id, &format!("m{i}")))
                .await
        })
    });
    let results: Vec<_> = futures::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let carried = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(carried, 1, "{results:?}");
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(refused.code(), "CONFLICT", "{refused}");
    }
}

/// A send whose message write fails releases its claim: the upload can be sent again.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_that_fails_to_write_releases_its_attachments() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let id = uploaded(&chat, &room, &objects).await;
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let failed = chat
        .sending
        .send_message(&alice(), &room, naming(&id, "lost"))
        .await
        .unwrap_err();
    assert_eq!(failed.code(), "UNAVAILABLE");
    let sent = chat
        .sending
        .send_message(&alice(), &room, naming(&id, "kept"))
        .await
        .unwrap();
    assert_eq!(sent.message.attachments.len(), 1);
    assert_eq!(sent.message.attachments[0].id, id);
}

/// A tombstone whose companion rows cannot be deleted (the store fails after the tombstone
/// committed) still takes its files away: no member can download them any more.
#[tokio::test]
async fn a_tombstone_that_fails_half_way_leaves_no_file_downloadable() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let id = uploaded(&chat, &room, &objects).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, naming(&id, "soon gone"))
        .await
        .unwrap();
    faults.fail_operation(
        "query",
        Some(&chat.wiring.store.schema.metadata),
        1,
        StoreError::unavailable("disk gone"),
    );
    let deleted = chat.editing.delete_message(&alice(), &room, &sent.message.key()).await;
    assert_eq!(
        deleted.unwrap_err().code(),
        "UNAVAILABLE",
        "the companions' delete failed"
    );
    let link = chat.files.attachment_link(&alice(), &room, &id).await;
    assert_eq!(link.unwrap_err().code(), "NOT_FOUND");
}

/// The service with attachments as files in a scratch directory, behind a fault-injecting
/// object store.
async fn with_faulty_objects(tables: Tables) -> (Chat, RoomId, Objects, FaultyObjects) {
    let (chat, room) = chat_on(tables).await;
    let dir = std::env::temp_dir().join(format!("tt-objects-{}", uuid::Uuid::new_v4().simple()));
    let faulty = FaultyObjects::new(EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap());
    let objects = Objects::new(faulty.clone());
    let chat = chat.with_attachments(AttachmentSettings {
        objects: objects.clone(),
        embedded: None,
        rules: AttachmentRules::default(),
        clock: Arc::new(SystemClock),
    });
    (chat, room, objects, faulty)
}

/// Declares an upload and never stores its bytes; its id.
async fn declared(chat: &Chat, room: &RoomId) -> String {
    let upload = NewUpload {
        name: "never.png".into(),
        mime: "image/png".into(),
        size: 3,
    };
    chat.files
        .create_upload(&alice(), room, upload)
        .await
        .unwrap()
        .attachment
        .id
}

/// A send with client id `client` naming `ids`.
fn attempt(client: &str, ids: &[&str]) -> NewMessage {
    NewMessage {
        client_id: Some(client.into()),
        attachments: Some(ids.iter().map(|id| id.to_string()).collect()),
        ..NewMessage::text("twice")
    }
}

/// Whether `id` is free to go on another message (a send without a client id naming it).
async fn claimable(chat: &Chat, room: &RoomId, id: &str) -> bool {
    match chat.sending.send_message(&alice(), room, naming(id, "again")).await {
        Ok(_) => true,
        Err(e) if e.code() == "CONFLICT" => false,
        Err(e) => panic!("neither sent nor a conflict: {e}"),
    }
}

async fn other_room(chat: &Chat) -> RoomId {
    let room = chat
        .rooms
        .create_room(
            &alice(),
            crate::rooms::NewRoom {
                name: "target".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    RoomId::parse(&room.id).unwrap()
}

/// A purge whose second batch fails has already committed its first: the files of the
/// messages that batch purged are gone with them (nothing would ever find them again), and a
/// second run purges the rest.
#[tokio::test]
async fn a_purge_that_fails_in_a_later_batch_deletes_the_files_of_the_batches_it_committed() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let id = uploaded(&chat, &room, &objects).await;
    chat.sending
        .send_message(&alice(), &room, naming(&id, "oldest"))
        .await
        .unwrap();
    // 31 messages: two batches of the purge, the file in the first.
    for i in 0..30 {
        chat.sending
            .send_message(&alice(), &room, NewMessage::text(format!("m{i}")))
            .await
            .unwrap();
    }
    let retention = RoomChange {
        retention_seconds: Some(Some(3600)),
        ..RoomChange::default()
    };
    chat.rooms.update_room(&alice(), &room, retention).await.unwrap();
    let later = chrono::Utc::now() + chrono::Duration::seconds(3601);
    let messages = Some(&chat.wiring.store.schema.messages);
    // The first purge transaction goes through; the second fails.
    faults.delay_operation("transact", messages, 1, std::time::Duration::ZERO);
    faults.fail_operation("transact", messages, 1, StoreError::unavailable("disk gone"));
    let failed = chat.housekeeping(later).await.unwrap();
    assert_eq!(failed.rooms_failed, 1, "{failed:?}");
    assert_eq!(
        objects.list(&format!("{room}/")).await.unwrap(),
        Vec::<ObjectKey>::new()
    );
    let rerun = chat.housekeeping(later).await.unwrap();
    assert_eq!(rerun.rooms_failed, 0, "{rerun:?}");
    assert_eq!(failed.messages_purged + rerun.messages_purged, 31);
    assert!(chat.wiring.store.uploads.upload(&room, &id).await.unwrap().is_none());
    assert_eq!(
        objects.list(&format!("{room}/")).await.unwrap(),
        Vec::<ObjectKey>::new()
    );
}

/// Two attempts of one send (one client id): the one that claimed a file first fails after
/// the other, which found its claim, stored the message. The failed one must not release the
/// file the stored message carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_of_a_send_keeps_the_files_of_the_attempt_that_stored_it() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let never = declared(&chat, &room).await;
    // The first attempt claims the file, then waits at its second file's HEAD.
    let gate = faulty.hold_nth("head", 2);
    let first = tokio::spawn({
        let (chat, room, file, never) = (chat.clone(), room.clone(), file.clone(), never.clone());
        async move {
            chat.sending
                .send_message(&alice(), &room, attempt("c-1", &[&file, &never]))
                .await
        }
    });
    gate.entered().await;
    let stored = chat
        .sending
        .send_message(&alice(), &room, attempt("c-1", &[&file]))
        .await
        .unwrap();
    assert_eq!(stored.message.attachments[0].id, file);
    gate.release();
    // Refused (its second file was never uploaded), the first attempt is a repeat of the
    // stored send, and is answered with its message.
    let answered = first.await.unwrap().unwrap();
    assert!(!answered.created);
    assert_eq!(answered.message.id, stored.message.id);
    assert!(
        !claimable(&chat, &room, &file).await,
        "the stored message's file was released"
    );
}

/// Two attempts of one send (one client id): one claims a file and is still on its way; the
/// other finds the claim, then fails. The failed one took no claim of its own, so it releases
/// none: the first stores its message with its file still claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_of_a_send_never_releases_a_claim_another_attempt_took() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let second_file = uploaded(&chat, &room, &objects).await;
    let never = declared(&chat, &room).await;
    // The first attempt claims the file, then waits at its second file's HEAD.
    let gate = faulty.hold_nth("head", 2);
    let first = tokio::spawn({
        let (chat, room, file, second_file) = (chat.clone(), room.clone(), file.clone(), second_file.clone());
        async move {
            chat.sending
                .send_message(&alice(), &room, attempt("c-2", &[&file, &second_file]))
                .await
        }
    });
    gate.entered().await;
    let failed = chat
        .sending
        .send_message(&alice(), &room, attempt("c-2", &[&file, &never]))
        .await;
    assert_eq!(failed.unwrap_err().code(), "NOT_FOUND");
    gate.release();
    let stored = first.await.unwrap().unwrap();
    assert_eq!(stored.message.attachments.len(), 2);
    assert!(
        !claimable(&chat, &room, &file).await,
        "the stored message's file was released"
    );
}

/// Housekeeping expiring an upload a day old and a send naming it at that moment: the send
/// either fails, or its message keeps the file; never a message whose file is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_sent_while_housekeeping_expires_it_is_never_left_on_a_message_without_its_file() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let gate = faulty.hold_nth("delete", 1);
    let housekeeping = tokio::spawn({
        let chat = chat.clone();
        async move {
            chat.housekeeping(chrono::Utc::now() + chrono::Duration::hours(25))
                .await
        }
    });
    gate.entered().await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, naming(&file, "just in time"))
        .await;
    gate.release();
    housekeeping.await.unwrap().unwrap();
    if let Err(e) = &sent {
        assert_eq!(e.code(), "NOT_FOUND", "{e}");
    } else {
        assert!(
            chat.files.attachment_link(&alice(), &room, &file).await.is_ok(),
            "the row is gone"
        );
        let upload = chat.wiring.store.uploads.upload(&room, &file).await.unwrap().unwrap();
        assert!(
            objects
                .head(&ObjectKey::parse(&upload.key).unwrap())
                .await
                .unwrap()
                .is_some()
        );
    }
}

/// A forward whose second file cannot be copied fails in that room, and leaves no copy of
/// the first file behind there.
#[tokio::test]
async fn a_forward_whose_second_copy_fails_leaves_no_copied_object_behind() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let files = [
        uploaded(&chat, &room, &objects).await,
        uploaded(&chat, &room, &objects).await,
    ];
    let source = NewMessage {
        attachments: Some(files.to_vec()),
        ..NewMessage::text("two files")
    };
    let source = chat
        .sending
        .send_message(&alice(), &room, source)
        .await
        .unwrap()
        .message;
    let target = other_room(&chat).await;
    faulty.fail_nth("put", 2);
    let forward = Forward {
        room_ids: vec![target.to_string()],
    };
    let outcome = chat
        .editing
        .forward_message(&alice(), &room, &source.key(), forward)
        .await
        .unwrap();
    assert_eq!(outcome[0].copy.as_ref().unwrap_err().code(), "UNAVAILABLE");
    assert_eq!(
        objects.list(&format!("{target}/")).await.unwrap(),
        Vec::<ObjectKey>::new()
    );
}

/// A forward whose store fails after the first file's object was copied (its row cannot be
/// written) leaves no copied object behind.
#[tokio::test]
async fn a_forward_whose_store_fails_after_a_copy_leaves_no_copied_object_behind() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let source = chat
        .sending
        .send_message(&alice(), &room, naming(&file, "a file"))
        .await
        .unwrap()
        .message;
    let target = other_room(&chat).await;
    faults.fail_operation(
        "insert",
        Some(&chat.wiring.store.schema.metadata),
        1,
        StoreError::unavailable("disk gone"),
    );
    let forward = Forward {
        room_ids: vec![target.to_string()],
    };
    let outcome = chat
        .editing
        .forward_message(&alice(), &room, &source.key(), forward)
        .await
        .unwrap();
    assert_eq!(outcome[0].copy.as_ref().unwrap_err().code(), "UNAVAILABLE");
    assert_eq!(
        objects.list(&format!("{target}/")).await.unwrap(),
        Vec::<ObjectKey>::new()
    );
}

/// Two attempts of one send (one client id): one claims a file and waits; the other finds the
/// claim and goes on; the first fails and releases the file while the second has not stored
/// its message yet. The second, once stored, claims its file again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_stores_a_send_keeps_its_files_claimed_when_another_attempt_released_them() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let second_file = uploaded(&chat, &room, &objects).await;
    let never = declared(&chat, &room).await;
    // The failing attempt waits at its second HEAD (after claiming the file), the storing one
    // at its second HEAD too (after finding the claim): the fourth HEAD in all.
    let failing_gate = faulty.hold_nth("head", 2);
    let storing_gate = faulty.hold_nth("head", 4);
    let failing = tokio::spawn({
        let (chat, room, file, never) = (chat.clone(), room.clone(), file.clone(), never.clone());
        async move {
            chat.sending
                .send_message(&alice(), &room, attempt("c-3", &[&file, &never]))
                .await
        }
    });
    failing_gate.entered().await;
    let storing = tokio::spawn({
        let (chat, room, file, second_file) = (chat.clone(), room.clone(), file.clone(), second_file.clone());
        async move {
            chat.sending
                .send_message(&alice(), &room, attempt("c-3", &[&file, &second_file]))
                .await
        }
    });
    storing_gate.entered().await;
    failing_gate.release();
    assert_eq!(failing.await.unwrap().unwrap_err().code(), "NOT_FOUND");
    storing_gate.release();
    let stored = storing.await.unwrap().unwrap();
    assert_eq!(stored.message.attachments.len(), 2);
    assert!(
        !claimable(&chat, &room, &file).await,
        "the stored message's file was released"
    );
}

/// A forward into two rooms whose message write fails in one of them: that room keeps no copy
/// of the file, the other keeps its own.
#[tokio::test]
async fn a_forward_that_fails_in_one_of_two_rooms_leaves_no_copy_in_that_room() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let source = chat
        .sending
        .send_message(&alice(), &room, naming(&file, "a file"))
        .await
        .unwrap()
        .message;
    let targets = [other_room(&chat).await, other_room(&chat).await];
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let forward = Forward {
        room_ids: targets.iter().map(ToString::to_string).collect(),
    };
    let outcomes = chat
        .editing
        .forward_message(&alice(), &room, &source.key(), forward)
        .await
        .unwrap();
    assert_eq!(outcomes.iter().filter(|o| o.copy.is_err()).count(), 1, "{outcomes:?}");
    for (target, outcome) in targets.iter().zip(&outcomes) {
        let copies = objects.list(&format!("{target}/")).await.unwrap();
        match &outcome.copy {
            Ok(_) => assert_eq!(copies.len(), 1, "{copies:?}"),
            Err(e) => assert_eq!((e.code(), copies), ("UNAVAILABLE", Vec::new())),
        }
    }
}

/// A scheduled item with `files`, due in three days.
fn later_with(files: &[&str]) -> NewScheduled {
    NewScheduled {
        text: Some("later".into()),
        poll: None,
        attachments: Some(files.iter().map(|id| id.to_string()).collect()),
        send_at: chrono::Utc::now() + chrono::Duration::days(3),
    }
}

/// The key of upload `id`'s object, which must be stored.
async fn object_of(chat: &Chat, room: &RoomId, objects: &Objects, id: &str) -> ObjectKey {
    let upload = chat
        .wiring
        .store
        .uploads
        .upload(room, id)
        .await
        .unwrap()
        .expect("the upload row");
    let key = ObjectKey::parse(&upload.key).unwrap();
    assert!(objects.head(&key).await.unwrap().is_some(), "uploaded");
    key
}

/// An upload a scheduled item held past a day (housekeeping saw it held then) and gave back
/// when it was cancelled is unattached again: housekeeping deletes it a day after, object and
/// row, instead of keeping it forever.
#[tokio::test]
async fn an_upload_released_after_a_day_held_is_expired_a_day_after_its_release() {
    let (chat, room, objects) = with_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let key = object_of(&chat, &room, &objects, &file).await;
    let item = chat
        .scheduler
        .schedule_message(&alice(), &room, later_with(&[&file]))
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let report = chat.housekeeping(now + chrono::Duration::hours(25)).await.unwrap();
    assert_eq!(report.uploads_expired, 0, "a held upload stays");
    chat.scheduler
        .cancel_scheduled(&alice(), &room, &item.id)
        .await
        .unwrap();
    let report = chat.housekeeping(now + chrono::Duration::hours(50)).await.unwrap();
    assert_eq!(report.uploads_expired, 1, "the released upload was never expired");
    assert!(
        objects.head(&key).await.unwrap().is_none(),
        "its object stays in storage"
    );
    assert!(chat.wiring.store.uploads.upload(&room, &file).await.unwrap().is_none());
}
/// An erasure of a user whose scheduled item waits with a file deletes that file, object and
/// row: no message will ever carry it, and the item holding it is gone.
#[tokio::test]
async fn an_erasure_deletes_the_files_its_users_waiting_scheduled_items_hold() {
    let (chat, room, objects) = with_objects(Tables::new(store())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let file = uploaded_by(&chat, &bob, &room, &objects).await;
    let key = object_of(&chat, &room, &objects, &file).await;
    chat.scheduler
        .schedule_message(&bob, &room, later_with(&[&file]))
        .await
        .unwrap();
    let (_, run) = chat.eraser.begin_erasure(&bob).await.unwrap();
    chat.eraser.erase_everything(&mut run.unwrap()).await.unwrap();
    assert!(
        objects.head(&key).await.unwrap().is_none(),
        "bob's file outlives his erasure"
    );
    assert!(chat.wiring.store.uploads.upload(&room, &file).await.unwrap().is_none());
}

/// A due scheduled send whose attempt fails for the server's reasons gives back none of the
/// item's files: its attempt found them held by the item's own claim, not taken by itself. No
/// other send can take them meanwhile, and the next attempt sends them.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_attempt_of_a_due_scheduled_send_keeps_the_items_files_for_the_next() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let clock = ManualClock::at(chrono::Utc::now());
    let chat = chat.with_time(Arc::new(clock.clone()));
    let file = uploaded(&chat, &room, &objects).await;
    let input = NewScheduled {
        send_at: clock.now() + chrono::Duration::seconds(10),
        ..later_with(&[&file])
    };
    let item = chat.scheduler.schedule_message(&alice(), &room, input).await.unwrap();
    clock.advance(chrono::Duration::seconds(10));
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let run = chat.scheduler.send_due_messages().await.unwrap();
    assert_eq!((run.sent, run.failed), (0, 1), "{run:?}");
    assert!(
        !claimable(&chat, &room, &file).await,
        "the failed attempt gave the item's file back"
    );
    clock.advance(CLAIM_LEASE);
    assert_eq!(chat.scheduler.send_due_messages().await.unwrap().sent, 1);
    let done = chat
        .scheduler
        .scheduled_item(&room, &alice().user_id, &item.id)
        .await
        .unwrap()
        .unwrap();
    let message = chat
        .reading
        .get_message(
            &alice(),
            &room,
            &crate::keys::MessageKey::parse(done.message_id.as_deref().unwrap()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        message.attachments.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        [file.as_str()]
    );
}

/// Two attempts of one send (one client id) naming different files, the second storing its
/// message first: the first is answered as a repeat of that message, and gives back the file
/// it claimed that the message does not carry, instead of holding it with no message for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_answered_as_a_repeat_gives_back_a_file_the_stored_message_does_not_carry() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let first = uploaded(&chat, &room, &objects).await;
    let second = uploaded(&chat, &room, &objects).await;
    // The first attempt stops at its file's check, past the repeat lookup.
    let gate = faulty.hold_nth("head", 1);
    let held = tokio::spawn({
        let (chat, room, first) = (chat.clone(), room.clone(), first.clone());
        async move {
            chat.sending
                .send_message(&alice(), &room, attempt("c-1", &[&first]))
                .await
        }
    });
    gate.entered().await;
    let stored = chat
        .sending
        .send_message(&alice(), &room, attempt("c-1", &[&second]))
        .await
        .unwrap();
    gate.release();
    let repeat = held.await.unwrap().unwrap();
    assert!(!repeat.created);
    assert_eq!(repeat.message.id, stored.message.id);
    assert!(
        claimable(&chat, &room, &first).await,
        "a file no message carries stays claimed"
    );
    assert!(!claimable(&chat, &room, &second).await, "the stored message's file");
}

/// A tombstone whose file's object cannot be deleted at once (the store down for a moment)
/// leaves it to housekeeping, which deletes it a day later: no object outlives its message
/// for good.
#[tokio::test]
async fn an_object_a_tombstone_could_not_delete_is_deleted_by_housekeeping_a_day_later() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let file = uploaded(&chat, &room, &objects).await;
    let key = object_of(&chat, &room, &objects, &file).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, naming(&file, "soon gone"))
        .await
        .unwrap();
    // Housekeeping has seen the file on its message and forgotten it.
    chat.housekeeping(chrono::Utc::now() + chrono::Duration::hours(25))
        .await
        .unwrap();
    faulty.fail_nth("delete", 1);
    chat.editing
        .delete_message(&alice(), &room, &sent.message.key())
        .await
        .unwrap();
    assert!(objects.head(&key).await.unwrap().is_some(), "the delete failed");
    chat.housekeeping(chrono::Utc::now() + chrono::Duration::hours(25))
        .await
        .unwrap();
    assert!(objects.head(&key).await.unwrap().is_none(), "the object stays for good");
}

/// A forward whose copy's row cannot be written and whose copied object then cannot be
/// deleted either (the stores down for a moment) leaves that object to housekeeping, which
/// deletes it a day later.
#[tokio::test]
async fn a_copied_object_a_failed_forward_could_not_delete_is_deleted_by_housekeeping_a_day_later() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let dir = std::env::temp_dir().join(format!("tt-objects-{}", uuid::Uuid::new_v4().simple()));
    let faulty = FaultyObjects::new(EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap());
    let objects = Objects::new(faulty.clone());
    let chat = chat.with_attachments(AttachmentSettings {
        objects: objects.clone(),
        embedded: None,
        rules: AttachmentRules::default(),
        clock: Arc::new(SystemClock),
    });
    let file = uploaded(&chat, &room, &objects).await;
    let source = chat
        .sending
        .send_message(&alice(), &room, naming(&file, "a file"))
        .await
        .unwrap()
        .message;
    let target = other_room(&chat).await;
    faults.fail_operation(
        "insert",
        Some(&chat.wiring.store.schema.metadata),
        1,
        StoreError::unavailable("disk gone"),
    );
    faulty.fail_nth("delete", 1);
    let forward = Forward {
        room_ids: vec![target.to_string()],
    };
    let outcome = chat
        .editing
        .forward_message(&alice(), &room, &source.key(), forward)
        .await
        .unwrap();
    assert_eq!(outcome[0].copy.as_ref().unwrap_err().code(), "UNAVAILABLE");
    assert_eq!(
        objects.list(&format!("{target}/")).await.unwrap().len(),
        1,
        "the delete failed"
    );
    chat.housekeeping(chrono::Utc::now() + chrono::Duration::hours(25))
        .await
        .unwrap();
    assert_eq!(
        objects.list(&format!("{target}/")).await.unwrap(),
        Vec::<ObjectKey>::new(),
        "the copied object stays for good"
    );
}

/// A scheduled item's last attempt fails for the server's reasons while a stopped sender's
/// attempt (its claim lapsed) stores the message after all: the item is recorded as sent with
/// that message, whose files stay claimed, never refused with its files given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_scheduled_attempt_failing_after_another_stored_the_message_records_it_sent_and_keeps_its_files() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(faults.clone())).await;
    let clock = ManualClock::at(chrono::Utc::now());
    let chat = chat.with_time(Arc::new(clock.clone()));
    let file = uploaded(&chat, &room, &objects).await;
    let input = NewScheduled {
        send_at: clock.now() + chrono::Duration::seconds(10),
        ..later_with(&[&file])
    };
    let item = chat.scheduler.schedule_message(&alice(), &room, input).await.unwrap();
    clock.advance(chrono::Duration::seconds(10));
    // Four senders claimed it and stopped; the last one's send is still under way.
    for _ in 1..crate::scheduled::MAX_ATTEMPTS {
        assert!(
            chat.scheduler
                .claim_due_item(&room, &alice().user_id, &item.id)
                .await
                .unwrap()
        );
        clock.advance(CLAIM_LEASE);
    }
    // The last attempt stops at its file's check, past its look for a stored message.
    let gate = faulty.hold_nth("head", 1);
    let last = tokio::spawn({
        let chat = chat.clone();
        async move { chat.scheduler.send_due_messages().await }
    });
    gate.entered().await;
    let stored = chat
        .sending
        .send_message(&alice(), &room, item.message())
        .await
        .unwrap()
        .message;
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    gate.release();
    last.await.unwrap().unwrap();
    let done = chat
        .scheduler
        .scheduled_item(&room, &alice().user_id, &item.id)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !claimable(&chat, &room, &file).await,
        "the stored message's file was given back"
    );
    assert_eq!(
        (done.status, done.message_id.as_deref()),
        (ScheduledStatus::Sent, Some(stored.id.as_str()))
    );
}

/// `:roomparrot:` made from `image` as alice (the room's owner).
async fn make_emoji(chat: &Chat, room: &RoomId, image: &str) -> crate::error::Result<crate::emoji::CustomEmoji> {
    let emoji = crate::emoji::NewCustomEmoji {
        name: "roomparrot".into(),
        attachment_id: image.to_owned(),
    };
    chat.room_emoji.create(&alice(), room, emoji).await
}

/// An emoji whose row committed though the store reported a failure keeps its image claimed:
/// the image is the emoji's, and no message may carry it.
#[tokio::test(flavor = "multi_thread")]
async fn an_emoji_whose_write_committed_and_then_failed_keeps_its_image() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let image = uploaded(&chat, &room, &objects).await;
    faults.fail_operation_after_applying(
        "transact",
        Some(&chat.wiring.store.schema.rooms),
        1,
        StoreError::unavailable("timed out"),
    );
    assert_eq!(
        make_emoji(&chat, &room, &image).await.unwrap_err().code(),
        "UNAVAILABLE"
    );
    let listed = chat.room_emoji.list(&alice(), &room).await.unwrap();
    assert_eq!(listed.len(), 1, "it committed");
    assert!(!claimable(&chat, &room, &image).await, "its image stays the emoji's");
}

/// An emoji whose image could not be deleted stays, so deleting it again deletes both: no
/// image is left that nothing names.
#[tokio::test]
async fn an_emoji_whose_image_could_not_be_deleted_stays_until_a_delete_succeeds() {
    let (chat, room, objects, faulty) = with_faulty_objects(Tables::new(store())).await;
    let image = uploaded(&chat, &room, &objects).await;
    make_emoji(&chat, &room, &image).await.unwrap();
    // The thumbnail's delete (there is none) and then the file's, which fails.
    faulty.fail_nth("delete", 2);
    let failed = chat.room_emoji.delete(&alice(), &room, "roomparrot").await;
    assert_eq!(failed.unwrap_err().code(), "UNAVAILABLE");
    assert_eq!(chat.room_emoji.list(&alice(), &room).await.unwrap().len(), 1);
    chat.room_emoji.delete(&alice(), &room, "roomparrot").await.unwrap();
    assert!(chat.room_emoji.list(&alice(), &room).await.unwrap().is_empty());
    let link = chat.files.attachment_link(&alice(), &room, &image).await;
    assert_eq!(link.unwrap_err().code(), "NOT_FOUND");
    assert!(
        objects.list(&format!("{room}/")).await.unwrap().is_empty(),
        "no object left"
    );
}
