//! Invitations into a room: a member with CreateInvites invites a user (who sees it in their
//! invitations, to accept or decline) or makes a code to share. Accepting goes through the one
//! join path (`Rooms::admit`), ban checks included. An invitation's maker may revoke it, and a
//! member with ManageMembers any of the room's. Nobody is invited into a direct conversation.

use super::rooms::Rooms;
use chrono::Duration;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;
use crate::rooms::Room;
use crate::rooms::invitations::{
    Invitation, Invitee, MAX_PENDING_PER_USER, NewInvitation, PendingInvitation, Redeem, is_invitation_id, new_code,
    parse_code, user_invitation_id,
};
use crate::service::rooms::ROOMS_IN_FLIGHT;
use crate::store::stored_time;

impl Rooms {
    pub async fn create_invitation(
        &self,
        who: &Principal,
        room_id: &RoomId,
        input: NewInvitation,
    ) -> Result<Invitation> {
        let (invitee, expires_in) = input.checked()?;
        let access = self.access.access(room_id, &who.user_id).await?;
        if access.room.direct {
            return Err(Error::Forbidden(
                "nobody else can be invited into a direct conversation".into(),
            ));
        }
        access.require(Permission::CreateInvites)?;
        // An invitation is a write in the inviter's name, drawn from their bucket.
        self.limiter.check_user_limit(&who.user_id).await?;
        let now = stored_time(self.store.now());
        let (id, code, user_id, max_uses) = match invitee {
            Invitee::User(user) => {
                if self.store.members.member(room_id, &user).await?.is_some() {
                    return Err(Error::Conflict("they are a member already".into()));
                }
                let waiting = self.waiting_invitations(&user).await?;
                if waiting.len() >= MAX_PENDING_PER_USER && !waiting.contains(room_id) {
                    return Err(Error::Conflict(format!(
                        "they have {MAX_PENDING_PER_USER} invitations waiting already"
                    )));
                }
                (user_invitation_id(&user), None, Some(user.to_string()), None)
            }
            Invitee::Code { max_uses } => {
                let (code, id) = new_code(room_id);
                (id, Some(code), None, max_uses)
            }
        };
        let invitation = Invitation {
            id,
            room_id: room_id.to_string(),
            user_id,
            code: None,
            created_by: who.user_id.to_string(),
            created_at: now,
            expires_at: expires_in.map(|seconds| now + Duration::seconds(i64::from(seconds))),
            max_uses,
            uses: 0,
        };
        self.store.invitations.put_invitation(&invitation).await?;
        Ok(Invitation { code, ..invitation })
    }

