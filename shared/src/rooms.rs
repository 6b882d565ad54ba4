//! Rooms and membership: create (the creator owns it), join, leave, list mine, get one.
//!
//! A room and its members share one `Rooms` partition, so a room is created together with its
//! owner's membership in one transaction. `UserRooms` indexes a user's rooms for listing; it is
//! written before a membership appears and removed after it goes, and every listing re-checks
//! membership, so a stale index row never shows a room the user is not in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::schema::{MEMBER_PREFIX, ROOM_ROW};
use crate::service::Chat;
use crate::storage::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, Value};

pub const MAX_ROOM_NAME_CHARS: usize = 100;
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// Rooms one user can be listed in.
pub const MAX_ROOMS_PER_USER: usize = 1000;

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Room {
    pub id: String,
    pub name: String,
    pub description: String,
    pub owner_id: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewRoom {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MemberRole {
    Owner,
    Member,
}

/// A member of a room, as its member row records it.
#[derive(Debug, Clone)]
pub struct Member {
    pub user_id: UserId,
    pub name: String,
    pub role: MemberRole,
    pub joined_at: DateTime<Utc>,
}

fn member_key(user: &UserId) -> String {
    format!("{MEMBER_PREFIX}{}", user.key())
}

fn room_entity(id: &RoomId, room: &Room) -> Entity {
    Entity::new(id.as_str(), ROOM_ROW)
        .with("name", Value::String(room.name.clone()))
        .with("description", Value::String(room.description.clone()))
        .with("ownerId", Value::String(room.owner_id.clone()))
        .with("createdAt", Value::datetime(room.created_at))
}

fn room_from(entity: &Entity) -> Result<Room> {
    let broken = || Error::Internal(format!("room row {} is incomplete", entity.partition_key));
    Ok(Room {
        id: entity.partition_key.clone(),
        name: entity.str("name").ok_or_else(broken)?.to_owned(),
        description: entity.str("description").unwrap_or_default().to_owned(),
        owner_id: entity.str("ownerId").ok_or_else(broken)?.to_owned(),
        created_at: entity.datetime("createdAt").ok_or_else(broken)?,
    })
}

fn member_entity(room: &RoomId, member: &Member) -> Entity {
    let role = match member.role {
        MemberRole::Owner => "Owner",
        MemberRole::Member => "Member",
    };
    Entity::new(room.as_str(), member_key(&member.user_id))
        .with("userId", Value::String(member.user_id.to_string()))
        .with("name", Value::String(member.name.clone()))
        .with("role", Value::String(role.into()))
        .with("joinedAt", Value::datetime(member.joined_at))
}

fn member_from(entity: &Entity) -> Result<Member> {
    let broken = || {
        Error::Internal(format!(
            "member row {}/{} is incomplete",
            entity.partition_key, entity.row_key
        ))
    };
    Ok(Member {
        user_id: UserId::parse(entity.str("userId").ok_or_else(broken)?).map_err(|_| broken())?,
        name: entity.str("name").unwrap_or_default().to_owned(),
        role: match entity.str("role") {
            Some("Owner") => MemberRole::Owner,
            _ => MemberRole::Member,
        },
        joined_at: entity.datetime("joinedAt").ok_or_else(broken)?,
    })
}

/// Trims and checks a room's name and description.
fn checked_text(value: &str, what: &str, max: usize, required: bool) -> Result<String> {
    let value = value.trim();
    if required && value.is_empty() {
        return Err(Error::validation(format!("{what} must not be empty")));
    }
    if value.chars().count() > max {
        return Err(Error::validation(format!("{what} is longer than {max} characters")));
    }
    if value.chars().any(|c| c.is_control() && c != '\n') {
        return Err(Error::validation(format!("{what} must not contain control characters")));
    }
    Ok(value.to_owned())
}

impl Chat {
    pub async fn create_room(&self, who: &Principal, input: NewRoom) -> Result<Room> {
        let name = checked_text(&input.name, "name", MAX_ROOM_NAME_CHARS, true)?;
        let description = checked_text(
            input.description.as_deref().unwrap_or(""),
            "description",
            MAX_DESCRIPTION_CHARS,
            false,
        )?;
        let id = RoomId::generate();
        let now = Utc::now();
        let room = Room {
            id: id.to_string(),
            name,
            description,
            owner_id: who.user_id.to_string(),
            created_at: crate::storage::entity::truncate_to_micros(now),
        };
        let owner = Member {
            user_id: who.user_id.clone(),
            name: who.name.clone(),
            role: MemberRole::Owner,
            joined_at: now,
        };
        self.index_user_room(&who.user_id, &id).await?;
        let ops = [
            BatchOp::Insert(room_entity(&id, &room)),
            BatchOp::Insert(member_entity(&id, &owner)),
        ];
        self.tables.transact(&self.schema.rooms, id.as_str(), &ops).await?;
        Ok(room)
    }

    /// Joins a room by id (the id is the invitation). Joining twice is a no-op.
    pub async fn join_room(&self, who: &Principal, room_id: &RoomId) -> Result<Room> {
        let room = self.room(room_id).await?;
        if self.member(room_id, &who.user_id).await?.is_some() {
            return Ok(room);
        }
        self.index_user_room(&who.user_id, room_id).await?;
        let member = Member {
            user_id: who.user_id.clone(),
            name: who.name.clone(),
            role: MemberRole::Member,
            joined_at: Utc::now(),
        };
        match self
            .tables
            .insert(&self.schema.rooms, &member_entity(room_id, &member))
            .await
        {
            Ok(_) => Ok(room),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(room),
            Err(e) => Err(e.into()),
        }
    }

    /// Leaves a room. The owner cannot leave (the room would have no owner).
    pub async fn leave_room(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let member = self.require_member(room_id, &who.user_id).await?;
        if member.role == MemberRole::Owner {
            return Err(Error::Conflict("the owner cannot leave the room".into()));
        }
        let key = member_key(&who.user_id);
        match self
            .tables
            .delete(&self.schema.rooms, room_id.as_str(), &key, &IfMatch::Any)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is(ErrorKind::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        let user_key = who.user_id.key();
        match self
            .tables
            .delete(&self.schema.user_rooms, &user_key, room_id.as_str(), &IfMatch::Any)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The rooms the caller belongs to, oldest id first.
    pub async fn my_rooms(&self, who: &Principal) -> Result<Vec<Room>> {
        let query = RangeQuery::partition(who.user_id.key(), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.user_rooms, &query, MAX_ROOMS_PER_USER)
            .await?;
        let mut lookups = JoinSet::new();
        for (index, row) in rows.into_iter().enumerate() {
            let (chat, user) = (self.clone(), who.user_id.clone());
            lookups.spawn(async move {
                let Ok(room_id) = RoomId::parse(&row.row_key) else {
                    return Ok(None);
                };
                let (member, room) = tokio::try_join!(chat.member(&room_id, &user), chat.find_room(&room_id))?;
                Ok::<_, Error>(member.and(room).map(|room| (index, room)))
            });
        }
        let mut rooms = Vec::new();
        while let Some(joined) = lookups.join_next().await {
            let found = joined.map_err(|e| Error::Internal(format!("room lookup failed: {e}")))??;
            rooms.extend(found);
        }
        rooms.sort_by_key(|(index, _)| *index);
        Ok(rooms.into_iter().map(|(_, room)| room).collect())
    }

    /// A room the caller belongs to; any other room answers as missing.
    pub async fn get_room(&self, who: &Principal, room_id: &RoomId) -> Result<Room> {
        self.require_member(room_id, &who.user_id).await?;
        self.room(room_id).await
    }

    async fn find_room(&self, room_id: &RoomId) -> Result<Option<Room>> {
        self.tables
            .get(&self.schema.rooms, room_id.as_str(), ROOM_ROW)
            .await?
            .map(|e| room_from(&e))
            .transpose()
    }

    async fn room(&self, room_id: &RoomId) -> Result<Room> {
        self.find_room(room_id)
            .await?
            .ok_or_else(|| Error::not_found("room not found"))
    }

    pub(crate) async fn member(&self, room_id: &RoomId, user: &UserId) -> Result<Option<Member>> {
        self.tables
            .get(&self.schema.rooms, room_id.as_str(), &member_key(user))
            .await?
            .map(|e| member_from(&e))
            .transpose()
    }

    /// The caller's membership; a room they are not in answers exactly like a missing room.
    pub(crate) async fn require_member(&self, room_id: &RoomId, user: &UserId) -> Result<Member> {
        self.member(room_id, user)
            .await?
            .ok_or_else(|| Error::not_found("room not found"))
    }

    async fn index_user_room(&self, user: &UserId, room_id: &RoomId) -> Result<()> {
        let row = Entity::new(user.key(), room_id.as_str()).with("joinedAt", Value::datetime(Utc::now()));
        self.tables
            .upsert(&self.schema.user_rooms, &row, crate::storage::UpdateMode::Replace)
            .await?;
        Ok(())
    }
}
