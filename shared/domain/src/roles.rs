//! The role model: a named permission set with a position, and the rule for who may grant
//! one. The use cases are `crate::service::roles`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::{Access, Rank};
use crate::error::{Error, Result};
use crate::permissions::Permissions;
use crate::text::plain_text;

pub const MAX_ROLES_PER_ROOM: usize = 100;
pub const MAX_ROLE_NAME_CHARS: usize = 32;

crate::text_field!(
    /// A role's name in the document.
    RoleName, 1, MAX_ROLE_NAME_CHARS, crate::text::ONE_LINE
);
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
    #[schema(value_type = RoleName, inline)]
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
    #[schema(value_type = Option<RoleName>, inline)]
    pub name: Option<String>,
    pub permissions: Option<Permissions>,
    /// 1..=1000, below the caller's own rank.
    #[schema(minimum = 1, maximum = 1000)]
    pub position: Option<u32>,
}

pub fn checked_name(name: &str) -> Result<String> {
    plain_text(name, "a role name", 1, MAX_ROLE_NAME_CHARS)
}

/// Checks that `access` may give a role this position and these permissions.
pub fn check_grant(access: &Access, position: u32, permissions: Permissions) -> Result<()> {
    if !(1..=MAX_POSITION).contains(&position) {
        return Err(Error::validation(format!("position must be 1..={MAX_POSITION}")));
    }
    access.require_outranks(Rank(position))?;
    access.require_grantable(permissions)
}
