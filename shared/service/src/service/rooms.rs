//! Rooms and membership: create (the creator owns it), join (the one way in, by id for a
//! public room or through an invitation), leave, list mine with unread counts, get one, hand
//! over. Settings are `room_settings`, deletion `room_deletion`, invitations `invitations`,
//! direct conversations `direct`, the directory `directory`.
//!
//! A room and its members share one `Rooms` partition, so a room is created together with its
//! owner's membership in one transaction. `UserRooms` indexes a user's rooms for listing: the
//! index row is written before a membership appears (and taken back if the membership is not
//! written) and removed before it goes, so no index row outlives its membership for good; every
//! listing re-checks membership, so a stale one never shows a room the user is not in.

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::members::{Member, MemberRole, target_user};
use crate::messages::MessageType;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permissions;
use crate::presence::OnlineWindow;
use crate::rooms::{
    MAX_DESCRIPTION_CHARS, MAX_ROOM_NAME_CHARS, MAX_ROOMS_PER_USER, MAX_UNREAD_COUNTED, NewRoom, Room, RoomEntry,
};
use crate::rooms::{OwnershipTransfer, WordFilterSettings};
use crate::service::send::Submission;
use crate::store::members::Joined;
use crate::store::rooms::Handover;
use crate::store::stored_time;
use crate::text::{plain_lines, plain_text};
use futures::future::try_join_all;

/// Rooms a listing reads at once, in a wave of two rounds (at most two reads of each in flight):
/// enough that 200 rooms take 7 waves, few enough that one listing never floods the store.
pub(crate) const ROOMS_IN_FLIGHT: usize = 32;

