//! Roles: named permission sets with a position, stored as `r:<roleId>` rows in the room's
//! `Rooms` partition and assigned by listing their ids on member rows.
//!
//! Managing roles needs `ManageRoles`, and only below one's own rank: a role's position must
//! stay under the actor's rank, and a non-owner can grant only permissions they hold. A deleted
//! role's id may linger on member rows; it grants nothing, because permissions are computed
//! from the roles that exist.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::{Access, Rank};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::permissions::{Permission, Permissions};
use crate::service::Chat;
use crate::text::plain_text;

pub const MAX_ROLES_PER_ROOM: usize = 100;
pub const MAX_ROLE_NAME_CHARS: usize = 32;
pub const MAX_POSITION: u32 = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    pub id: String,
    pub name: String,
    pub permissions: Permissions,
    /// 1..=1000; higher outranks lower.
    pub position: u32,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewRole {
    /// 1..=32 characters, trimmed, on one line.
    #[schema(min_length = 1, max_length = 32, pattern = r"\S")]
    pub name: String,
    #[serde(default)]
    pub permissions: Permissions,
    /// 1..=1000, below the caller's own rank.
    #[schema(minimum = 1, maximum = 1000)]
    pub position: u32,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleChange {
    /// 1..=32 characters, trimmed, on one line.
    #[schema(min_length = 1, max_length = 32, pattern = r"\S")]
    pub name: Option<String>,
    pub permissions: Option<Permissions>,
    /// 1..=1000, below the caller's own rank.
    #[schema(minimum = 1, maximum = 1000)]
    pub position: Option<u32>,
}

fn checked_name(name: &str) -> Result<String> {
    plain_text(name, "a role name", 1, MAX_ROLE_NAME_CHARS)
}

/// Checks that `access` may give a role this position and these permissions.
fn check_grant(access: &Access, position: u32, permissions: Permissions) -> Result<()> {
    if !(1..=MAX_POSITION).contains(&position) {
        return Err(Error::validation(format!("position must be 1..={MAX_POSITION}")));
    }
    access.require_outranks(Rank(position))?;
    access.require_grantable(permissions)
}

impl Chat {
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
        self.store.insert_role(room_id, &role).await?;
        Ok(role)
    }

    pub async fn update_role(&self, who: &Principal, room_id: &RoomId, id: &str, change: RoleChange) -> Result<Role> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageRoles)?;
        let name = change.name.as_deref().map(checked_name).transpose()?;
        self.role(room_id, id).await?;
        self.store
            .update_role(room_id, id, |role| {
                access.require_outranks(Rank(role.position))?;
                role.name = name.clone().unwrap_or(role.name.clone());
                role.permissions = change.permissions.unwrap_or(role.permissions);
                role.position = change.position.unwrap_or(role.position);
                check_grant(&access, role.position, role.permissions)
            })
            .await
    }

    pub async fn delete_role(&self, who: &Principal, room_id: &RoomId, id: &str) -> Result<()> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageRoles)?;
        let role = self.role(room_id, id).await?;
        access.require_outranks(Rank(role.position))?;
        self.store.delete_role(room_id, id).await
    }

    pub(crate) async fn roles(&self, room_id: &RoomId) -> Result<Vec<Role>> {
        self.store.roles(room_id).await
    }

    async fn role(&self, room_id: &RoomId, id: &str) -> Result<Role> {
        let missing = || Error::not_found("role not found");
        if uuid::Uuid::try_parse(id).is_err() {
            return Err(missing());
        }
        self.store.role(room_id, id).await?.ok_or_else(missing)
    }
}
