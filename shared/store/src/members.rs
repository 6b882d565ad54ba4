//! Member rows: one per member (`m:<user>`) and per ban (`ban:<user>`) in the room's `Rooms`
//! partition, and the `UserRooms` index (partition = user, one row per room) behind "my
//! rooms". The index row is written before a membership appears and removed before it goes,
//! so no index row outlives its membership for good.

use chrono::{DateTime, Utc};

use super::error::{Result, settle};
use super::moderation_log::log_op;
use super::schema::{BAN_PREFIX, INVITATION_PREFIX, MEMBER_PREFIX, ban_key, member_key, timeout_key, user_key};
use std::ops::Bound;
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::members::{Member, MemberRole, NotificationLevel};
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::trust::{Strikes, TrustLevel};
use tabletalk_tables::conditional::{ConditionalError, update_conditionally, update_conditionally_with};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// What a membership that ended keeps for a rejoin ([`MemberStore::kept_standing`]).
#[derive(Debug, Clone, Default)]
pub struct KeptStanding {
    pub timeout_until: Option<DateTime<Utc>>,
    pub trust_level: Option<TrustLevel>,
    pub strikes: Strikes,
}

fn trust_level_of(row: &Entity) -> Option<TrustLevel> {
    row.i64("trustLevel")
        .and_then(|l| u8::try_from(l).ok())
        .and_then(|l| TrustLevel::try_from(l).ok())
}

fn strikes_of(row: &Entity) -> Strikes {
    Strikes {
        count: row.i64("strikes").and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
        latest: row.datetime("struckAt"),
    }
}

/// The write of the row that keeps, for a later rejoin, what a membership ending leaves (its
/// member row as read): a timeout, a trust level set and the strikes against them. It replaces
/// what an earlier membership left.
fn kept_op(room: &RoomId, user: &UserId, member: &Entity) -> BatchOp {
    let mut kept = Entity::new(room.as_str(), timeout_key(user));
    if let Some(until) = member.datetime("timeoutUntil") {
        kept.set("until", Value::datetime(until));
    }
    for name in ["trustLevel", "strikes", "struckAt"] {
        if let Some(value) = member.properties.get(name) {
            kept.set(name, value.clone());
        }
    }
    BatchOp::Upsert {
        entity: kept,
        mode: UpdateMode::Replace,
    }
}

/// A ban as its row keeps it.
#[derive(Debug, Clone)]
pub struct BanRecord {
    pub banned_by: String,
    /// The rank of the member who made it, which a moderator lifting it must reach.
    pub banner_rank: u32,
    pub banned_at: DateTime<Utc>,
    pub until: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

fn parse_ban(row: &Entity) -> BanRecord {
    BanRecord {
        banned_by: row.str("bannedBy").unwrap_or_default().to_owned(),
        banner_rank: row.i64("bannerRank").and_then(|r| u32::try_from(r).ok()).unwrap_or(0),
        banned_at: row.datetime("bannedAt").unwrap_or_default(),
        until: row.datetime("until"),
        reason: row.str("reason").map(str::to_owned),
    }
}

/// How a new membership's write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    Joined,
    /// The user was a member already.
    AlreadyMember,
}

pub fn member_row(room: &RoomId, member: &Member) -> Entity {
    let role = match member.role {
        MemberRole::Owner => "Owner",
        MemberRole::Member => "Member",
    };
    let mut entity = Entity::new(room.as_str(), member_key(&member.user_id))
        .with("userId", Value::String(member.user_id.to_string()))
        .with("name", Value::String(member.name.clone()))
        .with("role", Value::String(role.into()))
        .with(
            "roles",
            Value::String(serde_json::to_string(&member.roles).unwrap_or_default()),
        )
        .with("notifications", Value::String(member.notifications.as_str().into()))
        .with("muted", Value::Bool(member.muted))
        .with("joinedAt", Value::datetime(member.joined_at));
    let optional = [
        ("nickname", member.nickname.clone().map(Value::String)),
        ("timeoutUntil", member.timeout_until.map(Value::datetime)),
        ("lastMessageAt", member.last_message_at.map(Value::datetime)),
        (
            "lastReadKey",
            member.last_read.as_ref().map(|k| Value::String(k.as_str().into())),
        ),
        (
            "trustLevel",
            member.trust_level.map(|l| Value::Int64(i64::from(l.get()))),
        ),
        (
            "strikes",
            (member.strikes.count > 0).then(|| Value::Int64(i64::from(member.strikes.count))),
        ),
        ("struckAt", member.strikes.latest.map(Value::datetime)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            entity.set(name, value);
        }
    }
    entity
}

