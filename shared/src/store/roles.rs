//! Role rows: `r:<role id>` in the room's `Rooms` partition.

use super::Store;
use super::error::{Result, settle};
use super::schema::{ROLE_PREFIX, role_key};
use crate::error::Error;
use crate::ids::RoomId;
use crate::permissions::Permissions;
use crate::roles::{MAX_ROLES_PER_ROOM, Role};
use crate::storage::conditional::update_conditionally;
use crate::storage::{Entity, RangeQuery, UpdateMode, Value};

fn role_row(room: &RoomId, role: &Role) -> Entity {
    Entity::new(room.as_str(), role_key(&role.id))
        .with("name", Value::String(role.name.clone()))
        .with("permissions", Value::Int64(role.permissions.bits() as i64))
        .with("position", Value::Int64(i64::from(role.position)))
}

fn parse_role(entity: &Entity) -> Option<Role> {
    Some(Role {
        id: entity.row_key.strip_prefix(ROLE_PREFIX)?.to_owned(),
        name: entity.str("name")?.to_owned(),
        permissions: Permissions::from_bits(entity.i64("permissions")? as u64),
        position: u32::try_from(entity.i64("position")?).ok()?,
    })
}

fn broken(id: &str) -> Error {
    Error::Internal(format!("role row {id} is broken"))
}

impl Store {
    /// Every role of a room, lowest position first (a row that cannot be read grants nothing).
    pub(crate) async fn roles(&self, room: &RoomId) -> Result<Vec<Role>> {
        let query = RangeQuery::prefix(room.as_str(), ROLE_PREFIX, MAX_ROLES_PER_ROOM);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_ROLES_PER_ROOM)
            .await?;
        let mut roles: Vec<Role> = rows.iter().filter_map(parse_role).collect();
        roles.sort_by_key(|r| r.position);
        Ok(roles)
    }

    pub(crate) async fn role(&self, room: &RoomId, id: &str) -> Result<Option<Role>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &role_key(id))
            .await?;
        Ok(row.as_ref().and_then(parse_role))
    }

    pub(crate) async fn insert_role(&self, room: &RoomId, role: &Role) -> Result<()> {
        self.tables.insert(&self.schema.rooms, &role_row(room, role)).await?;
        Ok(())
    }

    /// Rewrites a role through the conditional-write helper: `change` sees the role as it is
    /// now (again after every lost race) and may refuse it.
    pub(crate) async fn update_role(
        &self,
        room: &RoomId,
        id: &str,
        mut change: impl FnMut(&mut Role) -> crate::error::Result<()>,
    ) -> Result<Role> {
        let entity = update_conditionally(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            &role_key(id),
            UpdateMode::Replace,
            |entity| {
                let mut role = parse_role(&entity).ok_or_else(|| broken(id))?;
                change(&mut role)?;
                Ok(role_row(room, &role))
            },
        )
        .await
        .map_err(|e| settle(e, "role not found"))?;
        Ok(parse_role(&entity).ok_or_else(|| broken(id))?)
    }

    pub(crate) async fn delete_role(&self, room: &RoomId, id: &str) -> Result<()> {
        self.delete_if_present(&self.schema.rooms, room.as_str(), &role_key(id))
            .await
    }
}
