//! Who may do what in a room: the caller's membership, effective permissions and rank, loaded
//! once per operation and asked by every check.
//!
//! Effective permissions are the room's `everyonePermissions` OR those of the member's roles;
//! the owner holds everything. Rank orders members for moderation: the owner is above
//! everyone, others rank at their highest role's position (0 without roles), and a member may
//! only act on someone ranked strictly below them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::access::{Access, Rank};
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{Member, MemberRole};
use crate::permissions::Permissions;
use crate::roles::Role;
use crate::rooms::Room;

/// Hints remembered before they are all forgotten (a hint only saves a round trip).
const MAX_ROLE_HINTS: usize = 100_000;

/// The members this process last saw holding roles, per room: their next access reads the
/// room's roles together with the room and member rows, not after them, so a send by a member
/// with roles waits for no extra round trip. Only a hint of what to read at once: permissions
/// always come from rows this very operation read, so nothing here can be stale — a wrong hint
/// costs one read too many, or the round trip it would have saved.
#[derive(Debug, Default)]
pub(crate) struct RoleHints(Mutex<HashSet<(RoomId, UserId)>>);

impl RoleHints {
    fn holds_roles(&self, room: &RoomId, user: &UserId) -> bool {
        let hints = self.0.lock().unwrap_or_else(|e| e.into_inner());
        hints.contains(&(room.clone(), user.clone()))
    }

    fn note(&self, room: &RoomId, user: &UserId, holds_roles: bool) {
        let mut hints = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (room.clone(), user.clone());
        if !holds_roles {
            hints.remove(&key);
            return;
        }
        if hints.len() >= MAX_ROLE_HINTS {
            hints.clear();
        }
        hints.insert(key);
    }
}

/// Room rows kept before they are all forgotten.
const MAX_ROOM_ROWS: usize = 10_000;

/// How long a kept room row may admit sends at most. The room stamp retires a copy as soon
/// as the room changes; this bounds a change whose stamp did not move (its process stopped
/// between the two writes, or the stamp's write failed: `RoomStore::note_room_changed`).
const ROOM_ROW_LIFETIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Copies of room rows that sends are admitted on, each with the room stamp it was read under
/// (`LedgerStore::room_stamp`): a send admitted on a copy commits only while that stamp is
/// still the room counter's, so a copy can save the room row's read without ever admitting a
/// send the current row refuses. A copy is used only while this process saw no newer stamp.
#[derive(Debug, Default)]
pub(crate) struct RoomRows(Mutex<HashMap<RoomId, (Room, u64, std::time::Instant)>>);

impl RoomRows {
    fn get(&self, room: &RoomId, stamp: u64) -> Option<Room> {
        let rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match rows.get(room) {
            Some((row, kept, at)) if *kept == stamp && at.elapsed() < ROOM_ROW_LIFETIME => Some(row.clone()),
            _ => None,
        }
    }

    fn keep(&self, room: &RoomId, row: &Room, stamp: u64) {
        let mut rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if rows.len() >= MAX_ROOM_ROWS {
            rows.clear();
        }
        rows.insert(room.clone(), (row.clone(), stamp, std::time::Instant::now()));
    }
}

/// A sender's access, as [`RoomAccess::access_for_send`] read it.
pub(crate) struct SendAccess {
    pub(crate) access: Access,
    /// The room stamp of the kept copy the room row came from: the send commits only under it.
    pub(crate) stamp: Option<u64>,
    /// Whether the room row is a kept copy rather than read now.
    pub(crate) kept: bool,
}

/// Who may do what in a room: membership, roles, bans and ranks. Holds what it uses: the store, the
/// adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct RoomAccess {
    pub(crate) store: crate::store::Store,
    pub(crate) role_hints: std::sync::Arc<crate::service::access::RoleHints>,
    pub(crate) room_rows: std::sync::Arc<RoomRows>,
}

impl RoomAccess {
    /// The caller's access to a room; a room they are not in answers exactly like a missing one.
    pub async fn access(&self, room_id: &RoomId, user: &UserId) -> Result<Access> {
        self.access_given(room_id, user, None).await
    }