pub fn parse_member(entity: &Entity) -> tabletalk_domain::error::Result<Member> {
    let broken = || {
        Error::Internal(format!(
            "member row {}/{} is incomplete",
            entity.partition_key, entity.row_key
        ))
    };
    Ok(Member {
        user_id: UserId::parse(entity.str("userId").ok_or_else(broken)?).map_err(|_| broken())?,
        name: entity.str("name").unwrap_or_default().to_owned(),
        nickname: entity.str("nickname").map(str::to_owned),
        role: match entity.str("role") {
            Some("Owner") => MemberRole::Owner,
            _ => MemberRole::Member,
        },
        roles: entity
            .str("roles")
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default(),
        notifications: NotificationLevel::parse(entity.str("notifications").unwrap_or_default()),
        muted: entity.bool("muted").unwrap_or(false),
        joined_at: entity.datetime("joinedAt").ok_or_else(broken)?,
        timeout_until: entity.datetime("timeoutUntil"),
        last_message_at: entity.datetime("lastMessageAt"),
        last_read: entity.str("lastReadKey").and_then(MessageKey::parse),
        trust_level: trust_level_of(entity),
        strikes: strikes_of(entity),
        row_version: entity.etag.as_ref().map(|etag| etag.0.clone()),
    })
}

/// The "my rooms" row of `user` for `room`.
pub fn user_room_row(user: &UserId, room: &RoomId, joined_at: DateTime<Utc>) -> Entity {
    Entity::new(user_key(user), room.as_str()).with("joinedAt", Value::datetime(joined_at))
}

/// Members, bans, timeouts and the "my rooms" index. Holds the tables it uses and, as fields, the
/// surfaces it calls.
#[derive(Debug, Clone)]
pub struct MemberStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
    pub(crate) moderation_log: crate::moderation_log::ModerationLogStore,
    pub(crate) erasure: crate::erasure::ErasureStore,
}

impl MemberStore {
    /// The member row of `user`, if they are a member; none also for an id too long to key
    /// a row (nobody has one).
    pub async fn member(&self, room: &RoomId, user: &UserId) -> Result<Option<Member>> {
        let row = match self
            .tables
            .get(&self.schema.rooms, room.as_str(), &member_key(user))
            .await
        {
            Err(e) if e.is(ErrorKind::InvalidInput) => return Ok(None),
            row => row?,
        };
        Ok(row.map(|e| parse_member(&e)).transpose()?)
    }

    /// Rewrites a member row through the conditional-write helper. `change` sees the current
    /// row and may refuse it with an error, which is returned as is.
    pub async fn update_member(
        &self,
        room: &RoomId,
        user: &UserId,
        mut change: impl FnMut(&mut Member) -> tabletalk_domain::error::Result<()>,
    ) -> Result<Member> {
        let entity = update_conditionally(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            &member_key(user),
            UpdateMode::Replace,
            |entity| {
                let mut member = parse_member(&entity)?;
                change(&mut member)?;
                Ok(member_row(room, &member))
            },
        )
        .await
        .map_err(|e| settle(e, "member not found"))?;
        Ok(parse_member(&entity)?)
    }

