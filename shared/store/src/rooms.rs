//! Room rows: the room row (`room`) in the room's `Rooms` partition, which its members, roles
//! and bans share, so a room and its owner's membership are created in one transaction; and a
//! room's deletion, which removes every row it has in every table.

use super::error::{Result, settle};
use super::members::{member_row, parse_member};
use super::moderation_log::log_op;
use super::schema::{MEMBER_PREFIX, ROOM_ROW, member_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::members::{Member, MemberRole};
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::permissions::Permissions;
use tabletalk_domain::rooms::{Room, Visibility};
use tabletalk_tables::conditional::update_conditionally;
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// More members than any room has; a sweep reads them all, page by page.
const ALL_MEMBERS: usize = 10_000_000;

fn room_row(room: &Room) -> Entity {
    Entity::new(&room.id, ROOM_ROW)
        .with("name", Value::String(room.name.clone()))
        .with("description", Value::String(room.description.clone()))
        .with("ownerId", Value::String(room.owner_id.clone()))
        .with("createdAt", Value::datetime(room.created_at))
        .with("readOnly", Value::Bool(room.read_only))
        .with("repliesOnly", Value::Bool(room.replies_only))
        .with("slowmodeSeconds", Value::Int64(i64::from(room.slowmode_seconds)))
        .with(
            "wordFilter",
            Value::String(serde_json::to_string(&room.word_filter).unwrap_or_default()),
        )
        .with(
            "everyonePermissions",
            Value::Int64(room.everyone_permissions.bits() as i64),
        )
        .with(
            "retentionSeconds",
            Value::Int64(room.retention_seconds.map_or(0, i64::from)),
        )
        .with(
            "visibility",
            Value::String(
                match room.visibility {
                    Visibility::Public => "public",
                    Visibility::Private => "private",
                }
                .into(),
            ),
        )
        .with("direct", Value::Bool(room.direct))
        .with("maxSendsPerSecond", Value::Int64(i64::from(room.max_sends_per_second)))
        .with(
            "trustThresholds",
            Value::String(
                room.trust_thresholds
                    .as_ref()
                    .and_then(|t| serde_json::to_string(t).ok())
                    .unwrap_or_default(),
            ),
        )
}

fn parse_room(entity: &Entity) -> tabletalk_domain::error::Result<Room> {
    let broken = || Error::Internal(format!("room row {} is incomplete", entity.partition_key));
    Ok(Room {
        id: entity.partition_key.clone(),
        name: entity.str("name").ok_or_else(broken)?.to_owned(),
        description: entity.str("description").unwrap_or_default().to_owned(),
        owner_id: entity.str("ownerId").ok_or_else(broken)?.to_owned(),
        created_at: entity.datetime("createdAt").ok_or_else(broken)?,
        read_only: entity.bool("readOnly").unwrap_or(false),
        replies_only: entity.bool("repliesOnly").unwrap_or(false),
        slowmode_seconds: entity
            .i64("slowmodeSeconds")
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(0),
        word_filter: entity
            .str("wordFilter")
            .and_then(|f| serde_json::from_str(f).ok())
            .unwrap_or_default(),
        everyone_permissions: entity
            .i64("everyonePermissions")
            .map_or(Permissions::DEFAULT_EVERYONE, |bits| {
                Permissions::from_bits(bits as u64)
            }),
        retention_seconds: entity
            .i64("retentionSeconds")
            .and_then(|s| u32::try_from(s).ok())
            .filter(|s| *s > 0),
        // Rooms from before visibility were joinable by id: they stay public.
        visibility: match entity.str("visibility") {
            Some("private") => Visibility::Private,
            _ => Visibility::Public,
        },
        direct: entity.bool("direct").unwrap_or(false),
        max_sends_per_second: entity
            .i64("maxSendsPerSecond")
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(0),
        trust_thresholds: entity
            .str("trustThresholds")
            .filter(|t| !t.is_empty())
            .and_then(|t| serde_json::from_str(t).ok()),
    })
}

/// How a hand-over of a room ended.
#[derive(Debug)]
pub enum Handover {
    /// The room as it is now, and its new owner.
    Done { room: Room, owner: Member },
    /// The one who was to become the owner is no member.
    NoSuchMember,
    /// The room or one of the two members changed meanwhile (or the giver is not the owner).
    Changed,
}

/// A room row as a delete sees it: marked or not.
#[derive(Debug, Clone)]
pub struct RoomRow {
    pub owner_id: Option<String>,
    pub being_deleted: bool,
}

/// Rooms: creating, changing and deleting them. Holds the tables it uses and, as fields, the
/// surfaces it calls.
#[derive(Debug, Clone)]
pub struct RoomStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// Where the room stamp moves after each change to the room row.
    pub(crate) ledger: crate::ledger::LedgerStore,
    pub(crate) directory: crate::directory::DirectoryStore,
    pub(crate) invitations: crate::invitations::InvitationStore,
    pub(crate) limits: crate::limits::LimitStore,
    pub(crate) members: crate::members::MemberStore,
    pub(crate) moderation_log: crate::moderation_log::ModerationLogStore,
    pub(crate) purge: crate::purge::PurgeStore,
}

