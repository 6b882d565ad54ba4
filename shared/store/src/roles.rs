//! Role rows: `r:<role id>` in the room's `Rooms` partition.

use super::error::Result;
use super::moderation_log::log_op;
use super::schema::{ROLE_PREFIX, role_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::RoomId;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::permissions::Permissions;
use tabletalk_domain::roles::{MAX_ROLES_PER_ROOM, Role};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, Value};

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

/// A room's roles. Holds the tables it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct RoleStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    pub(crate) moderation_log: crate::moderation_log::ModerationLogStore,
}

impl RoleStore {
    /// Every role of a room, lowest position first (a row that cannot be read grants nothing).
    pub async fn roles(&self, room: &RoomId) -> Result<Vec<Role>> {
        let query = RangeQuery::prefix(room.as_str(), ROLE_PREFIX, MAX_ROLES_PER_ROOM);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_ROLES_PER_ROOM)
            .await?;
        let mut roles: Vec<Role> = rows.iter().filter_map(parse_role).collect();
        roles.sort_by_key(|r| r.position);
        Ok(roles)
    }

    pub async fn role(&self, room: &RoomId, id: &str) -> Result<Option<Role>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &role_key(id))
            .await?;
        Ok(row.as_ref().and_then(parse_role))
    }

    /// Writes a new role and its log entry in one transaction.
    pub async fn insert_role(&self, room: &RoomId, role: &Role, entry: &ModerationEntry) -> Result<()> {
        let ops = [BatchOp::Insert(role_row(room, role)), log_op(room, entry)];
        self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await?;
        Ok(())
    }

    /// Rewrites a role through the conditional-write helper: `change` sees the role as it is
    /// now (again after every lost race) and may refuse it; the log entries `log` makes of the
    /// role before and after commit in the same transaction.
    pub async fn update_role(
        &self,
        room: &RoomId,
        id: &str,
        change: impl FnMut(&mut Role) -> tabletalk_domain::error::Result<()>,
        log: impl Fn(&Role, &Role) -> Vec<ModerationEntry>,
    ) -> Result<Role> {
        let parse = |entity: &Entity| parse_role(entity).ok_or_else(|| broken(id));
        let row = |role: &Role| role_row(room, role);
        self.moderation_log
            .update_logged(room, &role_key(id), "role not found", parse, row, change, log)
            .await
    }

    /// Deletes a role with its log entry in one transaction; a role already gone is no
    /// change, and logs nothing.
    pub async fn delete_role(&self, room: &RoomId, id: &str, entry: &ModerationEntry) -> Result<()> {
        let delete = BatchOp::Delete {
            partition_key: room.as_str().to_owned(),
            row_key: role_key(id),
            if_match: IfMatch::Any,
        };
        match self
            .tables
            .transact(&self.schema.rooms, room.as_str(), &[delete, log_op(room, entry)])
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