    /// [`Store::update_member`] starting from `member` as the caller read it: ONE conditional
    /// write while the row is unchanged since (no read first); a lost race re-reads and
    /// applies `change` again, as the helper always does.
    pub async fn update_member_from(
        &self,
        room: &RoomId,
        member: &Member,
        mut change: impl FnMut(&mut Member) -> tabletalk_domain::error::Result<()>,
    ) -> Result<Member> {
        let Some(version) = &member.row_version else {
            return self.update_member(room, &member.user_id, change).await;
        };
        let mut known = member_row(room, member);
        known.etag = Some(tabletalk_tables::ETag(version.clone()));
        let rooms = &self.schema.rooms;
        let write = |next: Entity, seen: tabletalk_tables::ETag| async move {
            self.tables
                .update(rooms, &next, UpdateMode::Replace, &IfMatch::Etag(seen))
                .await
        };
        let entity = update_conditionally_with(
            &self.tables,
            rooms,
            room.as_str(),
            &member_key(&member.user_id),
            Some(known),
            |entity| {
                let mut member = parse_member(&entity)?;
                change(&mut member)?;
                Ok(member_row(room, &member))
            },
            write,
        )
        .await
        .map_err(|e| settle(e, "member not found"))?;
        Ok(parse_member(&entity)?)
    }

    /// Moves `reader`'s read position forward to `key`, never back, conditionally (a
    /// concurrent mark-read or timeout is kept). A row already at or past `key` is not
    /// written, so a burst of one member's sends converges: each lost race re-reads, every send
    /// older than the one that landed stops there, and the newest keeps trying until it lands.
    /// A member gone meanwhile has nothing to move.
    ///
    /// From `known`, the row as the caller read it, that is ONE conditional write and no read
    /// while the row is unchanged. The write replaces the whole row as read, which is the row
    /// as stored while the condition holds: a merge of the one property would make the
    /// embedded store read, decode, merge and encode the row again inside the group commit
    /// that every write waits for.
    pub async fn move_read_position(
        &self,
        room: &RoomId,
        reader: &UserId,
        known: Option<&Member>,
        key: &MessageKey,
    ) -> Result<()> {
        let known = known.and_then(|member| {
            let mut row = member_row(room, member);
            row.etag = Some(tabletalk_tables::ETag(member.row_version.clone()?));
            Some(row)
        });
        let rooms = &self.schema.rooms;
        let write = |next: Entity, seen: tabletalk_tables::ETag| async move {
            self.tables
                .update(rooms, &next, UpdateMode::Replace, &IfMatch::Etag(seen))
                .await
        };
        // `None`: the row is already at or past `key`.
        let moved = update_conditionally_with(
            &self.tables,
            rooms,
            room.as_str(),
            &member_key(reader),
            known,
            |entity| {
                let mut member = parse_member(&entity).map_err(Some)?;
                match member.read_up_to(key) {
                    true => Ok(member_row(room, &member)),
                    false => Err(None::<Error>),
                }
            },
            write,
        )
        .await;
        match moved {
            Ok(_) | Err(ConditionalError::NotFound | ConditionalError::Rejected(None)) => Ok(()),
            Err(ConditionalError::Rejected(Some(e))) => Err(e.into()),
            Err(ConditionalError::Conflict) => Err(settle(ConditionalError::Conflict, "member not found").into()),
            Err(ConditionalError::Store(e)) => Err(e.into()),
        }
    }

    /// [`Store::update_member`] with the moderation log entries `log` makes of the row before
    /// and after the change, in the same transaction.
    pub async fn update_member_logged(
        &self,
        room: &RoomId,
        user: &UserId,
        change: impl FnMut(&mut Member) -> tabletalk_domain::error::Result<()>,
        log: impl Fn(&Member, &Member) -> Vec<ModerationEntry>,
    ) -> Result<Member> {
        let row = |member: &Member| member_row(room, member);
        self.moderation_log
            .update_logged(
                room,
                &member_key(user),
                "member not found",
                parse_member,
                row,
                change,
                log,
            )
            .await
    }

    /// Removes a member as a moderator does, with the log entry in the removal's transaction
    /// ([`Store::end_membership`]). False when they were no member any more: nothing happened,
    /// so nothing is logged.
    pub async fn kick(&self, room: &RoomId, user: &UserId, entry: &ModerationEntry) -> Result<bool> {
        self.end_membership(room, user, Some(entry)).await
    }

