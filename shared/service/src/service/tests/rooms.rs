//! Service-level failure paths of rooms and membership: a store failing halfway through a ban
//! or a room deletion, and what a deleted message leaves behind.

use crate::members::Ban;
use crate::messages::send::NewMessage;
use crate::service::testing::{alice, chat_on, store, user};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, RangeQuery, StoreError, Tables};
use crate::store::schema::user_key;

fn unavailable() -> StoreError {
    StoreError::new(ErrorKind::Unavailable, "injected")
}

#[tokio::test]
async fn a_ban_is_all_or_nothing() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();

    faults.fail_operation("transact", Some(&chat.wiring.store.schema().rooms), 1, unavailable());
    let failed = chat.moderation.ban(&alice(), &room, &bob.user_id, Ban::default()).await;
    assert_eq!(failed.unwrap_err().code(), "UNAVAILABLE");
    // Neither half landed: bob is still a member, not banned, and can send.
    assert!(!chat.access.is_banned(&room, &bob.user_id).await.unwrap());
    chat.sending
        .send_message(&bob, &room, NewMessage::text("still here"))
        .await
        .unwrap();

    chat.moderation
        .ban(&alice(), &room, &bob.user_id, Ban::default())
        .await
        .unwrap();
    let refused = chat
        .sending
        .send_message(&bob, &room, NewMessage::text("and now?"))
        .await;
    assert_eq!(refused.unwrap_err().code(), "FORBIDDEN");
    assert_eq!(chat.rooms.join_room(&bob, &room).await.unwrap_err().code(), "FORBIDDEN");
}

#[tokio::test]
async fn a_room_delete_that_stops_halfway_is_finished_by_repeating_it() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    for i in 0..5 {
        chat.sending
            .send_message(&bob, &room, NewMessage::text(format!("m{i}")))
            .await
            .unwrap();
    }

    faults.fail_operation(
        "transact",
        Some(&chat.wiring.store.schema().ascending),
        1,
        unavailable(),
    );
    let stopped = chat.rooms.delete_room(&alice(), &room).await;
    assert_eq!(stopped.unwrap_err().code(), "UNAVAILABLE");
    // Half deleted, the room is already gone for everyone...
    assert_eq!(chat.rooms.get_room(&bob, &room).await.unwrap_err().code(), "NOT_FOUND");
    assert_eq!(
        chat.rooms.get_room(&alice(), &room).await.unwrap_err().code(),
        "NOT_FOUND"
    );
    assert_eq!(
        chat.rooms.delete_room(&bob, &room).await.unwrap_err().code(),
        "NOT_FOUND"
    );
    // ...and its owner finishes the job.
    chat.rooms.delete_room(&alice(), &room).await.unwrap();
    for table in chat.wiring.store.schema().room_partitioned() {
        let (rows, _) = chat
            .wiring
            .store
            .tables()
            .query_up_to(table, &RangeQuery::partition(room.as_str(), 1000), 1000)
            .await
            .unwrap();
        assert!(rows.is_empty(), "{table}: {rows:?}");
    }
    for who in [alice(), bob] {
        let index = chat
            .wiring
            .store
            .tables()
            .get(
                &chat.wiring.store.schema().user_rooms,
                &user_key(&who.user_id),
                room.as_str(),
            )
            .await;
        assert!(index.unwrap().is_none());
    }
}

#[tokio::test]
async fn a_deleted_message_leaves_no_reactions_or_votes() {
    let (chat, room) = chat_on(Tables::new(store())).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text("hi"))
        .await
        .unwrap()
        .message;
    chat.reactions.react(&alice(), &room, &sent.key(), "👍").await.unwrap();
    chat.reactions.react(&alice(), &room, &sent.key(), "🎉").await.unwrap();
    chat.editing.delete_message(&alice(), &room, &sent.key()).await.unwrap();
    let companions = crate::store::companions::companion_rows(&room, &sent.key());
    let (rows, _) = chat
        .wiring
        .store
        .tables()
        .query_up_to(&chat.wiring.store.schema().metadata, &companions, 100)
        .await
        .unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    // And a reaction arriving after the delete is refused, not stored.
    let late = chat.reactions.react(&alice(), &room, &sent.key(), "👍").await;
    assert_eq!(late.unwrap_err().code(), "NOT_FOUND");
}

