//! Direct conversations: the one room of an unordered pair of users, opened (or found again)
//! from either side. Its id is derived from the pair (`RoomId::direct`), so two people opening
//! it at the same moment meet the same row. It is private and has no owner; nobody else can
//! join it, be invited into it or send into it, and it is never in the directory. Every message
//! in it pushes the other person as a mention does (see `notify`).

use super::subscriptions::Accounts;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{Member, MemberRole};
use crate::permissions::Permissions;
use crate::rooms::{NewDirect, Room, Visibility, WordFilterSettings};
use crate::store::stored_time;

impl Accounts {
    /// The caller's direct conversation with `input.user_id`, created on first use.
    pub async fn open_direct(&self, who: &Principal, input: NewDirect) -> Result<Room> {
        let other = UserId::parse(&input.user_id)
            .map_err(|_| Error::validation("userId must be 1..=256 characters, no control characters"))?;
        if other == who.user_id {
            return Err(Error::validation("a direct conversation is with someone else"));
        }
        // It adds a membership to both, as a join does: not while either one is being erased.
        self.access.refuse_while_erasing(&who.user_id).await?;
        match self.access.refuse_while_erasing(&other).await {
            Err(Error::Conflict(_)) => {
                return Err(Error::Conflict("they cannot be written to now; try again later".into()));
            }
            checked => checked?,
        }
        let id = RoomId::direct(&who.user_id, &other);
        // Until they open it themselves, the other person is named by their id.
        let them = Principal {
            name: other.to_string(),
            user_id: other,
        };
        let now = stored_time(self.store.now());
        let room = match self.store.rooms.room(&id).await? {
            Some(room) => room,
            None => {
                let room = Room {
                    id: id.to_string(),
                    name: String::new(),
                    description: String::new(),
                    owner_id: String::new(),
                    created_at: now,
                    read_only: false,
                    replies_only: false,
                    slowmode_seconds: 0,
                    word_filter: WordFilterSettings::default(),
                    everyone_permissions: Permissions::DIRECT,
                    retention_seconds: None,
                    max_sends_per_second: 0,
                    trust_thresholds: None,
                    visibility: Visibility::Private,
                    direct: true,
                };
                let members = [
                    &Member::new(who, MemberRole::Member, now),
                    &Member::new(&them, MemberRole::Member, now),
                ];
                if self.store.rooms.create_direct_room(&room, members).await? {
                    return Ok(room);
                }
                // Opened by the other side meanwhile.
                self.store
                    .rooms
                    .room(&id)
                    .await?
                    .ok_or_else(|| Error::Conflict("the conversation changed meanwhile; try again".into()))?
            }
        };
        // Both belong to it, always: put back whoever is missing (a membership erased since).
        for person in [who, &them] {
            if self.store.members.member(&id, &person.user_id).await?.is_none() {
                self.store
                    .members
                    .add_member(&id, &Member::new(person, MemberRole::Member, now))
                    .await?;
            }
        }
        Ok(room)
    }
}
