//! The notification consumer driven through the service: redelivered events, done records
//! that fail, and endpoints that never answer.

use std::time::Duration;

use crate::adapters::push::testing::{a_push, subscription_at};
use crate::adapters::push::{Outcome, PushSender};
use crate::error::Error;
use crate::events::MessageEvent;
use crate::messages::send::NewMessage;
use crate::notify::PushSettings;
use crate::notify::*;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::Tables;

/// A VAPID key made for this test.
fn vapid_key() -> String {
    crate::adapters::push::generate_vapid_key().unwrap().0
}

/// Gives bob a push subscription, so an event of the room has someone to push to (an event
/// with nobody to push to is neither claimed nor recorded). Its pushes fail at once: the
/// endpoint is a loopback address the push client does not reach, and a failed push counts
/// as tried.
async fn subscribe_bob(chat: &crate::Chat) {
    let subscription = subscription_at("http://127.0.0.1:9/push/bob");
    (chat.wiring.store.subscriptions)
        .put_subscription(&user("bob").user_id, &subscription)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_redelivered_event_pushes_nothing_again() {
    let (mut chat, room) = chat_on(Tables::new(store())).await;
    chat = chat.with_push(PushSettings {
        sender: Some(PushSender::new(&vapid_key(), "mailto:test@example.com").unwrap()),
        allow_private_endpoints: true,
        ..PushSettings::default()
    });
    chat.rooms.join_room(&user("bob"), &room).await.unwrap();
    subscribe_bob(&chat).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("hi"))
        .await
        .unwrap();
    let event = MessageEvent::of(&sent.message).unwrap();
    // The send's own in-process delivery may be first or still running (then this one is
    // refused as busy, to be retried); either way, exactly one run counts.
    let notify = || async {
        loop {
            match chat.wiring.notifier.notify(&event).await {
                Err(Error::Unavailable(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                other => return other.unwrap(),
            }
        }
    };
    let reports = [notify().await, notify().await];
    assert!(reports[1].repeat, "{reports:?}");
    assert_eq!(reports[1].recipients, 0);
}

/// Every push made, and then the store fails once to record it: the record is tried again,
/// so the event is done and a redelivery after the lease pushes no one a second time.
#[tokio::test]
async fn a_done_record_that_fails_once_is_written_again() {
    let faults = crate::storage::faults::FaultyTables::new(store());
    let (mut chat, room) = chat_on(Tables::new(faults.clone())).await;
    chat.rooms.join_room(&user("bob"), &room).await.unwrap();
    subscribe_bob(&chat).await;
    // Sent before push is configured, so no delivery of its own runs alongside this one.
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("hi"))
        .await
        .unwrap();
    chat = chat.with_push(PushSettings {
        sender: Some(PushSender::new(&vapid_key(), "mailto:test@example.com").unwrap()),
        ..PushSettings::default()
    });
    let metadata = chat.wiring.store.schema().metadata.clone();
    faults.fail_operation(
        "update",
        Some(&metadata),
        1,
        crate::storage::StoreError::unavailable("injected"),
    );
    let event = MessageEvent::of(&sent.message).unwrap();
    let report = chat
        .wiring
        .notifier
        .notify(&event)
        .await
        .expect("the record is written on a later try");
    assert_eq!(report.recipients, 1);
    let state = chat.wiring.notifier.state(&room, &sent.message.id).await.unwrap();
    assert_eq!(state, NotificationState::Done);
}

/// A push service that takes the connection and never answers holds a delivery only until
/// the delivery deadline, however many attempts and waits remain.
#[tokio::test]
async fn a_silent_endpoint_is_given_up_at_the_delivery_deadline() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let (mut chat, _) = chat_on(Tables::new(store())).await;
    let client = crate::adapters::outbound::OutboundClient::new(
        crate::adapters::outbound::Reach::Anywhere,
        crate::adapters::push::REQUEST_TIMEOUT,
    )
    .unwrap();
    let sender = PushSender::new(&vapid_key(), "mailto:test@example.com")
        .unwrap()
        .with_client(client);
    chat = chat.with_push(PushSettings {
        sender: Some(sender.clone()),
        allow_private_endpoints: true,
        delivery_deadline: Duration::from_millis(300),
        ..PushSettings::default()
    });
    let subscription = subscription_at(format!("http://{addr}/push/silent"));
    let push = a_push();
    let outcome = chat
        .wiring
        .notifier
        .deliver_in_time(&sender, user("bob").user_id, subscription, push)
        .await;
    assert_eq!(outcome, Outcome::Failed("not delivered within 300ms".into()));
}