    /// The room's invitations, open or closed: all of them with ManageMembers, else those the
    /// caller made.
    pub async fn list_invitations(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<Invitation>> {
        let access = self.access.access(room_id, &who.user_id).await?;
        let all = access.can(Permission::ManageMembers);
        let mut invitations = self.store.invitations.invitations(room_id).await?;
        invitations.retain(|i| all || i.created_by == who.user_id.as_str());
        Ok(invitations)
    }

    /// Revokes an invitation: from then on it answers as missing.
    pub async fn revoke_invitation(&self, who: &Principal, room_id: &RoomId, id: &str) -> Result<()> {
        let access = self.access.access(room_id, &who.user_id).await?;
        let invitation = match is_invitation_id(id) {
            true => self.store.invitations.invitation(room_id, id).await?,
            false => None,
        };
        let invitation = invitation.ok_or_else(|| Error::not_found("invitation not found"))?;
        if invitation.created_by != who.user_id.as_str() {
            access.require(Permission::ManageMembers)?;
        }
        let mut entry = ModerationEntry::by(ModerationAction::InvitationRevoked, &who.user_id, self.store.now())
            .detail("invitationId", &invitation.id);
        entry.target_user_id = invitation.user_id.clone();
        Ok(self
            .store
            .invitations
            .remove_invitation(&invitation, Some(&entry))
            .await?)
    }

    /// The rooms whose invitations wait for `user`, up to the cap. Only when their list is
    /// full are its entries looked at: one that no longer waits (expired, revoked, or for a room
    /// they joined another way) is taken off it, so nobody can keep a user's list full with
    /// invitations the user never sees.
    async fn waiting_invitations(&self, user: &UserId) -> Result<Vec<RoomId>> {
        let rooms = self.store.invitations.pending_invitations(user).await?;
        if rooms.len() < MAX_PENDING_PER_USER {
            return Ok(rooms);
        }
        let id = user_invitation_id(user);
        let now = self.store.now();
        let mut waiting = Vec::with_capacity(rooms.len());
        for room in rooms {
            let (invitation, member) = tokio::try_join!(
                self.store.invitations.invitation(&room, &id),
                self.store.members.member(&room, user)
            )?;
            match (invitation, member) {
                (Some(invitation), None) if invitation.is_open(now) => waiting.push(room),
                _ => self.store.invitations.drop_pending_invitation(user, &room).await?,
            }
        }
        Ok(waiting)
    }

    /// The invitations waiting for the caller: open ones, into rooms they are not in.
    pub async fn my_invitations(&self, who: &Principal) -> Result<Vec<PendingInvitation>> {
        let id = user_invitation_id(&who.user_id);
        let now = self.store.now();
        let rooms = self.store.invitations.pending_invitations(&who.user_id).await?;
        // Collected first: a stream holding the mapping closure is not `Send` for every lifetime.
        let lookups: Vec<_> = rooms
            .into_iter()
            .map(|room_id| {
                let id = &id;
                async move {
                    let (room, invitation, member) = tokio::try_join!(
                        self.store.rooms.room(&room_id),
                        self.store.invitations.invitation(&room_id, id),
                        self.store.members.member(&room_id, &who.user_id),
                    )?;
                    Ok::<_, Error>(match (room, invitation, member) {
                        (Some(room), Some(invitation), None) if invitation.is_open(now) => Some(PendingInvitation {
                            room_id: room.id,
                            room_name: room.name,
                            room_description: room.description,
                            invited_by: invitation.created_by,
                            created_at: invitation.created_at,
                            expires_at: invitation.expires_at,
                        }),
                        _ => None,
                    })
                }
            })
            .collect();
        // Three reads a room, a wave of rooms at a time (as `my_rooms` reads).
        let found: Vec<_> = futures::stream::iter(lookups)
            .buffered(ROOMS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// Accepts the caller's invitation into `room_id`.
    pub async fn accept_invitation(&self, who: &Principal, room_id: &RoomId) -> Result<Room> {
        self.admit(who, room_id, Some(&user_invitation_id(&who.user_id))).await
    }

    /// Declines the caller's invitation into `room_id`.
    pub async fn decline_invitation(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let Some(invitation) = self
            .store
            .invitations
            .invitation(room_id, &user_invitation_id(&who.user_id))
            .await?
        else {
            self.store
                .invitations
                .drop_pending_invitation(&who.user_id, room_id)
                .await?;
            return Err(Error::not_found("invitation not found"));
        };
        Ok(self.store.invitations.remove_invitation(&invitation, None).await?)
    }

    /// Joins the room a shared code invites into.
    pub async fn redeem(&self, who: &Principal, input: Redeem) -> Result<Room> {
        let (room_id, id) = parse_code(&input.code)?;
        self.admit(who, &room_id, Some(&id)).await
    }

    /// The open invitation `id` of `room_id` if it lets `user` in; anything else answers as a
    /// missing invitation.
    pub(crate) async fn open_invitation(&self, room_id: &RoomId, id: &str, user: &UserId) -> Result<Invitation> {
        let now = self.store.now();
        self.store
            .invitations
            .invitation(room_id, id)
            .await?
            .filter(|i| i.is_open(now) && i.user_id.as_deref().is_none_or(|u| u == user.as_str()))
            .ok_or_else(|| Error::not_found("invitation not found"))
    }
}
