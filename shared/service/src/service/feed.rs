//! `messageChanges`, the change feed, as docs/CATCHUP.md describes it: what changed in these
//! conversations since the cursors a client stored, oldest first by version, one entry per
//! message at its newest version.
//!
//! Each conversation is answered on its own — OK, NO_ACCESS (not a member, or no such room:
//! nothing, cursor echoed), RESET (the cursor is ahead of the room's counter, or below its
//! retention floor: read again from the floor) or UNAVAILABLE (reading it failed: nothing,
//! cursor echoed, ask again later) — so one conversation never stalls the others.
//! A null cursor is an initial sync: OK, from the floor (nothing live is below it); so is a
//! cursor at version 0, which has seen no change and so cannot have missed a purged one.
//! Cursors are bound to their conversation (`change_cursor`).
//! A conversation costs a membership check, a counter read and one range read of its feed rows
//! (`store::ledger`), whatever its size.
//!
//! The client's side (catch-up): store each conversation's `cursor`; after a reconnect, or when
//! a live signal arrives, call with the stored cursors and follow `hasMore`; apply every change
//! as an upsert keyed by message id, keeping the higher version; on RESET drop the cached copy
//! of that conversation first. docs/CATCHUP.md has the whole algorithm.

use super::read::Reading;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::messages::change_cursor::ChangeCursor;
use crate::messages::feed::{
    ChangeStatus, ConversationChanges, FLOOR_RACE_ATTEMPTS, MAX_CONVERSATIONS, MessageChange, MessageChangeCursorInput,
    MessageChangesInput, MessageChangesResult, per_conversation_limit, unchanged,
};
use crate::store::error::reported;
use futures::StreamExt as _;

use crate::service::rooms::ROOMS_IN_FLIGHT;

