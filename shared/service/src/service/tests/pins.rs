//! Service-level tests of the pin index: messages pinned before pin rows existed, a purge,
//! and a pin whose transaction fails, on a real embedded store.

use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::read::ReadPins;
use crate::messages::send::NewMessage;
use crate::messages::{Message, MessageType};
use crate::service::Chat;
use crate::service::testing::{alice, chat_on, store};
use crate::storage::faults::FaultyTables;
use crate::storage::{Entity, StoreError, Tables, UpdateMode, Value};
use crate::store::schema::pin_key;

async fn pinned(chat: &Chat, room: &RoomId) -> Vec<String> {
    let page = chat
        .reading
        .read_pins(&alice(), room, ReadPins::default())
        .await
        .unwrap();
    page.messages.into_iter().map(|m| m.id).collect()
}

async fn send(chat: &Chat, room: &RoomId, text: &str) -> Message {
    chat.sending
        .send_message(&alice(), room, NewMessage::text(text))
        .await
        .unwrap()
        .message
}

/// Sets the pin flag alone, as a pin did before pin rows existed.
async fn pin_as_before(chat: &Chat, room: &RoomId, id: &str) {
    let flag = Entity::new(room.as_str(), id).with("isPinned", Value::Bool(true));
    chat.wiring
        .store
        .tables
        .upsert(&chat.wiring.store.schema.messages, &flag, UpdateMode::Merge)
        .await
        .unwrap();
}

async fn pin_row(chat: &Chat, room: &RoomId, id: &str) -> Option<Entity> {
    let key = pin_key(&MessageKey::parse(id).unwrap());
    chat.wiring
        .store
        .tables
        .get(&chat.wiring.store.schema.messages, room.as_str(), &key)
        .await
        .unwrap()
}

async fn pin_lines(chat: &Chat, room: &RoomId) -> usize {
    let (messages, _) = chat
        .wiring
        .store
        .messages
        .messages_newest_first(room, None, 100)
        .await
        .unwrap();
    messages.iter().filter(|m| m.kind == MessageType::PinMessage).count()
}

#[tokio::test]
async fn a_message_pinned_before_pin_rows_is_listed_once_pinned_again_without_a_second_line() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let old = send(&chat, &room, "pinned long ago").await;
    pin_as_before(&chat, &room, &old.id).await;
    assert!(
        chat.reading
            .get_message(&alice(), &room, &old.key())
            .await
            .unwrap()
            .is_pinned
    );
    assert_eq!(pinned(&chat, &room).await, Vec::<String>::new(), "no row, not listed");
    let again = chat.editing.pin_message(&alice(), &room, &old.key()).await.unwrap();
    assert!(again.is_pinned);
    assert_eq!(pinned(&chat, &room).await, vec![old.id.clone()]);
    assert_eq!(pin_lines(&chat, &room).await, 0, "it was pinned already: no line");
}

#[tokio::test]
async fn an_unpin_of_a_message_pinned_before_pin_rows_lands() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let old = send(&chat, &room, "pinned long ago").await;
    pin_as_before(&chat, &room, &old.id).await;
    let unpinned = chat.editing.unpin_message(&alice(), &room, &old.key()).await.unwrap();
    assert!(!unpinned.is_pinned);
    assert!(
        !chat
            .reading
            .get_message(&alice(), &room, &old.key())
            .await
            .unwrap()
            .is_pinned
    );
    assert!(pin_row(&chat, &room, &old.id).await.is_none());
}

#[tokio::test]
async fn a_purged_pinned_message_leaves_the_pins_and_takes_its_row() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let message = send(&chat, &room, "expires").await;
    chat.editing.pin_message(&alice(), &room, &message.key()).await.unwrap();
    assert_eq!(pinned(&chat, &room).await, vec![message.id.clone()]);
    let cutoff = chrono::Utc::now() + chrono::Duration::minutes(1);
    let expired = chat.wiring.store.purge.expired_messages(&room, cutoff).await.unwrap();
    let purged = chat.wiring.store.purge.purge_messages(&room, &expired).await.unwrap();
    assert!(purged >= 1);
    assert!(
        pin_row(&chat, &room, &message.id).await.is_none(),
        "the row went with it"
    );
    assert_eq!(pinned(&chat, &room).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_pin_row_whose_message_is_gone_is_skipped_and_removed() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let kept = send(&chat, &room, "kept").await;
    let gone = send(&chat, &room, "gone").await;
    for id in [&kept.id, &gone.id] {
        chat.editing
            .pin_message(&alice(), &room, &crate::keys::MessageKey::parse(id).unwrap())
            .await
            .unwrap();
    }
    // A crash between a purge's deletes: the message went, its pin row stayed.
    chat.wiring
        .store
        .tables
        .delete(
            &chat.wiring.store.schema.messages,
            room.as_str(),
            &gone.id,
            &crate::storage::IfMatch::Any,
        )
        .await
        .unwrap();
    assert_eq!(pinned(&chat, &room).await, vec![kept.id.clone()]);
    assert!(pin_row(&chat, &room, &gone.id).await.is_none(), "the read removed it");
    assert!(pin_row(&chat, &room, &kept.id).await.is_some());
}

#[tokio::test]
async fn a_pin_whose_transaction_fails_leaves_neither_flag_nor_row() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let message = send(&chat, &room, "not pinned").await;
    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema.messages),
        1,
        StoreError::unavailable("disk gone"),
    );
    let err = chat
        .editing
        .pin_message(&alice(), &room, &message.key())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE");
    assert!(
        !chat
            .reading
            .get_message(&alice(), &room, &message.key())
            .await
            .unwrap()
            .is_pinned
    );
    assert!(pin_row(&chat, &room, &message.id).await.is_none());
    assert_eq!(pinned(&chat, &room).await, Vec::<String>::new());
    assert_eq!(pin_lines(&chat, &room).await, 0);
}