/// Rooms: creating, joining, leaving, invitations, settings and deletion. Holds what it uses: the
/// store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Rooms {
    pub(crate) store: crate::store::Store,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) files: std::sync::Arc<crate::service::attachments::Files>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
    pub(crate) sending: std::sync::Arc<crate::service::send::Sending>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Rooms {
    pub async fn create_room(&self, who: &Principal, input: NewRoom) -> Result<Room> {
        self.access.refuse_while_erasing(&who.user_id).await?;
        // A room is a write in its owner's name, drawn from their bucket.
        self.limiter.check_user_limit(&who.user_id).await?;
        let name = plain_text(&input.name, "name", 1, MAX_ROOM_NAME_CHARS)?;
        let description = plain_lines(
            input.description.as_deref().unwrap_or(""),
            "description",
            MAX_DESCRIPTION_CHARS,
        )?;
        let id = RoomId::generate();
        let now = stored_time(self.store.now());
        let room = Room {
            id: id.to_string(),
            name,
            description,
            owner_id: who.user_id.to_string(),
            created_at: now,
            read_only: false,
            replies_only: false,
            slowmode_seconds: 0,
            word_filter: WordFilterSettings::default(),
            everyone_permissions: Permissions::DEFAULT_EVERYONE,
            retention_seconds: None,
            visibility: input.visibility,
            direct: false,
            max_sends_per_second: 0,
            trust_thresholds: None,
        };
        let owner = Member::new(who, MemberRole::Owner, now);
        self.store.rooms.create_room(&room, &owner).await?;
        Ok(room)
    }

    /// Joins a public room by id. A private room (or a direct conversation) answers as
    /// missing: it is joined only through an invitation (`accept_invitation`, `redeem`).
    pub async fn join_room(&self, who: &Principal, room_id: &RoomId) -> Result<Room> {
        self.admit(who, room_id, None).await
    }

    /// The one way into a room, by id or through an invitation (`invitation`: its id).
    /// Joining twice is a no-op and uses no invitation; a banned user is refused, before a
    /// code's use is counted and again after the membership is written (of a ban and a join
    /// racing, whichever writes second sees the other). A user's invitation goes once used.
    pub(crate) async fn admit(&self, who: &Principal, room_id: &RoomId, invitation: Option<&str>) -> Result<Room> {
        let room = match self.find_room(room_id).await? {
            Some(room) => room,
            // Through an invitation, a missing room answers as the missing invitation a
            // private room answers with, so a made-up code or room id tells nothing apart.
            None if invitation.is_some() => return Err(Error::not_found("invitation not found")),
            None => return Err(Error::not_found("room not found")),
        };
        if self.store.members.member(room_id, &who.user_id).await?.is_some() {
            return Ok(room);
        }
        let invitation = match invitation {
            None if room.is_listed() => None,
            // To anyone but its members, a private room does not exist.
            None => return Err(Error::not_found("room not found")),
            Some(id) => Some(self.open_invitation(room_id, id, &who.user_id).await?),
        };
        if self.access.is_banned(room_id, &who.user_id).await? {
            return Err(Error::Forbidden("you are banned from this room".into()));
        }
        self.access.refuse_while_erasing(&who.user_id).await?;
        // A join writes a line in the joiner's name.
        self.limiter.check_user_limit(&who.user_id).await?;
        if let Some(invitation) = invitation.as_ref().filter(|i| i.user_id.is_none()) {
            self.store
                .invitations
                .use_invitation(room_id, &invitation.id, self.store.now())
                .await?;
        }
        let mut member = Member::new(who, MemberRole::Member, self.store.now());
        // A timeout, a trust level set and strikes outlive leaving and rejoining, as a ban does.
        let kept = self
            .store
            .members
            .kept_standing(room_id, &who.user_id, self.store.now())
            .await?;
        member.timeout_until = kept.timeout_until;
        member.trust_level = kept.trust_level;
        member.strikes = kept.strikes;
        if self.store.members.add_member(room_id, &member).await? == Joined::AlreadyMember {
            return Ok(room);
        }
        // A ban that committed between the check above and the insert wins.
        if self.access.is_banned(room_id, &who.user_id).await? {
            self.store.members.remove_member(room_id, &who.user_id).await?;
            return Err(Error::Forbidden("you are banned from this room".into()));
        }
        if let Some(invitation) = invitation.filter(|i| i.user_id.is_some()) {
            self.store.invitations.remove_invitation(&invitation, None).await?;
        }
        let line = format!("{} joined the room.", who.name);
        self.sending
            .announce(room_id, Submission::line(MessageType::System, who, &line))
            .await;
        Ok(room)
    }

    /// Leaves a room. The owner cannot leave (the room would have no owner).
    pub async fn leave_room(&self, who: &Principal, room_id: &RoomId) -> Result<()> {
        let access = self.access.access(room_id, &who.user_id).await?;
        if access.is_owner() {
            return Err(Error::Conflict("the owner cannot leave the room".into()));
        }
        if access.room.direct {
            return Err(Error::Conflict(
                "a direct conversation cannot be left; mute it instead".into(),
            ));
        }
        // A leave writes a line in the leaver's name.
        self.limiter.check_user_limit(&who.user_id).await?;
        self.store.members.end_membership(room_id, &who.user_id, None).await?;
        self.signals.revoke_live(room_id, &who.user_id).await;
        let line = format!("{} left the room.", access.member.display_name());
        self.sending
            .announce(room_id, Submission::line(MessageType::System, who, &line))
            .await;
        Ok(())
    }

    /// The rooms the caller belongs to, the most recently active first, each with its newest
    /// message's preview and the caller's unread and mention counts.
    ///
    /// One call reads: the caller's `UserRooms` range (1), then per listed room its room row
    /// and its member row (point reads in the room's `Rooms` partition, issued together) and,
    /// once the member row has given the read position, ONE range read of `Messages` (the
    /// activity row and the unread messages together) — at most `1 + 3·N` reads, plus one
    /// presence read shared by the whole listing when an unread `@here` needs it. The rooms are
    /// read in waves of [`ROOMS_IN_FLIGHT`], two rounds a wave, so `N` rooms take at most
    /// `2 + 2·⌈N / ROOMS_IN_FLIGHT⌉` rounds (the presence read included): 16 for 200, not `2·N`,
    /// and one listing never puts hundreds of requests on the store at once.
    ///
    /// Why not fewer: the two point reads cannot become one query on Azure, where `RowKey eq a
    /// or RowKey eq b` is a partition scan (the room's partition grows with its members, bans
    /// and moderation log) and the key range between `m:<user>` and `room` holds every later
    /// member; copying the room row into each member's `UserRooms` row costs a write per member
    /// on every settings change, and copying the read position there a second write on every
    /// send (which moves the sender's position) and receipt, with no transaction across the two
    /// partitions to keep the copy exact. `docs/BENCHMARKS.md` has the counts.
    pub async fn my_rooms(&self, who: &Principal) -> Result<Vec<RoomEntry>> {
        let rooms = self.store.members.user_rooms(&who.user_id, MAX_ROOMS_PER_USER).await?;
        let online = &tokio::sync::OnceCell::new();
        let mut entries = Vec::with_capacity(rooms.len());
        for wave in rooms.chunks(ROOMS_IN_FLIGHT) {
            entries.extend(self.listed_wave(wave, who, online).await?);
        }
        entries.sort_by(|a, b| (b.last_activity_at, &b.room.id).cmp(&(a.last_activity_at, &a.room.id)));
        Ok(entries)
    }

    /// The entries of one wave of a listing, in two rounds: every room's room row and the
    /// caller's member row together, then one `Messages` range per room the caller is still a
    /// member of (after the read position its member row gave). A room being deleted, or an
    /// index row whose membership is gone, is left out, and the latter costs no `Messages` read.
    async fn listed_wave(
        &self,
        wave: &[RoomId],
        who: &Principal,
        online: &tokio::sync::OnceCell<OnlineWindow>,
    ) -> Result<Vec<RoomEntry>> {
        let rows = try_join_all(wave.iter().map(|room_id| async move {
            let (member, room) = tokio::try_join!(
                self.store.members.member(room_id, &who.user_id),
                self.store.rooms.room(room_id)
            )?;
            Ok::<_, Error>(member.zip(room).map(|(member, room)| (room_id, member, room)))
        }))
        .await?;
        let entries = rows.into_iter().flatten().map(|(room_id, member, room)| async move {
            let found = self
                .store
                .messages
                .unread_since(room_id, &member.read_position(), MAX_UNREAD_COUNTED)
                .await?;
            self.signals.entry_of(room, &member, found, online).await
        });
        try_join_all(entries).await
    }

    /// A room the caller belongs to; any other room answers as missing.
    pub async fn get_room(&self, who: &Principal, room_id: &RoomId) -> Result<Room> {
        Ok(self.access.access(room_id, &who.user_id).await?.room)
    }

    /// The room, unless it is missing or being deleted (both answer as missing).
    pub(crate) async fn find_room(&self, room_id: &RoomId) -> Result<Option<Room>> {
        Ok(self.store.rooms.room(room_id).await?)
    }

    /// Hands the room to another member: they become its owner, and the caller an ordinary
    /// member (who may then leave). Only the owner may; a line in the room's voice says so, and
    /// the moderation log records it in the hand-over's transaction.
    pub async fn transfer_ownership(
        &self,
        who: &Principal,
        room_id: &RoomId,
        input: OwnershipTransfer,
    ) -> Result<Room> {
        let target = target_user(&input.user_id)?;
        let access = self.access.access(room_id, &who.user_id).await?;
        if !access.is_owner() {
            return Err(Error::Forbidden("only the owner can hand the room over".into()));
        }
        if target == who.user_id {
            return Err(Error::validation("you own the room already"));
        }
        let entry =
            ModerationEntry::by(ModerationAction::OwnershipTransferred, &who.user_id, self.store.now()).user(&target);
        let handover = self
            .store
            .rooms
            .transfer_ownership(room_id, &who.user_id, &target, Some(&entry))
            .await?;
        let (room, owner) = match handover {
            Handover::Done { room, owner } => (room, owner),
            Handover::NoSuchMember => return Err(Error::not_found("member not found")),
            Handover::Changed => {
                return Err(Error::Conflict(
                    "the room or its members changed meanwhile; try again".into(),
                ));
            }
        };
        let line = format!(
            "{} handed the room to {}.",
            access.member.display_name(),
            owner.display_name()
        );
        self.sending
            .announce(room_id, Submission::line(MessageType::System, who, &line))
            .await;
        Ok(room)
    }
}
