//! Service-level tests of attachments: races between sends naming one upload, and a send
//! whose write fails, on a real embedded store (objects under a scratch directory).

use std::sync::Arc;

use crate::adapters::clock::SystemClock;
use crate::adapters::objects::embedded::EmbeddedObjects;
use crate::adapters::objects::{ObjectKey, Objects};
use crate::attachments::{AttachmentRules, NewUpload};
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::rooms::RoomChange;
use crate::service::Chat;
use crate::service::attachments::AttachmentSettings;
use crate::service::testing::{alice, chat_on, store};
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
    let answer = chat
        .create_upload(
            &alice(),
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
        tokio::spawn(async move { chat.send_message(&alice(), &room, naming(&id, &format!("m{i}"))).await })
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
        Some(&chat.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let failed = chat
        .send_message(&alice(), &room, naming(&id, "lost"))
        .await
        .unwrap_err();
    assert_eq!(failed.code(), "UNAVAILABLE");
    let sent = chat.send_message(&alice(), &room, naming(&id, "kept")).await.unwrap();
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
        .send_message(&alice(), &room, naming(&id, "soon gone"))
        .await
        .unwrap();
    faults.fail_operation(
        "query",
        Some(&chat.store.schema.metadata),
        1,
        StoreError::unavailable("disk gone"),
    );
    let deleted = chat.delete_message(&alice(), &room, &sent.message.id).await;
    assert_eq!(
        deleted.unwrap_err().code(),
        "UNAVAILABLE",
        "the companions' delete failed"
    );
    let link = chat.attachment_link(&alice(), &room, &id).await;
    assert_eq!(link.unwrap_err().code(), "NOT_FOUND");
}

/// A purge whose second batch fails has already committed its first: the files of the
/// messages that batch purged are gone with them (nothing would ever find them again), and a
/// second run purges the rest.
#[tokio::test]
async fn a_purge_that_fails_in_a_later_batch_deletes_the_files_of_the_batches_it_committed() {
    let faults = FaultyTables::new(store());
    let (chat, room, objects) = with_objects(Tables::new(faults.clone())).await;
    let id = uploaded(&chat, &room, &objects).await;
    chat.send_message(&alice(), &room, naming(&id, "oldest")).await.unwrap();
    // 31 messages: two batches of the purge, the file in the first.
    for i in 0..30 {
        chat.send_message(&alice(), &room, NewMessage::text(format!("m{i}")))
            .await
            .unwrap();
    }
    let retention = RoomChange {
        retention_seconds: Some(Some(3600)),
        ..RoomChange::default()
    };
    chat.update_room(&alice(), &room, retention).await.unwrap();
    let later = chrono::Utc::now() + chrono::Duration::seconds(3601);
    let messages = Some(&chat.store.schema.messages);
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
    assert!(chat.store.upload(&room, &id).await.unwrap().is_none());
    assert_eq!(
        objects.list(&format!("{room}/")).await.unwrap(),
        Vec::<ObjectKey>::new()
    );
}