impl Reading {
    pub async fn message_changes(&self, who: &Principal, input: MessageChangesInput) -> Result<MessageChangesResult> {
        if input.server_id != *self.workspace_id {
            return Err(Error::Forbidden(format!("no workspace {:?} here", input.server_id)));
        }
        if input.conversations.len() > MAX_CONVERSATIONS {
            return Err(Error::validation(format!(
                "at most {MAX_CONVERSATIONS} conversations per request"
            )));
        }
        let afters = input
            .conversations
            .iter()
            .map(|c| {
                c.after
                    .as_deref()
                    .map(|text| ChangeCursor::parse(text, &c.conversation_id).map(|cursor| cursor.version))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let limit = per_conversation_limit(input.limit, input.conversations.len());
        // Collected first: a stream holding the mapping closure is not `Send` for every lifetime.
        let answers: Vec<_> = input
            .conversations
            .iter()
            .zip(afters)
            .map(|(conversation, after)| async move {
                match self.conversation_changes(who, conversation, after, limit).await {
                    Ok(entry) => entry,
                    // Reported on its own entry: the others are answered, and the client asks
                    // again for this one later.
                    Err(e) => {
                        tracing::warn!(conversation = %conversation.conversation_id, error = %e,
                        "a conversation of messageChanges could not be read");
                        unchanged(conversation, ChangeStatus::Unavailable)
                    }
                }
            })
            .collect();
        // Several reads a conversation, a wave of conversations at a time (as `my_rooms` reads).
        Ok(MessageChangesResult {
            message_changes: futures::stream::iter(answers).buffered(ROOMS_IN_FLIGHT).collect().await,
        })
    }

    async fn conversation_changes(
        &self,
        who: &Principal,
        conversation: &MessageChangeCursorInput,
        after: Option<u64>,
        limit: usize,
    ) -> Result<ConversationChanges> {
        let Ok(room) = RoomId::parse(&conversation.conversation_id) else {
            return Ok(unchanged(conversation, ChangeStatus::NoAccess));
        };
        match self.access.access(&room, &who.user_id).await {
            Ok(_) => {}
            Err(Error::NotFound(_)) => return Ok(unchanged(conversation, ChangeStatus::NoAccess)),
            Err(e) => return Err(e),
        }
        // A purge that lands between the counter read and the range read would move the floor
        // past a cursor answered as OK: read the counter again, and start over if it moved.
        for _ in 0..FLOOR_RACE_ATTEMPTS {
            let counter = self.store.ledger.counter(&room).await.map_err(reported)?;
            let (status, from) = match after {
                // Version 0 has seen nothing, so nothing purged can be missing from it.
                None | Some(0) => (ChangeStatus::Ok, counter.floor),
                Some(after) if after > counter.version || after < counter.floor => (ChangeStatus::Reset, counter.floor),
                Some(after) => (ChangeStatus::Ok, after),
            };
            let (rows, has_more) = self.store.messages.feed_after(&room, from, limit).await?;
            if self.store.ledger.counter(&room).await.map_err(reported)?.floor != counter.floor {
                continue;
            }
            // Nothing new still answers with a cursor issued for this room, at `from`: a null
            // cursor's "0" would fall below a raised floor and come back as RESET.
            let cursor = rows.last().map_or(from, |(version, _)| *version);
            let changes = rows
                .into_iter()
                .map(|(_, message)| MessageChange::of(message))
                .collect();
            return Ok(ConversationChanges {
                conversation_id: conversation.conversation_id.clone(),
                status,
                cursor: ChangeCursor::encode(&room, cursor),
                has_more,
                changes,
            });
        }
        Err(Error::Unavailable("the room is being purged; try again".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::feed::{ChangeStatus, MessageChangeCursorInput, MessageChangesInput};
    use crate::messages::send::NewMessage;
    use crate::rooms::NewRoom;
    use crate::service::Chat;
    use crate::service::testing::{alice, chat_on, store};
    use crate::storage::faults::FaultyTables;
    use crate::storage::{StoreError, Tables};
    use chrono::Utc;

    fn ask(conversations: &[(&RoomId, Option<&str>)]) -> MessageChangesInput {
        MessageChangesInput {
            server_id: "default".into(),
            conversations: conversations
                .iter()
                .map(|(room, after)| MessageChangeCursorInput {
                    conversation_id: room.to_string(),
                    after: after.map(str::to_owned),
                })
                .collect(),
            limit: None,
        }
    }

    /// A second room alice owns, next to the one `chat_on` made.
    async fn another_room(chat: &Chat) -> RoomId {
        let room = NewRoom {
            name: "other".into(),
            description: None,
            visibility: crate::rooms::Visibility::Public,
        };
        RoomId::parse(&chat.rooms.create_room(&alice(), room).await.unwrap().id).unwrap()
    }

    async fn post(chat: &Chat, room: &RoomId, text: &str) {
        chat.sending
            .send_message(&alice(), room, NewMessage::text(text))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_cursor_from_another_conversation_is_refused() {
        let (chat, first) = chat_on(Tables::new(store())).await;
        let second = another_room(&chat).await;
        post(&chat, &first, "one").await;
        post(&chat, &second, "two").await;
        let answer = chat
            .reading
            .message_changes(&alice(), ask(&[(&first, None)]))
            .await
            .unwrap();
        let cursor = answer.message_changes[0].cursor.clone();

        let refused = chat
            .reading
            .message_changes(&alice(), ask(&[(&second, Some(&cursor))]))
            .await
            .map(|a| a.message_changes[0].status);
        assert!(matches!(refused, Err(Error::Validation(_))), "{refused:?}");
        // The cursor still works where it was issued, and a plain version from before this
        // binding is still taken for whatever conversation it is sent with.
        let own = chat
            .reading
            .message_changes(&alice(), ask(&[(&first, Some(&cursor))]))
            .await
            .unwrap();
        assert_eq!(own.message_changes[0].status, ChangeStatus::Ok);
        let legacy = chat
            .reading
            .message_changes(&alice(), ask(&[(&second, Some("1"))]))
            .await
            .unwrap();
        assert_eq!(legacy.message_changes[0].status, ChangeStatus::Ok);
    }

    #[tokio::test]
    async fn a_store_error_in_one_conversation_leaves_the_others_answered() {
        let faults = FaultyTables::new(store());
        let (chat, first) = chat_on(Tables::new(faults.clone())).await;
        let second = another_room(&chat).await;
        post(&chat, &first, "one").await;
        post(&chat, &second, "two").await;
        // One of the two range reads of the feed fails.
        faults.fail_operation(
            "query",
            Some(&chat.wiring.store.schema.messages),
            1,
            StoreError::unavailable("injected"),
        );
        let answer = chat
            .reading
            .message_changes(&alice(), ask(&[(&first, Some("0")), (&second, None)]))
            .await
            .expect("one conversation's failure does not fail the request");
        let entries = &answer.message_changes;
        let statuses: Vec<String> = entries
            .iter()
            .map(|e| serde_json::to_value(e).unwrap()["status"].as_str().unwrap().to_owned())
            .collect();
        let failed = statuses.iter().position(|s| s == "UNAVAILABLE").expect("{statuses:?}");
        let answered = 1 - failed;
        assert_eq!(statuses[answered], "OK", "{statuses:?}");
        assert!(!entries[answered].changes.is_empty());
        // The failed one: nothing, its cursor as sent, and no hasMore to spin on.
        assert!(entries[failed].changes.is_empty() && !entries[failed].has_more);
        assert_eq!(entries[failed].cursor, "0");
        // Asked again, it is answered.
        let again = chat
            .reading
            .message_changes(&alice(), ask(&[(&[&first, &second][failed], Some("0"))]))
            .await
            .unwrap();
        assert_eq!(again.message_changes[0].status, ChangeStatus::Ok);
    }

    #[tokio::test]
    async fn the_cursor_of_an_initial_sync_of_a_purged_room_is_accepted_by_it() {
        let (chat, room) = chat_on(Tables::new(store())).await;
        post(&chat, &room, "soon gone").await;
        let expired = chat
            .wiring
            .store
            .purge
            .expired_messages(&room, Utc::now() + chrono::Duration::hours(1))
            .await
            .unwrap();
        let purged = chat.wiring.store.purge.purge_messages(&room, &expired).await.unwrap();
        assert!(purged > 0);
        assert!(
            chat.wiring.store.ledger.counter(&room).await.unwrap().floor > 0,
            "the floor moved up"
        );

        let initial = chat
            .reading
            .message_changes(&alice(), ask(&[(&room, None)]))
            .await
            .unwrap();
        let entry = &initial.message_changes[0];
        assert_eq!((entry.status, entry.changes.len()), (ChangeStatus::Ok, 0));
        let next = chat
            .reading
            .message_changes(&alice(), ask(&[(&room, Some(&entry.cursor))]))
            .await
            .unwrap();
        assert_eq!(
            next.message_changes[0].status,
            ChangeStatus::Ok,
            "the cursor {:?} was issued by this room",
            entry.cursor
        );
    }
}