impl RoomStore {
    /// Creates a room with its owner's membership, in one transaction. The room is listed for
    /// housekeeping and in the owner's rooms first, so neither can miss it.
    pub async fn create_room(&self, room: &Room, owner: &Member) -> Result<()> {
        let id = RoomId::parse(&room.id)?;
        self.purge.register_room(&id).await?;
        self.members.index_user_room(&owner.user_id, &id).await?;
        self.directory.list_in_directory(room).await?;
        let ops = [BatchOp::Insert(room_row(room)), BatchOp::Insert(member_row(&id, owner))];
        self.tables.transact(&self.schema.rooms, id.as_str(), &ops).await?;
        Ok(())
    }

    /// Creates a direct conversation with both its members in one transaction, each listed in
    /// "my rooms" first. `Ok(false)` when the room exists already (opened before, or by the
    /// other side at the same moment).
    pub async fn create_direct_room(&self, room: &Room, members: [&Member; 2]) -> Result<bool> {
        let id = RoomId::parse(&room.id)?;
        self.purge.register_room(&id).await?;
        for member in members {
            self.members.index_user_room(&member.user_id, &id).await?;
        }
        let ops = [
            BatchOp::Insert(room_row(room)),
            BatchOp::Insert(member_row(&id, members[0])),
            BatchOp::Insert(member_row(&id, members[1])),
        ];
        match self.tables.transact(&self.schema.rooms, id.as_str(), &ops).await {
            Ok(_) => Ok(true),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The room, unless it is missing or being deleted (both answer as missing).
    pub async fn room(&self, room: &RoomId) -> Result<Option<Room>> {
        Ok(self
            .tables
            .get(&self.schema.rooms, room.as_str(), ROOM_ROW)
            .await?
            .filter(|e| !crate::schema::is_being_deleted(e))
            .map(|e| parse_room(&e))
            .transpose()?)
    }

    /// The room row as a delete needs it, marked or not.
    pub async fn room_row(&self, room: &RoomId) -> Result<Option<RoomRow>> {
        let row = self.tables.get(&self.schema.rooms, room.as_str(), ROOM_ROW).await?;
        Ok(row.map(|row| RoomRow {
            owner_id: row.str("ownerId").map(str::to_owned),
            being_deleted: crate::schema::is_being_deleted(&row),
        }))
    }

    /// Lists a room from before visibility (its row has none: it reads as public) in the
    /// directory, then writes its visibility, so this happens once per room; the directory
    /// row first, so a failure in between leaves it for the next run. False for any other room.
    pub async fn list_room_from_before_visibility(&self, room: &RoomId) -> Result<bool> {
        let Some(row) = self.tables.get(&self.schema.rooms, room.as_str(), ROOM_ROW).await? else {
            return Ok(false);
        };
        if row.properties.contains_key("visibility") || crate::schema::is_being_deleted(&row) {
            return Ok(false);
        }
        // Read as public, it is written back so, visibility and all.
        let public = parse_room(&row)?;
        self.directory.list_in_directory(&public).await?;
        let etag = row.etag.clone().map_or(IfMatch::Any, IfMatch::Etag);
        let row = room_row(&public);
        match self
            .tables
            .update(&self.schema.rooms, &row, UpdateMode::Replace, &etag)
            .await
        {
            // Changed meanwhile: that change wrote its visibility, or the next run tries again.
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
            Ok(_) => Ok(true),
        }
    }

    /// Rewrites the room row through the conditional-write helper: `change` sees the room as
    /// it is now (again after every lost race); a room being deleted is 404. The moderation
    /// log entries `log` makes of the room before and after the change commit with it.
    pub async fn update_room(
        &self,
        room: &RoomId,
        change: impl FnMut(&mut Room) -> tabletalk_domain::error::Result<()>,
        log: impl Fn(&Room, &Room) -> Vec<ModerationEntry>,
    ) -> Result<Room> {
        let parse = |entity: &Entity| {
            if crate::schema::is_being_deleted(entity) {
                return Err(Error::not_found("room not found"));
            }
            parse_room(entity)
        };
        let changed = self
            .moderation_log
            .update_logged(room, ROOM_ROW, "room not found", parse, room_row, change, log)
            .await;
        // After a failure too: the write may have applied without saying so.
        self.note_room_changed(room).await;
        changed
    }

    /// Moves the room stamp after a change to the room row (`LedgerStore::note_room_changed`),
    /// so sends admitted on a copy of the row as it was are admitted again. The change is
    /// made either way: a stamp that could not move leaves the copies kept of the old row, in
    /// this process and others, to expire (`service::access`), and is logged.
    async fn note_room_changed(&self, room: &RoomId) {
        if let Err(e) = self.ledger.note_room_changed(room).await {
            tracing::warn!(%room, error = %e, "the room stamp did not move after a room change");
        }
    }

    /// Makes `to` the owner of the room `from` owns, and `from` an ordinary member: the room
    /// row and both member rows in one transaction, each conditional on the row as read here.
    /// `entry`, when given, is logged in the same transaction.
    pub async fn transfer_ownership(
        &self,
        room: &RoomId,
        from: &UserId,
        to: &UserId,
        entry: Option<&ModerationEntry>,
    ) -> Result<Handover> {
        let (from_key, to_key) = (member_key(from), member_key(to));
        let (table, partition) = (&self.schema.rooms, room.as_str());
        let rows = tokio::try_join!(
            self.tables.get(table, partition, ROOM_ROW),
            self.tables.get(table, partition, &from_key),
            self.tables.get(table, partition, &to_key),
        )?;
        let (Some(room_entity), Some(from_row), Some(to_row)) = rows else {
            return Ok(match rows.2 {
                None => Handover::NoSuchMember,
                Some(_) => Handover::Changed,
            });
        };
        let (mut owned, mut giver, mut taker) = (
            parse_room(&room_entity)?,
            parse_member(&from_row)?,
            parse_member(&to_row)?,
        );
        if crate::schema::is_being_deleted(&room_entity)
            || owned.owner_id != from.as_str()
            || giver.role != MemberRole::Owner
        {
            return Ok(Handover::Changed);
        }
        owned.owner_id = to.to_string();
        giver.role = MemberRole::Member;
        taker.role = MemberRole::Owner;
        let update = |entity: Entity, read: &Entity| BatchOp::Update {
            entity,
            mode: UpdateMode::Replace,
            if_match: read.etag.clone().map_or(IfMatch::Any, IfMatch::Etag),
        };
        let mut ops = vec![
            update(room_row(&owned), &room_entity),
            update(member_row(room, &giver), &from_row),
            update(member_row(room, &taker), &to_row),
        ];
        ops.extend(entry.map(|entry| log_op(room, entry)));
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => {
                self.note_room_changed(room).await;
                Ok(Handover::Done {
                    room: owned,
                    owner: taker,
                })
            }
            Err(e) if e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::NotFound) => Ok(Handover::Changed),
            Err(e) => {
                // The transaction may have applied without saying so.
                self.note_room_changed(room).await;
                Err(e.into())
            }
        }
    }

