//! Members of a room: the member row (`m:<user>` in the room's `Rooms` partition) with the
//! member's own settings, their read position, and moderation by other members.
//!
//! The member row is also the send path's state: `lastMessageAt` is the slowmode clock and
//! `timeoutUntil` the timeout, so every change to it is a conditional write through the shared
//! helper — a settings change never undoes a concurrent timeout, and the reverse.
//!
//! Moderation (kick, timeout, ban) needs `ManageMembers` and a rank strictly above the target's.
//! A ban removes the membership and writes a `ban:<user>` row in one transaction; the row
//! refuses joins (checked again after a join's insert, so a ban racing a join wins) and so,
//! with the membership gone, every send, until it expires or is lifted.

use chrono::{DateTime, Datelike, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::{Access, Rank};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::keys::{MessageKey, Ticks};
use crate::messages::MessageType;
use crate::permissions::Permission;
use crate::service::Chat;
use crate::store::members::BanRecord;
use crate::text::plain_text;

pub const MAX_NICKNAME_CHARS: usize = 32;
/// Longest timeout a moderator can give.
pub const MAX_TIMEOUT: Duration = Duration::days(28);
/// Members one listing returns.
pub const MAX_LISTED_MEMBERS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MemberRole {
    Owner,
    Member,
}

/// When a member is notified of a room's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub enum NotificationLevel {
    /// Every message.
    #[default]
    All,
    /// Only messages that mention them (directly, by role, or the whole room).
    Mentions,
    Never,
}

impl NotificationLevel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotificationLevel::All => "All",
            NotificationLevel::Mentions => "Mentions",
            NotificationLevel::Never => "Never",
        }
    }

    pub(crate) fn parse(text: &str) -> NotificationLevel {
        match text {
            "Mentions" => NotificationLevel::Mentions,
            "Never" => NotificationLevel::Never,
            _ => NotificationLevel::All,
        }
    }
}

/// A member row. Serialized, it is the member's own view of their membership.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    #[schema(value_type = String)]
    pub user_id: UserId,
    /// The display name from their token when they joined.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    pub role: MemberRole,
    /// Ids of the roles assigned to them.
    pub roles: Vec<String>,
    pub notifications: NotificationLevel,
    pub muted: bool,
    pub joined_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_until: Option<DateTime<Utc>>,
    /// The slowmode clock: when their last send was admitted. Server-only.
    #[serde(skip)]
    pub last_message_at: Option<DateTime<Utc>>,
    /// Their read position: every message with a key below this one (newer) is unread.
    #[serde(skip)]
    pub last_read: Option<MessageKey>,
}

/// Another member, as a member listing shows them.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSummary {
    pub user_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    pub role: MemberRole,
    pub roles: Vec<String>,
    pub joined_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_until: Option<DateTime<Utc>>,
}

/// A member's change to their own settings; absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MembershipChange {
    /// At most 32 characters, trimmed, on one line; empty clears it.
    #[schema(max_length = 32)]
    pub nickname: Option<String>,
    pub notifications: Option<NotificationLevel>,
    pub muted: Option<bool>,
}

