//! Room permissions: the flags a role grants, and the set a member holds.
//!
//! Stored as a bit field whose bit order is the contract: a stored value is always read with
//! today's meanings, so a flag is only ever added at the end, never renumbered. Unknown bits
//! (written by a newer version) are kept when read and ignored when checked.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

/// One thing a role may allow. The room owner holds all of them, always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Permission {
    /// Edit, delete and pin other members' messages; exempt from read-only, slowmode and the
    /// word filter (never from a timeout).
    ManageMessages,
    /// Change the room's name, description, read-only flag, slowmode and word filter.
    ManageRoom,
    /// Create, change, delete and assign roles below one's own.
    ManageRoles,
    /// Kick, time out and ban members below one's own rank.
    ManageMembers,
    /// Manage the room's inbound webhooks.
    ManageWebhooks,
    /// Mention `@everyone` and `@here`.
    MentionEveryone,
    /// Invite people: a user, or a shareable code. Every member of a new room holds it.
    CreateInvites,
}

impl Permission {
    pub const ALL: [Permission; 7] = [
        Permission::ManageMessages,
        Permission::ManageRoom,
        Permission::ManageRoles,
        Permission::ManageMembers,
        Permission::ManageWebhooks,
        Permission::MentionEveryone,
        Permission::CreateInvites,
    ];

    /// The flag's bit in the stored field.
    fn bit(self) -> u64 {
        1 << match self {
            Permission::ManageMessages => 0,
            Permission::ManageRoom => 1,
            Permission::ManageRoles => 2,
            Permission::ManageMembers => 3,
            Permission::ManageWebhooks => 4,
            Permission::MentionEveryone => 5,
            Permission::CreateInvites => 6,
        }
    }
}

/// A set of permissions. On the wire a JSON list of names; in storage a bit field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ToSchema)]
#[schema(value_type = Vec<Permission>)]
pub struct Permissions(u64);

impl Permissions {
    /// What every member of a new room may do: mention everyone, invite.
    pub const DEFAULT_EVERYONE: Permissions = Permissions(1 << 5 | 1 << 6);
    /// What each person in a direct conversation may do: nobody else can be invited into one.
    pub const DIRECT: Permissions = Permissions(1 << 5);

    pub fn from_bits(bits: u64) -> Permissions {
        Permissions(bits)
    }

    pub fn bits(self) -> u64 {
        self.0
    }

    pub fn contains(self, permission: Permission) -> bool {
        self.0 & permission.bit() != 0
    }

    /// True when every flag of `other` is also in `self`.
    pub fn covers(self, other: Permissions) -> bool {
        self.known() & other.known() == other.known()
    }

    pub fn union(self, other: Permissions) -> Permissions {
        Permissions(self.0 | other.0)
    }

    fn known(self) -> u64 {
        Permission::ALL.iter().fold(0, |acc, p| acc | p.bit()) & self.0
    }

    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL.into_iter().filter(move |p| self.contains(*p))
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Permissions {
        Permissions(iter.into_iter().fold(0, |acc, p| acc | p.bit()))
    }
}

impl Serialize for Permissions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Permissions, D::Error> {
        Ok(Vec::<Permission>::deserialize(deserializer)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_through_names() {
        let set: Permissions = [Permission::ManageRoom, Permission::MentionEveryone]
            .into_iter()
            .collect();
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["ManageRoom","MentionEveryone"]"#);
        assert_eq!(serde_json::from_str::<Permissions>(&json).unwrap(), set);
        assert_eq!(Permissions::from_bits(set.bits()), set);
        assert!(set.contains(Permission::ManageRoom) && !set.contains(Permission::ManageMessages));
    }

    #[test]
    fn unknown_bits_grant_nothing() {
        let future = Permissions::from_bits(1 << 40);
        assert_eq!(future.iter().count(), 0);
        assert!(Permissions::default().covers(future));
        assert!(!Permissions::default().covers(Permissions::DEFAULT_EVERYONE));
    }
}
