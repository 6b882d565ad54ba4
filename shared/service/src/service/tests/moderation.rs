//! Service-level failure paths of moderation: a store that fails in the middle of an action
//! leaves neither the action nor its log line, one that commits and then reports an error
//! leaves both; and a report group whose message was deleted around the delete path is closed
//! by the queue.

use crate::ids::RoomId;
use crate::members::{Ban, Timeout};
use crate::messages::send::NewMessage;
use crate::moderation::{Kick, ModerationAction, ReadModerationLog};
use crate::permissions::Permissions;
use crate::reports::NewReport;
use crate::roles::NewRole;
use crate::rooms::RoomChange;
use crate::service::Chat;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};

fn unavailable() -> StoreError {
    StoreError::new(ErrorKind::Unavailable, "injected")
}

async fn logged(chat: &Chat, room: &RoomId) -> Vec<ModerationAction> {
    let page = chat
        .reading
        .moderation_log(&alice(), room, ReadModerationLog::default())
        .await
        .unwrap();
    page.entries.iter().map(|e| e.action).collect()
}

/// Each action of the `Rooms` partition, tried once against a failing transaction and once
/// against one that commits and then answers an error.
#[tokio::test]
async fn an_action_and_its_log_line_land_together_or_not_at_all() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let rooms = chat.wiring.store.schema().rooms.clone();

    // Failing before anything is applied: no action, no line.
    let soon = chrono::Utc::now() + chrono::Duration::hours(1);
    let timeout = || Timeout {
        until: Some(soon),
        reason: Some("calm".into()),
    };
    faults.fail_operation("transact", Some(&rooms), 1, unavailable());
    assert!(
        chat.moderation
            .timeout(&alice(), &room, &bob.user_id, timeout())
            .await
            .is_err()
    );
    faults.fail_operation("transact", Some(&rooms), 1, unavailable());
    assert!(
        chat.moderation
            .kick(&alice(), &room, &bob.user_id, Kick::default())
            .await
            .is_err()
    );
    faults.fail_operation("transact", Some(&rooms), 1, unavailable());
    assert!(
        chat.moderation
            .ban(&alice(), &room, &bob.user_id, Ban::default())
            .await
            .is_err()
    );
    let role = NewRole {
        name: "mods".into(),
        permissions: Permissions::default(),
        position: 3,
    };
    faults.fail_operation("transact", Some(&rooms), 1, unavailable());
    assert!(chat.access.create_role(&alice(), &room, role.clone()).await.is_err());
    let change = RoomChange {
        slowmode_seconds: Some(9),
        ..RoomChange::default()
    };
    faults.fail_operation("transact", Some(&rooms), 1, unavailable());
    assert!(chat.rooms.update_room(&alice(), &room, change.clone()).await.is_err());

    let member = chat
        .wiring
        .store
        .members
        .member(&room, &bob.user_id)
        .await
        .unwrap()
        .expect("still a member");
    assert_eq!(member.timeout_until, None, "no timeout");
    assert!(!chat.access.is_banned(&room, &bob.user_id).await.unwrap());
    assert!(chat.access.list_roles(&alice(), &room).await.unwrap().is_empty());
    assert_eq!(chat.rooms.get_room(&alice(), &room).await.unwrap().slowmode_seconds, 0);
    assert_eq!(logged(&chat, &room).await, [], "no line without its action");

    // Committed, then answered with an error: both landed.
    faults.fail_operation_after_applying("transact", Some(&rooms), 1, unavailable());
    assert!(
        chat.moderation
            .timeout(&alice(), &room, &bob.user_id, timeout())
            .await
            .is_err()
    );
    faults.fail_operation_after_applying("transact", Some(&rooms), 1, unavailable());
    assert!(chat.rooms.update_room(&alice(), &room, change).await.is_err());
    faults.fail_operation_after_applying("transact", Some(&rooms), 1, unavailable());
    assert!(
        chat.moderation
            .ban(&alice(), &room, &bob.user_id, Ban::default())
            .await
            .is_err()
    );
    let member = chat.wiring.store.members.member(&room, &bob.user_id).await.unwrap();
    assert!(member.is_none(), "the ban removed the membership");
    assert!(chat.access.is_banned(&room, &bob.user_id).await.unwrap());
    assert_eq!(chat.rooms.get_room(&alice(), &room).await.unwrap().slowmode_seconds, 9);
    assert_eq!(
        logged(&chat, &room).await,
        [
            ModerationAction::Ban,
            ModerationAction::RoomSettingsChanged,
            ModerationAction::Timeout
        ],
        "no action without its line"
    );
}

