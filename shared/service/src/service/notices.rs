//! Tiered live delivery: a send's full message goes only to the
//! room's group, which holds the connections showing the room (`Signals::view_room`); every
//! other member gets a short notice of their own — once until they look at the room again
//! (show it or read it), and for each message that mentions them by name — carrying the
//! unread and mention counts the room list would answer, so a badge updates in place.
//!
//! What a send costs here: one range read of the room's lookers (`store::live`), then for
//! each member it tells, their member row, one range read of their unread messages and the
//! removal of their armed row (and their presence row when an unread message says `@here`). Members who were told already and have not looked since cost
//! nothing, so in a busy room the work follows the people looking, not the members; each look
//! buys at most one notice. Mentions of a role, `@everyone` and `@here` count in the counts
//! but tell only the members due a notice anyway: telling every member would make a send cost
//! what the room has members.

use super::live::Signals;
use std::collections::HashSet;

use futures::stream::{self, StreamExt};

use crate::error::Result;
use crate::ids::{RoomId, UserId};
use crate::members::Member;
use crate::messages::Message;
use crate::presence::OnlineWindow;
use crate::rooms::{MAX_UNREAD_COUNTED, Room, RoomEntry};
use crate::signals::Signal;
use crate::store::activity::Unread;
use crate::store::live::Armed;

/// Notices prepared at once (each a member read and a range read).
const NOTICES_AT_ONCE: usize = 8;

impl Signals {
    /// Tells the members of `room` who are not looking at it that `message` arrived. A side
    /// effect after the durable write: failures are logged, never returned.
    pub(crate) async fn notify_non_viewers(&self, room: &RoomId, message: &Message) {
        if self.live.is_none() {
            return;
        }
        let lookers = match self.store.live.lookers(room, self.store.now()).await {
            Ok(lookers) => lookers,
            Err(e) => return tracing::warn!(%room, error = %e, "could not read who looks at a room"),
        };
        for connection in &lookers.stale {
            if let Err(e) = self.store.live.remove_viewer(room, connection).await {
                tracing::warn!(%room, error = %e, "could not clear a stale viewer row");
            }
        }
        let looking: HashSet<&UserId> = lookers.viewers.iter().collect();
        let skip = |user: &UserId| looking.contains(user) || user.as_str() == message.author_id;
        let mut told: Vec<(UserId, Option<Armed>)> = Vec::new();
        for armed in lookers.armed.into_iter().filter(|a| !skip(&a.user)) {
            told.push((armed.user.clone(), Some(armed)));
        }
        for named in &message.mentions.users {
            if let Ok(user) = UserId::parse(named)
                && !skip(&user)
                && !told.iter().any(|(u, _)| *u == user)
            {
                told.push((user, None));
            }
        }
        if told.is_empty() {
            return;
        }
        let room_row = match self.store.rooms.room(room).await {
            Ok(Some(row)) => row,
            Ok(None) => return,
            Err(e) => return tracing::warn!(%room, error = %e, "could not read a room for its notices"),
        };
        stream::iter(told)
            .for_each_concurrent(NOTICES_AT_ONCE, |(user, armed)| {
                let room_row = room_row.clone();
                async move {
                    if let Err(e) = self.tell(room, room_row, &user, armed.as_ref(), message).await {
                        tracing::warn!(%room, %user, error = %e, "a notice was not sent");
                    }
                }
            })
            .await;
    }

