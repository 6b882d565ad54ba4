//! Who may do what in a room: the caller's membership, effective permissions and rank, loaded
//! once per operation and asked by every check.
//!
//! Effective permissions are the room's `everyonePermissions` OR those of the member's roles;
//! the owner holds everything. Rank orders members for moderation: the owner is above
//! everyone, others rank at their highest role's position (0 without roles), and a member may
//! only act on someone ranked strictly below them.

use super::Chat;
use crate::access::{Access, Rank};
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{Member, MemberRole};
use crate::permissions::Permissions;
use crate::rooms::Room;

impl Chat {
    /// The caller's access to a room; a room they are not in answers exactly like a missing one.
    pub async fn access(&self, room_id: &RoomId, user: &UserId) -> Result<Access> {
        let (room, member) = tokio::try_join!(self.store.room(room_id), self.store.member(room_id, user))?;
        let (Some(room), Some(member)) = (room, member) else {
            return Err(Error::not_found("room not found"));
        };
        let (permissions, rank) = self.standing(room_id, &room, &member).await?;
        Ok(Access {
            room,
            member,
            permissions,
            rank,
        })
    }

    /// A member's effective permissions and rank.
    pub(crate) async fn standing(&self, room_id: &RoomId, room: &Room, member: &Member) -> Result<(Permissions, Rank)> {
        if member.role == MemberRole::Owner {
            return Ok((Permissions::from_bits(u64::MAX), Rank::OWNER));
        }
        let mut permissions = room.everyone_permissions;
        let mut rank = Rank(0);
        if !member.roles.is_empty() {
            for role in self.roles(room_id).await? {
                if member.roles.contains(&role.id) {
                    permissions = permissions.union(role.permissions);
                    rank = rank.max(Rank(role.position));
                }
            }
        }
        Ok((permissions, rank))
    }
}