/// Moves the caller's read position.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkRead {
    /// Everything up to and including this message is read; absent means everything so far.
    /// An older message moves the position back ("mark unread from here").
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeout {
    /// When the timeout ends: in the future, at most 28 days ahead; null (or absent) lifts it.
    pub until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ban {
    /// When the ban ends: in the future, before the year 10000; null or absent means never.
    pub until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberRoles {
    pub role_ids: Vec<String>,
}

impl Member {
    pub(crate) fn new(user: &Principal, role: MemberRole, joined_at: DateTime<Utc>) -> Member {
        Member {
            user_id: user.user_id.clone(),
            name: user.name.clone(),
            nickname: None,
            role,
            roles: Vec::new(),
            notifications: NotificationLevel::default(),
            muted: false,
            joined_at,
            timeout_until: None,
            last_message_at: None,
            last_read: Some(Ticks::from_datetime(joined_at).message_key()),
        }
    }

    /// The name other members see: the nickname if set.
    pub fn display_name(&self) -> &str {
        self.nickname.as_deref().unwrap_or(&self.name)
    }

    /// True while a timeout is running.
    pub fn timed_out_at(&self, now: DateTime<Utc>) -> bool {
        self.timeout_until.is_some_and(|until| until > now)
    }

    pub fn summary(&self) -> MemberSummary {
        MemberSummary {
            user_id: self.user_id.to_string(),
            name: self.name.clone(),
            nickname: self.nickname.clone(),
            role: self.role,
            roles: self.roles.clone(),
            joined_at: self.joined_at,
            timeout_until: self.timeout_until,
        }
    }
}

fn checked_nickname(nickname: &str) -> Result<Option<String>> {
    let nickname = plain_text(nickname, "a nickname", 0, MAX_NICKNAME_CHARS)?;
    Ok((!nickname.is_empty()).then_some(nickname))
}

impl Chat {
    pub async fn list_members(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<MemberSummary>> {
        self.access(room_id, &who.user_id).await?;
        let members = self.store.members(room_id, MAX_LISTED_MEMBERS, true).await?;
        Ok(members.iter().map(Member::summary).collect())
    }

    /// Changes the caller's own nickname, notification level or mute.
    pub async fn update_membership(
        &self,
        who: &Principal,
        room_id: &RoomId,
        change: MembershipChange,
    ) -> Result<Member> {
        let nickname = change.nickname.as_deref().map(checked_nickname).transpose()?;
        self.access(room_id, &who.user_id).await?;
        self.store
            .update_member(room_id, &who.user_id, |member| {
                if let Some(nickname) = &nickname {
                    member.nickname = nickname.clone();
                }
                member.notifications = change.notifications.unwrap_or(member.notifications);
                member.muted = change.muted.unwrap_or(member.muted);
                Ok(())
            })
            .await
    }

    pub async fn mark_read(&self, who: &Principal, room_id: &RoomId, input: MarkRead) -> Result<()> {
        self.access(room_id, &who.user_id).await?;
        let position = match &input.message_id {
            Some(id) => self.live_message(room_id, id).await?.key(),
            None => Ticks::now().message_key(),
        };
        self.store
            .update_member(room_id, &who.user_id, |member| {
                member.last_read = Some(position.clone());
                Ok(())
            })
            .await?;
        let signal = crate::signals::Signal::Read {
            user_id: who.user_id.to_string(),
        };
        self.signal(room_id, signal);
        Ok(())
    }

    /// The caller's access, which must hold `permission`, and the target's membership (if
    /// any) and rank, for the caller to compare against.
    async fn moderation(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        permission: Permission,
    ) -> Result<(Access, Option<Member>, Rank)> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(permission)?;
        let member = self.store.member(room_id, target).await?;
        let rank = match &member {
            Some(member) => self.standing(room_id, &access.room, member).await?.1,
            None => Rank(0),
        };
        Ok((access, member, rank))
    }

    /// `moderation` for an action on a current member, ranked below the caller.
    async fn moderated(&self, who: &Principal, room_id: &RoomId, target: &UserId) -> Result<Member> {
        let (access, member, rank) = self.moderation(who, room_id, target, Permission::ManageMembers).await?;
        let member = member.ok_or_else(|| Error::not_found("member not found"))?;
        access.require_outranks(rank)?;
        Ok(member)
    }

    pub async fn kick(&self, who: &Principal, room_id: &RoomId, target: &UserId) -> Result<()> {
        let member = self.moderated(who, room_id, target).await?;
        self.store.remove_member(room_id, target).await?;
        self.revoke_live(room_id, target);
        let line = format!("{} was removed from the room.", member.display_name());
        self.announce(room_id, MessageType::System, who, line).await;
        Ok(())
    }

    pub async fn timeout(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        input: Timeout,
    ) -> Result<MemberSummary> {
        let now = Utc::now();
        if let Some(until) = input.until
            && (until <= now || until > now + MAX_TIMEOUT)
        {
            return Err(Error::validation(
                "until must be in the future and at most 28 days ahead",
            ));
        }
        self.moderated(who, room_id, target).await?;
        let member = self
            .store
            .update_member(room_id, target, |member| {
                member.timeout_until = input.until;
                Ok(())
            })
            .await?;
        Ok(member.summary())
    }

    /// Bans a user, member or not (a pre-emptive ban). The ban row and the removal of the
    /// membership commit in one transaction (both live in the room's `Rooms` partition), so
    /// there is no moment when a ban exists and its target can still send.
    pub async fn ban(&self, who: &Principal, room_id: &RoomId, target: &UserId, input: Ban) -> Result<()> {
        // Table storage keeps dates up to the end of year 9999.
        if input
            .until
            .is_some_and(|until| until <= Utc::now() || until.year() > 9999)
        {
            return Err(Error::validation("until must be in the future, before the year 10000"));
        }
        let (access, member, rank) = self.moderation(who, room_id, target, Permission::ManageMembers).await?;
        access.require_outranks(rank)?;
        let record = BanRecord {
            banned_by: who.user_id.to_string(),
            banner_rank: access.rank.0,
            banned_at: Utc::now(),
            until: input.until,
        };
        self.store.ban(room_id, target, &record, member.is_some()).await?;
        // A join that read no ban before this one committed may have added a membership the
        // transaction did not remove (a join checks again after its insert; this is the ban's
        // side of that, so whichever of the two writes second sees the other).
        if self.store.member(room_id, target).await?.is_some() {
            self.store.remove_member(room_id, target).await?;
        } else {
            self.store.unindex_user_room(target, room_id).await?;
        }
        self.revoke_live(room_id, target);
        if let Some(member) = member {
            let line = format!("{} was banned from the room.", member.display_name());
            self.announce(room_id, MessageType::System, who, line).await;
        }
        Ok(())
    }

    /// Lifts a ban; only a moderator ranked at least as high as the one who banned may.
    pub async fn unban(&self, who: &Principal, room_id: &RoomId, target: &UserId) -> Result<()> {
        let access = self.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageMembers)?;
        let Some(ban) = self.store.ban_record(room_id, target).await? else {
            return Ok(());
        };
        if access.rank < Rank(ban.banner_rank) {
            return Err(Error::Forbidden("a higher-ranked member made this ban".into()));
        }
        self.store.lift_ban(room_id, target).await
    }

    /// True while a ban on `user` is in force.
    pub(crate) async fn is_banned(&self, room_id: &RoomId, user: &UserId) -> Result<bool> {
        let ban = self.store.ban_record(room_id, user).await?;
        Ok(ban.is_some_and(|ban| ban.until.is_none_or(|until| until > Utc::now())))
    }

    /// Replaces a member's roles. Every role added or removed must rank below the caller, and
    /// a role added must grant nothing the caller lacks. Compared with the row as it is when
    /// written, so a concurrent change is never overwritten unchecked.
    pub async fn set_member_roles(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        input: MemberRoles,
    ) -> Result<MemberSummary> {
        let (access, member, rank) = self.moderation(who, room_id, target, Permission::ManageRoles).await?;
        if member.is_none() {
            return Err(Error::not_found("member not found"));
        }
        if target != &who.user_id {
            access.require_outranks(rank)?;
        }
        let roles = self.roles(room_id).await?;
        let mut wanted: Vec<String> = Vec::new();
        for id in &input.role_ids {
            if !roles.iter().any(|r| &r.id == id) {
                return Err(Error::validation(format!("no role {id:?} in this room")));
            }
            if !wanted.contains(id) {
                wanted.push(id.clone());
            }
        }
        let member = self
            .store
            .update_member(room_id, target, |member| {
                for role in &roles {
                    let added = wanted.contains(&role.id);
                    if added != member.roles.contains(&role.id) {
                        access.require_outranks(Rank(role.position))?;
                        if added {
                            access.require_grantable(role.permissions)?;
                        }
                    }
                }
                member.roles = wanted.clone();
                Ok(())
            })
            .await?;
        Ok(member.summary())
    }
}

/// A user id from a path segment; one that cannot be a user id names no member.
pub fn target_user(text: &str) -> Result<UserId> {
    UserId::parse(text).map_err(|_| Error::not_found("member not found"))
}
