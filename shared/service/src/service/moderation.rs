//! Moderation: kick, timeout, ban and unban, and a member's roles. Each needs its permission
//! (`ManageMembers`; `ManageRoles` for roles) and a rank strictly above the target's.
//!
//! Each action writes its moderation log entry (`ModerationEntry`) in the transaction that
//! makes the change (`store::moderation_log`), with the reason the moderator gave.
//!
//! A ban removes the membership and writes a `ban:<user>` row in one transaction; the row
//! refuses joins and so, with the membership gone, every send, until it expires or is lifted.
//! A join checks for a ban again after its insert, and a ban for a membership again after
//! its commit, so of a ban and a join racing, whichever writes second sees the other.

use crate::access::{Access, Rank};
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{
    Ban, MAX_LISTED_MEMBERS, MAX_TIMEOUT, Member, MemberRoles, MemberSummary, SetTrustLevel, Timeout,
};
use crate::messages::MessageType;
use crate::moderation::{BanEntry, Kick, ModerationAction, ModerationEntry, checked_reason};
use crate::permissions::Permission;
use crate::service::send::Submission;
use crate::store::members::BanRecord;
use chrono::Datelike;

/// Moderation of members: kick, ban, timeout, roles given. Holds what it uses: the store, the
/// adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Moderation {
    pub(crate) store: crate::store::Store,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) sending: std::sync::Arc<crate::service::send::Sending>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Moderation {
    /// The caller's access, which must hold `permission`, and the target's membership (if
    /// any) and rank, for the caller to compare against.
    async fn moderation(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        permission: Permission,
    ) -> Result<(Access, Option<Member>, Rank)> {
        let access = self.access.access(room_id, &who.user_id).await?;
        access.require(permission)?;
        let member = self.store.members.member(room_id, target).await?;
        let rank = match &member {
            Some(member) => self.access.standing(room_id, &access.room, member).await?.1,
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

    pub async fn kick(&self, who: &Principal, room_id: &RoomId, target: &UserId, input: Kick) -> Result<()> {
        let reason = checked_reason(input.reason.as_deref())?;
        let member = self.moderated(who, room_id, target).await?;
        let entry = ModerationEntry::by(ModerationAction::Kick, &who.user_id, self.store.now())
            .user(target)
            .reason(reason);
        if !self.store.members.kick(room_id, target, &entry).await? {
            // They left meanwhile: there was no one to kick.
            return Ok(());
        }
        self.signals.revoke_live(room_id, target).await;
        let line = format!("{} was removed from the room.", member.display_name());
        self.sending
            .announce(room_id, Submission::line(MessageType::System, who, &line))
            .await;
        Ok(())
    }

    pub async fn timeout(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        input: Timeout,
    ) -> Result<MemberSummary> {
        let now = self.store.now();
        if let Some(until) = input.until
            && (until <= now || until > now + MAX_TIMEOUT)
        {
            return Err(Error::validation(
                "until must be in the future and at most 28 days ahead",
            ));
        }
        let reason = checked_reason(input.reason.as_deref())?;
        self.moderated(who, room_id, target).await?;
        let entry = |_: &Member, after: &Member| {
            let entry = ModerationEntry::by(ModerationAction::Timeout, &who.user_id, self.store.now())
                .user(target)
                .reason(reason.clone())
                .detail("until", after.timeout_until);
            vec![entry]
        };
        let member = self
            .store
            .members
            .update_member_logged(
                room_id,
                target,
                |member| {
                    // A timeout given is a strike against their trust level; one lifted, or one
                    // running moved, is not another.
                    if input.until.is_some() && !member.timed_out_at(now) {
                        member.strikes = member.strikes.add(now);
                    }
                    member.timeout_until = input.until;
                    Ok(())
                },
                entry,
            )
            .await?;
        Ok(member.summary())
    }

    /// Sets a member's trust level, which holds instead of the earned one, or (`None`) clears
    /// it. Needs ManageMembers and a rank above the member's.
    pub async fn set_trust_level(
        &self,
        who: &Principal,
        room_id: &RoomId,
        target: &UserId,
        input: SetTrustLevel,
    ) -> Result<MemberSummary> {
        self.moderated(who, room_id, target).await?;
        let entry = |_: &Member, _: &Member| {
            let entry = ModerationEntry::by(ModerationAction::TrustLevelSet, &who.user_id, self.store.now())
                .user(target)
                .detail("level", input.level);
            vec![entry]
        };
        let member = self
            .store
            .members
            .update_member_logged(
                room_id,
                target,
                |member| {
                    member.trust_level = input.level;
                    Ok(())
                },
                entry,
            )
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
            .is_some_and(|until| until <= self.store.now() || until.year() > 9999)
        {
            return Err(Error::validation("until must be in the future, before the year 10000"));
        }
        let reason = checked_reason(input.reason.as_deref())?;
        let (access, member, rank) = self.moderation(who, room_id, target, Permission::ManageMembers).await?;
        access.require_outranks(rank)?;
        let record = BanRecord {
            banned_by: who.user_id.to_string(),
            banner_rank: access.rank.0,
            banned_at: self.store.now(),
            until: input.until,
            reason: reason.clone(),
        };
        let entry = ModerationEntry::by(ModerationAction::Ban, &who.user_id, self.store.now())
            .user(target)
            .reason(reason)
            .detail("until", input.until);
        self.store
            .members
            .ban(room_id, target, &record, member.as_ref(), &entry)
            .await?;
        // A join that read no ban before this one committed may have added a membership the
        // transaction did not remove (a join checks again after its insert; this is the ban's
        // side of that, so whichever of the two writes second sees the other).
        if self.store.members.member(room_id, target).await?.is_some() {
            self.store.members.remove_member(room_id, target).await?;
        } else {
            self.store.members.unindex_user_room(target, room_id).await?;
        }
        self.signals.revoke_live(room_id, target).await;
        if let Some(member) = member {
            let line = format!("{} was banned from the room.", member.display_name());
            self.sending
                .announce(room_id, Submission::line(MessageType::System, who, &line))
                .await;
        }
        Ok(())
    }

    /// Lifts a ban; only a moderator ranked at least as high as the one who banned may.
    pub async fn unban(&self, who: &Principal, room_id: &RoomId, target: &UserId) -> Result<()> {
        let access = self.access.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageMembers)?;
        let Some(ban) = self.store.members.ban_record(room_id, target).await? else {
            return Ok(());
        };
        if access.rank < Rank(ban.banner_rank) {
            return Err(Error::Forbidden("a higher-ranked member made this ban".into()));
        }
        let entry = ModerationEntry::by(ModerationAction::Unban, &who.user_id, self.store.now()).user(target);
        self.store.members.lift_ban_logged(room_id, target, &entry).await?;
        Ok(())
    }

    /// The bans in force, with who made each, why and until when (ManageMembers).
    pub async fn list_bans(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<BanEntry>> {
        let access = self.access.access(room_id, &who.user_id).await?;
        access.require(Permission::ManageMembers)?;
        let now = self.store.now();
        let bans = self.store.members.bans(room_id, MAX_LISTED_MEMBERS).await?;
        Ok(bans
            .into_iter()
            .filter(|(_, ban)| ban.until.is_none_or(|until| until > now))
            .map(|(user_id, ban)| BanEntry {
                user_id,
                banned_by: ban.banned_by,
                banned_at: ban.banned_at,
                until: ban.until,
                reason: ban.reason,
            })
            .collect())
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
        let roles = self.access.roles(room_id).await?;
        let mut wanted: Vec<String> = Vec::new();
        for id in &input.role_ids {
            if !roles.iter().any(|r| &r.id == id) {
                return Err(Error::validation(format!("no role {id:?} in this room")));
            }
            if !wanted.contains(id) {
                wanted.push(id.clone());
            }
        }
        let entry = |before: &Member, after: &Member| {
            let changed = before.roles != after.roles;
            let entry = ModerationEntry::by(ModerationAction::MemberRolesSet, &who.user_id, self.store.now())
                .user(target)
                .detail("roleIds", &after.roles);
            changed.then_some(entry).into_iter().collect()
        };
        let member = self
            .store
            .members
            .update_member_logged(
                room_id,
                target,
                |member| {
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
                },
                entry,
            )
            .await?;
        Ok(member.summary())
    }
}