    /// Ends a membership (a leave, or a kick with its log `entry`): the "my rooms" row first,
    /// as [`Store::remove_member`] does, then the member row, deleted on the version read, in
    /// one transaction with the row that keeps the member's timeout for a later rejoin
    /// ([`MemberStore::kept_standing`]), so a timeout set meanwhile is never lost. False when they
    /// were no member.
    pub async fn end_membership(&self, room: &RoomId, user: &UserId, entry: Option<&ModerationEntry>) -> Result<bool> {
        self.unindex_user_room(user, room).await?;
        let rooms = &self.schema.rooms;
        let write = |member: Entity, seen: tabletalk_tables::ETag| async move {
            let removal = BatchOp::Delete {
                partition_key: room.as_str().to_owned(),
                row_key: member_key(user),
                if_match: IfMatch::Etag(seen.clone()),
            };
            let mut ops = vec![removal, kept_op(room, user, &member)];
            ops.extend(entry.map(|entry| log_op(room, entry)));
            self.tables.transact(rooms, room.as_str(), &ops).await.map(|_| seen)
        };
        let keep = |entity: Entity| Ok::<_, Error>(entity);
        match update_conditionally_with(&self.tables, rooms, room.as_str(), &member_key(user), None, keep, write).await
        {
            Ok(_) => Ok(true),
            Err(ConditionalError::NotFound) => Ok(false),
            Err(e) => {
                // Still a member: the room is listed again, as their membership still says.
                if let Err(relisted) = self.index_user_room(user, room).await {
                    tracing::warn!(%room, %user, error = %relisted, "a failed leave left the room unlisted");
                }
                Err(settle(e, "member not found").into())
            }
        }
    }

