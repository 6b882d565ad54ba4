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

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::keys::Ticks;
use crate::members::{
    MAX_LISTED_MEMBERS, MarkRead, Member, MemberSummary, MembershipChange, Receipt, checked_nickname,
};
use crate::rooms::MAX_ROOMS_PER_USER;
use crate::signals::Signal;

/// Rooms `mark_all_read` writes at the same time.
const MARK_ALL_AT_ONCE: usize = 16;

/// A member's own settings and read position in a room. Holds what it uses: the store, the adapters
/// and settings, and the components it calls.
#[derive(Clone)]
pub struct Members {
    pub(crate) store: crate::store::Store,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
    pub(crate) presence_keeper: std::sync::Arc<crate::service::presence::PresenceKeeper>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Members {
    /// The room's members, each with their trust level while the limits are on.
    pub async fn list_members(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<MemberSummary>> {
        let access = self.access.access(room_id, &who.user_id).await?;
        let members = self.store.members.members(room_id, MAX_LISTED_MEMBERS, true).await?;
        let mut listed: Vec<MemberSummary> = members.iter().map(Member::summary).collect();
        if self.limiter.enforced() {
            let accesses = self.access.accesses(room_id, &access.room, members).await?;
            let levels = self.limiter.trust_levels(room_id, &accesses).await?;
            for ((summary, level), access) in listed.iter_mut().zip(levels).zip(&accesses) {
                summary.trust_level = Some(level);
                // A level set holds only for a member whose level is not the top anyway.
                summary.trust_level_set &= !access.trust_exempt();
            }
        }
        self.presence_keeper.with_presence(listed).await
    }

    /// Changes the caller's own nickname, notification level or mute.
    pub async fn update_membership(
        &self,
        who: &Principal,
        room_id: &RoomId,
        change: MembershipChange,
    ) -> Result<Member> {
        let nickname = change.nickname.as_deref().map(checked_nickname).transpose()?;
        self.access.access(room_id, &who.user_id).await?;
        Ok(self
            .store
            .members
            .update_member(room_id, &who.user_id, |member| {
                if let Some(nickname) = &nickname {
                    member.nickname = nickname.clone();
                }
                member.notifications = change.notifications.unwrap_or(member.notifications);
                member.muted = change.muted.unwrap_or(member.muted);
                Ok(())
            })
            .await?)
    }

    pub async fn mark_read(&self, who: &Principal, room_id: &RoomId, input: MarkRead) -> Result<()> {
        self.access.access(room_id, &who.user_id).await?;
        // A write and a signal to the room, drawn from the reader's bucket.
        self.limiter.check_user_limit(&who.user_id).await?;
        let position = match &input.message_id {
            Some(id) => self
                .reading
                .live_message(room_id, &MessageKey::of_message(id)?)
                .await?
                .key(),
            None => Ticks::from_datetime(self.store.now()).message_key(),
        };
        self.store
            .members
            .update_member(room_id, &who.user_id, |member| {
                member.last_read = Some(position.clone());
                Ok(())
            })
            .await?;
        let signal = Signal::Read {
            user_id: who.user_id.to_string(),
            up_to: position.as_str().to_owned(),
        };
        self.signals.signal(room_id, signal);
        // They looked: the room's next message brings them a notice again.
        self.signals.arm_notice(room_id, &who.user_id).await;
        Ok(())
    }

    /// Marks every room of the caller read up to now: one conditional write per room, a few at
    /// a time. A room they are no member of any more (a stale index row) is passed over.
    /// Answers how many rooms were marked.
    pub async fn mark_all_read(&self, who: &Principal) -> Result<usize> {
        use futures::stream::{StreamExt, TryStreamExt};
        // A write in every room of the caller's: each call draws from their bucket.
        self.limiter.check_user_limit(&who.user_id).await?;
        let rooms = self.store.members.user_rooms(&who.user_id, MAX_ROOMS_PER_USER).await?;
        let position = Ticks::from_datetime(self.store.now()).message_key();
        let marks = rooms.into_iter().map(|room_id| {
            let position = position.clone();
            async move {
                let marked = self
                    .store
                    .members
                    .update_member(&room_id, &who.user_id, |member| {
                        member.last_read = Some(position.clone());
                        Ok(())
                    })
                    .await
                    .map_err(Error::from);
                match marked {
                    Ok(_) => {}
                    Err(Error::NotFound(_)) => return Ok(0),
                    Err(e) => return Err(e),
                }
                let signal = Signal::Read {
                    user_id: who.user_id.to_string(),
                    up_to: position.as_str().to_owned(),
                };
                self.signals.signal(&room_id, signal);
                self.signals.arm_notice(&room_id, &who.user_id).await;
                Ok::<usize, Error>(1)
            }
        });
        let marked: Vec<usize> = futures::stream::iter(marks)
            .buffer_unordered(MARK_ALL_AT_ONCE)
            .try_collect()
            .await?;
        Ok(marked.into_iter().sum())
    }

    /// Every member's read position in the room (one range read of its member rows), so a
    /// client can draw who has seen which message.
    pub async fn receipts(&self, who: &Principal, room_id: &RoomId) -> Result<Vec<Receipt>> {
        self.access.access(room_id, &who.user_id).await?;
        let members = self.store.members.members(room_id, MAX_LISTED_MEMBERS, false).await?;
        Ok(members.iter().map(Member::receipt).collect())
    }
}