/// A room is listed for housekeeping before it exists. A run that comes in between must not
/// forget it (it did once: the room was then never purged); only a listing whose room never
/// appeared within the grace period is dropped.
#[tokio::test]
async fn housekeeping_keeps_a_room_that_is_still_being_created() {
    let (chat, _) = chat_on(Tables::new(store())).await;
    let coming = crate::ids::RoomId::generate();
    chat.wiring.store.purge.register_room(&coming).await.unwrap();
    let listed = |chat: &crate::service::Chat, room: &crate::ids::RoomId| {
        let (chat, room) = (chat.clone(), room.clone());
        async move {
            chat.wiring
                .store
                .tables()
                .get(
                    &chat.wiring.store.schema().housekeeping,
                    crate::store::schema::HOUSEKEEPING_PARTITION,
                    room.as_str(),
                )
                .await
                .unwrap()
                .is_some()
        }
    };
    chat.housekeeping(chrono::Utc::now()).await.unwrap();
    assert!(
        listed(&chat, &coming).await,
        "kept while the room may still be on its way"
    );
    let later = chrono::Utc::now() + crate::service::housekeeping::REGISTRATION_GRACE + chrono::Duration::minutes(1);
    chat.housekeeping(later).await.unwrap();
    assert!(
        !listed(&chat, &coming).await,
        "dropped once the room plainly never came"
    );
}