    /// One member's notice with their counts, then their armed row goes. A user who is no
    /// member (left, or named without being one) is told nothing, and their row goes too.
    async fn tell(
        &self,
        room: &RoomId,
        room_row: crate::rooms::Room,
        user: &UserId,
        armed: Option<&Armed>,
        message: &Message,
    ) -> crate::error::Result<()> {
        if let Some(member) = self.store.members.member(room, user).await? {
            let online = tokio::sync::OnceCell::new();
            let entry = self.room_entry(room_row, &member, &online).await?;
            let here = message.mentions.here && self.online_window(&online, user).await?.covers(message.created_at);
            let mentioned = message.mentions.reaches(user.as_str(), &member.roles, here);
            let signal = Signal::Activity {
                unread_count: entry.unread_count,
                unread_capped: entry.unread_capped,
                mention_count: entry.mention_count,
                mentioned,
            };
            self.notice(room, user, signal);
        }
        if let Some(armed) = armed {
            self.store.live.disarm_notice(room, armed).await?;
        }
        Ok(())
    }

    /// `user` looked at the room (read it, showed it, or connected afresh): their next
    /// message from it brings a notice again. Best effort: a failure only costs that notice.
    pub(crate) async fn arm_notice(&self, room: &RoomId, user: &UserId) {
        if self.live.is_none() {
            return;
        }
        if let Err(e) = self.store.live.arm_notice(room, user).await {
            tracing::warn!(%room, %user, error = %e, "could not arm a notice");
        }
    }

    /// Counts what `member` has not read: messages from others newer than their read position
    /// (one range read of at most [`MAX_UNREAD_COUNTED`] rows), and how many mention them
    /// (an `@here` only if it was sent while they were online). When's that is read from their
    /// presence row into `online` the first time an unread `@here` needs it, so a listing
    /// shares one read, and one without `@here` makes none.
    pub(crate) async fn room_entry(
        &self,
        room: Room,
        member: &Member,
        online: &tokio::sync::OnceCell<OnlineWindow>,
    ) -> Result<RoomEntry> {
        let room_id = RoomId::parse(&room.id)?;
        let position = member.read_position();
        let found = self
            .store
            .messages
            .unread_since(&room_id, &position, MAX_UNREAD_COUNTED)
            .await?;
        self.entry_of(room, member, found, online).await
    }

    /// The entry of `room` for `member` from what `unread_since` found after their read
    /// position (`online`: as in [`Signals::room_entry`]).
    pub(crate) async fn entry_of(
        &self,
        room: Room,
        member: &Member,
        found: Unread,
        online: &tokio::sync::OnceCell<OnlineWindow>,
    ) -> Result<RoomEntry> {
        let position = member.read_position();
        let me = member.user_id.as_str();
        let unread: Vec<Message> = found
            .messages
            .into_iter()
            .filter(|m| m.is_live() && m.author_id != me)
            .collect();
        let online = match unread.iter().any(|m| m.mentions.here) {
            true => *self.online_window(online, &member.user_id).await?,
            false => OnlineWindow::default(),
        };
        let mention_count = unread
            .iter()
            .filter(|m| m.mentions.reaches(me, &member.roles, online.covers(m.created_at)))
            .count();
        // What a retention period expired is not previewed either: only its time stays.
        let expired_before = room
            .retention_seconds
            .map(|seconds| self.store.now() - chrono::Duration::seconds(i64::from(seconds)));
        let last_message = found.last.map(|preview| match expired_before {
            Some(cutoff) if preview.created_at < cutoff => preview.expired(),
            _ => preview,
        });
        let last_activity_at = last_message.as_ref().map_or(room.created_at, |p| p.created_at);
        let capped = found.capped;
        Ok(RoomEntry {
            room,
            unread_count: unread.len(),
            unread_capped: capped,
            mention_count,
            last_read_at: position.ticks().to_datetime(),
            notifications: member.notifications,
            muted: member.muted,
            last_activity_at,
            last_message,
        })
    }

    /// When `user` was online (for `@here`), read once into `cell`.
    pub(crate) async fn online_window<'a>(
        &self,
        cell: &'a tokio::sync::OnceCell<OnlineWindow>,
        user: &crate::ids::UserId,
    ) -> Result<&'a OnlineWindow> {
        Ok(cell.get_or_try_init(|| self.store.presence.online_window(user)).await?)
    }
}