    /// Marks the room row as being deleted: from then on the room answers as missing.
    pub async fn mark_room_deleted(&self, room: &RoomId) -> Result<()> {
        let marked = update_conditionally(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            ROOM_ROW,
            UpdateMode::Replace,
            |row| Ok::<_, Error>(row.with("deleting", Value::Bool(true))),
        )
        .await
        .map_err(|e| settle(e, "room not found"));
        // After a failure too: the write may have applied without saying so.
        self.note_room_changed(room).await;
        marked?;
        Ok(())
    }

    /// Deletes every row of a room: its partitions of `Messages`, `MessagesAscending` and
    /// `MessagesMetadata`, each member's "my rooms" row, its `Limits` partition, and last its `Rooms` partition, whose
    /// final batch holds the room row itself — so a delete's mark lasts until everything else
    /// is gone. Deletes go in entity group transactions of at most 100 rows.
    pub async fn sweep_room(&self, room: &RoomId) -> Result<()> {
        let everything = RangeQuery::partition(room.as_str(), 100);
        for table in [&self.schema.messages, &self.schema.ascending, &self.schema.metadata] {
            self.tables.delete_range(table, &everything).await?;
        }
        let members = RangeQuery::prefix(room.as_str(), MEMBER_PREFIX, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &members, ALL_MEMBERS)
            .await?;
        for row in rows {
            // The member row's key carries the user's key; no need to parse the row.
            if let Some(user_key) = row.row_key.strip_prefix(MEMBER_PREFIX) {
                crate::delete_if_present(&self.tables, &self.schema.user_rooms, user_key, room.as_str()).await?;
            }
        }
        self.invitations.unlist_invitations(room).await?;
        self.directory.unlist_from_directory(room, None).await?;
        self.limits.delete_room_limits(room).await?;
        self.tables.delete_range(&self.schema.rooms, &everything).await?;
        Ok(())
    }
}