/// A ban racing a join: the ban reads no membership, the join inserts one and finds no ban
/// yet, then the ban commits. The ban still wins: no membership is left, nor a listing.
#[tokio::test(flavor = "multi_thread")]
async fn a_ban_racing_a_join_leaves_no_membership() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    // Hold the ban's commit open until the join is done.
    faults.delay_operation(
        "transact",
        Some(&chat.wiring.store.schema().rooms),
        1,
        std::time::Duration::from_millis(400),
    );
    let ban = {
        let (chat, room, bob) = (chat.clone(), room.clone(), bob.clone());
        tokio::spawn(async move { chat.moderation.ban(&alice(), &room, &bob.user_id, Ban::default()).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    chat.rooms
        .join_room(&bob, &room)
        .await
        .expect("the join sees no ban yet");
    ban.await.unwrap().unwrap();

    assert!(
        chat.wiring
            .store
            .members
            .member(&room, &bob.user_id)
            .await
            .unwrap()
            .is_none(),
        "bob is no member"
    );
    let refused = chat.sending.send_message(&bob, &room, NewMessage::text("in?")).await;
    assert_eq!(refused.unwrap_err().code(), "FORBIDDEN");
    let listed = chat.rooms.my_rooms(&bob).await.unwrap();
    assert!(listed.is_empty(), "the room is not in bob's rooms");
}

/// The new owner leaves while the hand-over is being written: the transaction, conditional on
/// the rows it read, changes nothing, and the owner is told to try again.
#[tokio::test(flavor = "multi_thread")]
async fn a_hand_over_racing_the_new_owner_leaving_changes_nothing() {
    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let bob = user("bob");
    chat.rooms.join_room(&bob, &room).await.unwrap();
    faults.delay_operation(
        "transact",
        Some(&chat.wiring.store.schema().rooms),
        1,
        std::time::Duration::from_millis(300),
    );
    let handing = {
        let (chat, room) = (chat.clone(), room.clone());
        tokio::spawn(async move {
            let to = crate::rooms::OwnershipTransfer { user_id: "bob".into() };
            chat.rooms.transfer_ownership(&alice(), &room, to).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    chat.rooms.leave_room(&bob, &room).await.unwrap();
    let refused = handing.await.unwrap().unwrap_err();
    assert_eq!(refused.code(), "CONFLICT", "{refused}");
    let room_now = chat.rooms.get_room(&alice(), &room).await.unwrap();
    assert_eq!(room_now.owner_id, "alice");
    assert!(
        chat.wiring
            .store
            .members
            .member(&room, &bob.user_id)
            .await
            .unwrap()
            .is_none(),
        "bob left"
    );
}

/// Two moderators at once: one makes the room private, the other public again just after.
/// The first one's clean-up of the directory row runs late (held open here); the room ends
/// public and must still be listed.
#[tokio::test]
async fn a_room_made_public_again_while_a_private_change_finishes_stays_listed() {
    use crate::rooms::Visibility;
    use crate::rooms::directory::DirectoryQuery;
    use crate::rooms::settings::RoomChange;

    let faults = FaultyTables::new(store());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let to = |visibility| RoomChange {
        visibility: Some(visibility),
        ..Default::default()
    };
    let housekeeping = chat.wiring.store.schema().housekeeping.clone();
    faults.delay_operation("delete", Some(&housekeeping), 1, std::time::Duration::from_secs(2));
    let private = tokio::spawn({
        let (chat, room) = (chat.clone(), room.clone());
        async move { chat.rooms.update_room(&alice(), &room, to(Visibility::Private)).await }
    });
    // Once the private change has committed (its directory clean-up is still held)...
    while chat.rooms.get_room(&alice(), &room).await.unwrap().visibility != Visibility::Private {
        tokio::task::yield_now().await;
    }
    // ...the other moderator makes it public again, and is done first.
    let public = chat
        .rooms
        .update_room(&alice(), &room, to(Visibility::Public))
        .await
        .unwrap();
    assert_eq!(public.visibility, Visibility::Public);
    private.await.unwrap().unwrap();

    assert_eq!(
        chat.rooms.get_room(&alice(), &room).await.unwrap().visibility,
        Visibility::Public
    );
    let listed = chat.accounts.directory(DirectoryQuery::default()).await.unwrap();
    let ids: Vec<&str> = listed.rooms.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [room.as_str()], "the public room is in the directory");
}

/// A room from before visibility (its row has none, and no directory row) reads as public, as
/// it was joinable by id: the next housekeeping run lists it in the directory.
#[tokio::test]
async fn a_room_from_before_visibility_is_listed_by_housekeeping() {
    use crate::rooms::directory::DirectoryQuery;
    use crate::storage::{IfMatch, RangeQuery, UpdateMode};
    use crate::store::schema::{DIRECTORY_PARTITION, ROOM_ROW};

    let (chat, room) = chat_on(Tables::new(store())).await;
    let (tables, schema) = (chat.wiring.store.tables(), chat.wiring.store.schema());
    let mut row = tables
        .get(&schema.rooms, room.as_str(), ROOM_ROW)
        .await
        .unwrap()
        .unwrap();
    row.properties.remove("visibility");
    tables
        .update(&schema.rooms, &row, UpdateMode::Replace, &IfMatch::Any)
        .await
        .unwrap();
    let directory = RangeQuery::partition(DIRECTORY_PARTITION, 100);
    tables.delete_range(&schema.housekeeping, &directory).await.unwrap();
    let listed = || async {
        let page = chat.accounts.directory(DirectoryQuery::default()).await.unwrap();
        page.rooms.into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    assert!(listed().await.is_empty(), "as it was before visibility");
    assert_eq!(
        chat.rooms.get_room(&alice(), &room).await.unwrap().visibility,
        crate::rooms::Visibility::Public
    );

    chat.housekeeping(chrono::Utc::now()).await.unwrap();
    assert_eq!(listed().await, [room.to_string()], "listed once housekeeping ran");
}

/// A process that saw a member holding roles reads them along with the member row next time,
/// but what they grant comes from the rows that access read: a role changed in another
/// process, or taken away, applies to the very next operation here.
#[tokio::test]
async fn a_role_changed_in_another_process_applies_at_once_to_a_member_seen_holding_it() {
    use crate::members::MemberRoles;
    use crate::permissions::{Permission, Permissions};
    use crate::roles::{NewRole, RoleChange};
    use crate::store::Schema;

    let shared = Tables::new(store());
    let (here, room) = chat_on(shared.clone()).await;
    let elsewhere = crate::service::Chat::open(shared, Schema::with_prefix("").unwrap())
        .await
        .unwrap();
    let bob = user("bob");
    here.rooms.join_room(&bob, &room).await.unwrap();
    let manage = Permissions::from_bits(1); // ManageMessages
    let role = NewRole {
        name: "mods".into(),
        permissions: manage,
        position: 1,
    };
    let role = here.access.create_role(&alice(), &room, role).await.unwrap();
    let roles = |ids: Vec<String>| MemberRoles { role_ids: ids };
    here.moderation
        .set_member_roles(&alice(), &room, &bob.user_id, roles(vec![role.id.clone()]))
        .await
        .unwrap();
    let seen = here.access.access(&room, &bob.user_id).await.unwrap();
    assert!(seen.can(Permission::ManageMessages), "the role grants it");

    let change = RoleChange {
        name: None,
        permissions: Some(Permissions::from_bits(0)),
        position: None,
    };
    elsewhere
        .access
        .update_role(&alice(), &room, &role.id, change)
        .await
        .unwrap();
    let now = here.access.access(&room, &bob.user_id).await.unwrap();
    assert!(!now.can(Permission::ManageMessages), "the change applies at once");

    let change = RoleChange {
        name: None,
        permissions: Some(manage),
        position: None,
    };
    elsewhere
        .access
        .update_role(&alice(), &room, &role.id, change)
        .await
        .unwrap();
    assert!(
        here.access
            .access(&room, &bob.user_id)
            .await
            .unwrap()
            .can(Permission::ManageMessages)
    );
    elsewhere
        .moderation
        .set_member_roles(&alice(), &room, &bob.user_id, roles(Vec::new()))
        .await
        .unwrap();
    let now = here.access.access(&room, &bob.user_id).await.unwrap();
    assert!(!now.can(Permission::ManageMessages), "taken away elsewhere, gone here");
}
