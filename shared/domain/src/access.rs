//! Who may do what in a room, as computed for one caller: membership, effective permissions
//! and rank (`Access`), asked by every check. Loading it is `crate::service::access`.

use crate::error::{Error, Result};
use crate::members::{Member, MemberRole};
use crate::permissions::{Permission, Permissions};
use crate::rooms::Room;
use crate::trust::{self, Tally, Thresholds, TrustLevel};
use chrono::{DateTime, Utc};

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

    /// The caller's trust level in the room (`crate::trust`): the top for ManageMessages and
    /// in a direct conversation; else the one a moderator set; else what their `tally` and
    /// time in the room earned under `thresholds`, less one per current strike.
    pub fn trust_level(&self, tally: &Tally, thresholds: &Thresholds, now: DateTime<Utc>) -> TrustLevel {
        if self.trust_exempt() {
            return trust::TOP;
        }
        if let Some(set) = self.member.trust_level {
            return set;
        }
        let earned = thresholds.earned(tally, self.member.joined_at, now);
        trust::with_strikes(earned, &self.member.strikes, now)
    }

    /// Whether [`Access::trust_level`] depends on the caller's tally: not for a level set, nor
    /// for one exempt.
    pub fn level_reads_tally(&self) -> bool {
        self.member.trust_level.is_none() && !self.trust_exempt()
    }

    /// Whether the caller's level is the top whatever they sent, so their sends are not
    /// counted: ManageMessages, or a direct conversation.
    pub fn trust_exempt(&self) -> bool {
        self.room.direct || self.can(Permission::ManageMessages)
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