    /// [`RoomAccess::access`] for a send, which may be admitted on a kept copy of the room row:
    /// with the room stamp it must then commit under (`LedgerStore::commit_admitted`). A copy
    /// with slowmode on is never used: its send moves the member's slowmode clock, which an
    /// admission made again would find moved.
    pub(crate) async fn access_for_send(&self, room_id: &RoomId, user: &UserId) -> Result<SendAccess> {
        // Taken before the room row is read, so a copy read now is at least as new as it.
        let stamp = self.store.ledger.room_stamp(room_id);
        let kept = stamp
            .and_then(|stamp| self.room_rows.get(room_id, stamp))
            .filter(|room| room.slowmode_seconds == 0);
        let reused = kept.is_some();
        let access = self.access_given(room_id, user, kept).await;
        if let Some(stamp) = stamp
            && !reused
            && let Ok(access) = &access
        {
            self.room_rows.keep(room_id, &access.room, stamp);
        }
        // Only a send admitted on a kept copy commits under its stamp: one admitted on the row
        // read now is as good as before copies were kept, and is never admitted again (which
        // would find its own slowmode clock moved).
        Ok(SendAccess {
            access: access?,
            stamp: stamp.filter(|_| reused),
            kept: reused,
        })
    }

    /// Forgets the kept copy of a room row: a send refused on it is admitted again on the row
    /// as it is, which another process may have changed without this one knowing yet.
    pub(crate) fn forget_room_row(&self, room_id: &RoomId) {
        let mut rows = self.room_rows.0.lock().unwrap_or_else(|e| e.into_inner());
        rows.remove(room_id);
    }

    /// The caller's access, given the room row when a kept copy stands for it.
    async fn access_given(&self, room_id: &RoomId, user: &UserId, kept: Option<Room>) -> Result<Access> {
        let roles = async {
            match self.role_hints.holds_roles(room_id, user) {
                true => Some(self.store.roles.roles(room_id).await),
                false => None,
            }
        };
        let room = async {
            match kept {
                Some(room) => Ok(Some(room)),
                None => self.store.rooms.room(room_id).await,
            }
        };
        let (room, member, roles) = tokio::join!(room, self.store.members.member(room_id, user), roles);
        let (Some(room), Some(member)) = (room?, member?) else {
            return Err(Error::not_found("room not found"));
        };
        self.role_hints.note(room_id, user, !member.roles.is_empty());
        // A read along that failed is read again below, if the member's roles need it.
        let roles = roles.and_then(|read| read.ok());
        let (permissions, rank) = self.standing_given(room_id, &room, &member, roles).await?;
        Ok(Access {
            room,
            member,
            permissions,
            rank,
        })
    }

    /// A member's effective permissions and rank.
    pub(crate) async fn standing(&self, room_id: &RoomId, room: &Room, member: &Member) -> Result<(Permissions, Rank)> {
        self.standing_given(room_id, room, member, None).await
    }

    /// Each of `members`' access to `room` (as [`RoomAccess::standing`] computes it), the
    /// room's roles read once.
    pub(crate) async fn accesses(&self, room_id: &RoomId, room: &Room, members: Vec<Member>) -> Result<Vec<Access>> {
        let roles = match members.iter().any(|m| !m.roles.is_empty()) {
            true => Some(self.roles(room_id).await?),
            false => None,
        };
        let mut out = Vec::with_capacity(members.len());
        for member in members {
            let (permissions, rank) = self.standing_given(room_id, room, &member, roles.clone()).await?;
            out.push(Access {
                room: room.clone(),
                member,
                permissions,
                rank,
            });
        }
        Ok(out)
    }

    /// [`RoomAccess::standing`] given the room's roles if they were read already.
    async fn standing_given(
        &self,
        room_id: &RoomId,
        room: &Room,
        member: &Member,
        roles: Option<Vec<Role>>,
    ) -> Result<(Permissions, Rank)> {
        if member.role == MemberRole::Owner {
            return Ok((Permissions::from_bits(u64::MAX), Rank::OWNER));
        }
        let mut permissions = room.everyone_permissions;
        let mut rank = Rank(0);
        if !member.roles.is_empty() {
            let roles = match roles {
                Some(roles) => roles,
                None => self.roles(room_id).await?,
            };
            for role in roles {
                if member.roles.contains(&role.id) {
                    permissions = permissions.union(role.permissions);
                    rank = rank.max(Rank(role.position));
                }
            }
        }
        Ok((permissions, rank))
    }

    /// True while a ban on `user` is in force.
    pub(crate) async fn is_banned(&self, room_id: &RoomId, user: &UserId) -> Result<bool> {
        let ban = self.store.members.ban_record(room_id, user).await?;
        Ok(ban.is_some_and(|ban| ban.until.is_none_or(|until| until > self.store.now())))
    }

    /// A 409 while `user`'s erasure runs: for what would add to it (joining or creating a
    /// room, registering a push subscription).
    pub(crate) async fn refuse_while_erasing(&self, user: &UserId) -> Result<()> {
        match self.store.erasure.erasure(user).await? {
            Some((job, _)) if job.is_running() => Err(Error::Conflict(
                "your erasure is running; this can be done again once it is done".into(),
            )),
            _ => Ok(()),
        }
    }
}
