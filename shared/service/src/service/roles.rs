//! Roles: named permission sets with a position, stored as `r:<roleId>` rows in the room's
//! `Rooms` partition and assigned by listing their ids on member rows.
//!
//! Managing roles needs `ManageRoles`, and only below one's own rank: a role's position must
//! stay under the actor's rank, and a non-owner can grant only permissions they hold. A deleted
//! role's id may linger on member rows; it grants nothing, because permissions are computed
//! from the roles that exist. Each change writes its moderation log entry in its own
//! transaction.

use super::access::RoomAccess;
use crate::access::Rank;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;
use crate::roles::{MAX_ROLES_PER_ROOM, NewRole, Role, RoleChange, check_grant, checked_name};

impl RoomAccess {
    /// Every role of a room, lowest position first.
    pub async fn list_roles(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<Role>> {
        self.access(room_id, &who.user_id).await?;
        self.roles(room_id).await
    }

    pub async fn create_role(&self, who: &Principal, room_id: &RoomId, input: NewRole) -> Result<Role> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageRoles)?;
        check_grant(&access, input.position, input.permissions)?;
        if self.roles(room_id).await?.len() >= MAX_ROLES_PER_ROOM {
            return Err(Error::Conflict(format!(
                "a room has at most {MAX_ROLES_PER_ROOM} roles"
            )));
        }
        let role = Role {
            id: uuid::Uuid::new_v4().to_string(),
            name: checked_name(&input.name)?,
            permissions: input.permissions,
            position: input.position,
        };
        let entry = ModerationEntry::by(ModerationAction::RoleCreated, &who.user_id, self.store.now())
            .role(&role.id)
            .detail("name", &role.name)
            .detail("permissions", role.permissions)
            .detail("position", role.position);
        self.store.roles.insert_role(room_id, &role, &entry).await?;
        Ok(role)
    }

    pub async fn update_role(&self, who: &Principal, room_id: &RoomId, id: &str, change: RoleChange) -> Result<Role> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageRoles)?;
        let name = change.name.as_deref().map(checked_name).transpose()?;
        self.role(room_id, id).await?;
        let entry = |before: &Role, after: &Role| {
            let changed =
                (&before.name, before.permissions, before.position) != (&after.name, after.permissions, after.position);
            let entry = ModerationEntry::by(ModerationAction::RoleChanged, &who.user_id, self.store.now())
                .role(id)
                .detail("name", &after.name)
                .detail("permissions", after.permissions)
                .detail("position", after.position);
            changed.then_some(entry).into_iter().collect()
        };
        let change = |role: &mut Role| {
            access.require_outranks(Rank(role.position))?;
            role.name = name.clone().unwrap_or(role.name.clone());
            role.permissions = change.permissions.unwrap_or(role.permissions);
            role.position = change.position.unwrap_or(role.position);
            check_grant(&access, role.position, role.permissions)
        };
        Ok(self.store.roles.update_role(room_id, id, change, entry).await?)
    }

    pub async fn delete_role(&self, who: &Principal, room_id: &RoomId, id: &str) -> Result<()> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageRoles)?;
        let role = self.role(room_id, id).await?;
        access.require_outranks(Rank(role.position))?;
        let entry = ModerationEntry::by(ModerationAction::RoleDeleted, &who.user_id, self.store.now())
            .role(id)
            .detail("name", &role.name);
        Ok(self.store.roles.delete_role(room_id, id, &entry).await?)
    }

    pub(crate) async fn roles(&self, room_id: &RoomId) -> Result<Vec<Role>> {
        Ok(self.store.roles.roles(room_id).await?)
    }

    async fn role(&self, room_id: &RoomId, id: &str) -> Result<Role> {
        let missing = || Error::not_found("role not found");
        if uuid::Uuid::try_parse(id).is_err() {
            return Err(missing());
        }
        self.store.roles.role(room_id, id).await?.ok_or_else(missing)
    }
}