/// A failing resolution leaves the group open and logs nothing.
#[tokio::test]
async fn a_dismissal_that_fails_leaves_the_reports_open_and_unlogged() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("hm"))
        .await
        .unwrap();
    let id = sent.message.id.clone();
    let reason = NewReport { reason: "rude".into() };
    chat.editing
        .report_message(&bob, &room, &crate::keys::MessageKey::parse(&id).unwrap(), reason)
        .await
        .unwrap();

    faults.fail_operation("transact", Some(&chat.wiring.store.schema().rooms), 1, unavailable());
    let dismiss = || crate::reports::ResolveReports {
        action: crate::reports::ResolveAction::Dismiss,
        reason: None,
    };
    assert!(
        chat.editing
            .resolve_reports(
                &alice(),
                &room,
                &crate::keys::MessageKey::parse(&id).unwrap(),
                dismiss()
            )
            .await
            .is_err()
    );
    assert_eq!(
        chat.editing.report_queue(&alice(), &room).await.unwrap().groups.len(),
        1
    );
    assert_eq!(logged(&chat, &room).await, []);
    chat.editing
        .resolve_reports(
            &alice(),
            &room,
            &crate::keys::MessageKey::parse(&id).unwrap(),
            dismiss(),
        )
        .await
        .unwrap();
    assert!(
        chat.editing
            .report_queue(&alice(), &room)
            .await
            .unwrap()
            .groups
            .is_empty()
    );
    assert_eq!(logged(&chat, &room).await, [ModerationAction::ReportsResolved]);
}

/// A message tombstoned around the delete path (as a crash between its two steps would leave
/// it) does not stay in the queue: the queue closes its group, by whoever deleted it.
#[tokio::test]
async fn the_queue_closes_the_reports_of_a_message_deleted_around_the_delete_path() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    let sent = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("oops"))
        .await
        .unwrap();
    let id = sent.message.id.clone();
    chat.editing
        .report_message(
            &alice(),
            &room,
            &crate::keys::MessageKey::parse(&id).unwrap(),
            NewReport { reason: "x".into() },
        )
        .await
        .unwrap();
    chat.wiring
        .store
        .messages
        .rewrite_message_versioned(&room, &sent.message.key(), |m| {
            m.tombstone("bob", chrono::Utc::now());
            Ok(())
        })
        .await
        .unwrap();
    assert!(
        chat.editing
            .report_queue(&alice(), &room)
            .await
            .unwrap()
            .groups
            .is_empty()
    );
    let page = chat
        .reading
        .moderation_log(&alice(), &room, ReadModerationLog::default())
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(page.entries[0].action, ModerationAction::ReportsResolved);
    assert_eq!(page.entries[0].actor_id.as_deref(), Some("bob"));
}

/// A webhook's change and its log line commit in one transaction: a store failing it leaves
/// neither (no webhook, no rename, no line), and the next try writes both.
#[tokio::test]
async fn a_failed_webhook_change_leaves_neither_the_change_nor_its_line() {
    use crate::webhooks::WebhookName;
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let name = |n: &str| WebhookName {
        name: n.into(),
        automation: None,
    };
    let rooms = Some(&chat.wiring.store.schema.rooms);
    faults.fail_operation("transact", rooms, 1, unavailable());
    assert!(chat.sending.create_webhook(&alice(), &room, name("CI")).await.is_err());
    assert!(chat.sending.list_webhooks(&alice(), &room).await.unwrap().is_empty());
    assert_eq!(logged(&chat, &room).await, []);
    let hook = chat
        .sending
        .create_webhook(&alice(), &room, name("CI"))
        .await
        .unwrap()
        .webhook;
    faults.fail_operation("transact", rooms, 1, unavailable());
    assert!(
        chat.sending
            .rename_webhook(&alice(), &room, &hook.id, name("Deploys"))
            .await
            .is_err()
    );
    assert_eq!(chat.sending.list_webhooks(&alice(), &room).await.unwrap()[0].name, "CI");
    faults.fail_operation("transact", rooms, 1, unavailable());
    assert!(chat.sending.delete_webhook(&alice(), &room, &hook.id).await.is_err());
    assert_eq!(chat.sending.list_webhooks(&alice(), &room).await.unwrap().len(), 1);
    assert_eq!(logged(&chat, &room).await, [ModerationAction::WebhookCreated]);
}