    /// What `user`'s last membership of `room` left for a rejoin to start with: their timeout
    /// if it still runs at `now`, the trust level a moderator set and the strikes against
    /// them (leaving and joining again must not wash any of these away).
    pub async fn kept_standing(&self, room: &RoomId, user: &UserId, now: DateTime<Utc>) -> Result<KeptStanding> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &timeout_key(user))
            .await?;
        Ok(match row {
            None => KeptStanding::default(),
            Some(row) => KeptStanding {
                timeout_until: row.datetime("until").filter(|until| *until > now),
                trust_level: trust_level_of(&row),
                strikes: strikes_of(&row),
            },
        })
    }

    /// Every member of a room, up to `max` (those that cannot be read are an error when
    /// `strict`, else left out).
    pub async fn members(&self, room: &RoomId, max: usize, strict: bool) -> Result<Vec<Member>> {
        let query = RangeQuery::prefix(room.as_str(), MEMBER_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, max).await?;
        match strict {
            true => Ok(rows
                .iter()
                .map(parse_member)
                .collect::<tabletalk_domain::error::Result<_>>()?),
            false => Ok(rows.iter().filter_map(|row| parse_member(row).ok()).collect()),
        }
    }

    /// Adds a membership: the "my rooms" row first, then the member row (taken back if the
    /// member row cannot be written).
    pub async fn add_member(&self, room: &RoomId, member: &Member) -> Result<Joined> {
        self.index_user_room(&member.user_id, room).await?;
        match self.tables.insert(&self.schema.rooms, &member_row(room, member)).await {
            Ok(_) => Ok(Joined::Joined),
            Err(e) if e.is(ErrorKind::AlreadyExists) => Ok(Joined::AlreadyMember),
            Err(e) => {
                self.unindex_user_room(&member.user_id, room).await?;
                Err(e.into())
            }
        }
    }

    /// Removes a membership and its "my rooms" index row, the index row first: a failure in
    /// between leaves a member who does not see the room listed (and can leave again), never an
    /// index row nothing points back to.
    pub async fn remove_member(&self, room: &RoomId, user: &UserId) -> Result<()> {
        self.unindex_user_room(user, room).await?;
        crate::delete_if_present(&self.tables, &self.schema.rooms, room.as_str(), &member_key(user)).await
    }

    /// Takes `room` out of `user`'s "my rooms".
    pub async fn unindex_user_room(&self, user: &UserId, room: &RoomId) -> Result<()> {
        crate::delete_if_present(&self.tables, &self.schema.user_rooms, &user_key(user), room.as_str()).await
    }

    /// The rooms `user` is listed in, up to `max`.
    pub async fn user_rooms(&self, user: &UserId, max: usize) -> Result<Vec<RoomId>> {
        // Room ids only: the user's invitations sort after them.
        let query = RangeQuery::partition(user_key(user), 1000).to(Bound::Excluded(INVITATION_PREFIX.to_owned()));
        let (rows, _) = self.tables.query_up_to(&self.schema.user_rooms, &query, max).await?;
        Ok(rows.iter().filter_map(|row| RoomId::parse(&row.row_key).ok()).collect())
    }

    /// Writes a ban and its log entry, and removes `user`'s membership in the same transaction
    /// when `member` (as read) says there is one, keeping what a rejoin after the ban starts
    /// with (if it is gone meanwhile, the ban and the entry alone).
    pub async fn ban(
        &self,
        room: &RoomId,
        user: &UserId,
        ban: &BanRecord,
        member: Option<&Member>,
        entry: &ModerationEntry,
    ) -> Result<()> {
        let mut row = Entity::new(room.as_str(), ban_key(user))
            .with("userId", Value::String(user.to_string()))
            .with("bannedBy", Value::String(ban.banned_by.clone()))
            .with("bannerRank", Value::Int64(i64::from(ban.banner_rank)))
            .with("bannedAt", Value::datetime(ban.banned_at));
        if let Some(until) = ban.until {
            row.set("until", Value::datetime(until));
        }
        if let Some(reason) = &ban.reason {
            row.set("reason", Value::String(reason.clone()));
        }
        let ban = BatchOp::Upsert {
            entity: row,
            mode: UpdateMode::Replace,
        };
        let removal = BatchOp::Delete {
            partition_key: room.as_str().to_owned(),
            row_key: member_key(user),
            if_match: IfMatch::Any,
        };
        let log = log_op(room, entry);
        let ops = match member {
            Some(member) => vec![
                ban.clone(),
                removal,
                kept_op(room, user, &member_row(room, member)),
                log.clone(),
            ],
            None => vec![ban.clone(), log.clone()],
        };
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => Ok(()),
            // The member left meanwhile: the ban alone.
            Err(e) if e.is(ErrorKind::NotFound) => {
                self.tables
                    .transact(&self.schema.rooms, room.as_str(), &[ban, log])
                    .await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The ban on `user`, expired or not.
    pub async fn ban_record(&self, room: &RoomId, user: &UserId) -> Result<Option<BanRecord>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &ban_key(user))
            .await?;
        Ok(row.as_ref().map(parse_ban))
    }

    /// Every ban of a room (expired ones included), up to `max`, with whom each is on.
    pub async fn bans(&self, room: &RoomId, max: usize) -> Result<Vec<(String, BanRecord)>> {
        let query = RangeQuery::prefix(room.as_str(), BAN_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, max).await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((row.str("userId")?.to_owned(), parse_ban(row))))
            .collect())
    }

    /// Lifts the ban on `user` with its log entry, in one transaction. False when there was
    /// no ban (nothing is logged).
    pub async fn lift_ban_logged(&self, room: &RoomId, user: &UserId, entry: &ModerationEntry) -> Result<bool> {
        let lift = BatchOp::Delete {
            partition_key: room.as_str().to_owned(),
            row_key: ban_key(user),
            if_match: IfMatch::Any,
        };
        match self
            .tables
            .transact(&self.schema.rooms, room.as_str(), &[lift, log_op(room, entry)])
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is(ErrorKind::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Lists `user` in the room's "my rooms" index (before their membership is written), and
    /// in their history, which an erasure reads (both at once: a join waits for neither alone).
    pub async fn index_user_room(&self, user: &UserId, room: &RoomId) -> Result<()> {
        let row = user_room_row(user, room, self.clock.now());
        let listed = async {
            self.tables
                .upsert(&self.schema.user_rooms, &row, UpdateMode::Replace)
                .await?;
            Ok(())
        };
        tokio::try_join!(listed, self.erasure.record_membership(user, room))?;
        Ok(())
    }
}
