//! Who may do what in a room: the caller's membership, effective permissions and rank, loaded
//! once per operation and asked by every check.
//!
//! Effective permissions are the room's `everyonePermissions` OR those of the member's roles;
//! the owner holds everything. Rank orders members for moderation: the owner is above
//! everyone, others rank at their highest role's position (0 without roles), and a member may
//! only act on someone ranked strictly below them.

use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{Member, MemberRole};
use crate::permissions::{Permission, Permissions};
use crate::rooms::Room;
use crate::service::Chat;

/// A member's standing for moderation; higher outranks lower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank(pub u32);

impl Rank {
    pub const OWNER: Rank = Rank(u32::MAX);
}

/// The caller inside one room.
#[derive(Debug, Clone)]
pub struct Access {
    pub room: Room,
    pub member: Member,
    pub permissions: Permissions,
    pub rank: Rank,
}

impl Access {
    pub fn is_owner(&self) -> bool {
        self.member.role == MemberRole::Owner
    }

    /// True when the caller holds `permission` (the owner always does).
    pub fn can(&self, permission: Permission) -> bool {
        self.is_owner() || self.permissions.contains(permission)
    }

    /// `can`, as a 403.
    pub fn require(&self, permission: Permission) -> Result<()> {
        if self.can(permission) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!("this needs the {permission:?} permission")))
        }
    }

    /// A 403 unless the caller may hand out `permissions`: the owner may grant anything,
    /// anyone else only what they hold themselves.
    pub fn require_grantable(&self, permissions: Permissions) -> Result<()> {
        if self.is_owner() || self.permissions.covers(permissions) {
            Ok(())
        } else {
            Err(Error::Forbidden("you can only grant permissions you hold".into()))
        }
    }

    /// A 403 unless the caller ranks strictly above `target`.
    pub fn require_outranks(&self, target: Rank) -> Result<()> {
        if self.rank > target {
            Ok(())
        } else {
            Err(Error::Forbidden(
                "you can only act on members and roles ranked below you".into(),
            ))
        }
    }
}

impl Chat {
    /// The caller's access to a room; a room they are not in answers exactly like a missing one.
    pub async fn access(&self, room_id: &RoomId, user: &UserId) -> Result<Access> {
        let (room, member) = tokio::try_join!(self.find_room(room_id), self.store.member(room_id, user))?;
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
