//! Who may do what in a room, as computed for one caller: membership, effective permissions
//! and rank (`Access`), asked by every check. Loading it is `crate::service::access`.

use crate::error::{Error, Result};
use crate::members::{Member, MemberRole};
use crate::permissions::{Permission, Permissions};
use crate::rooms::Room;

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
