//! Tiered live delivery (issue 15 item 6, seed 001): a send's full message goes only to the
//! room's group, which holds the connections showing the room (`Chat::view_room`); every
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

use std::collections::HashSet;

use chrono::Utc;
use futures::stream::{self, StreamExt};

use super::Chat;
use crate::ids::{RoomId, UserId};
use crate::messages::Message;
use crate::signals::Signal;
use crate::store::live::Armed;

/// Notices prepared at once (each a member read and a range read).
const NOTICES_AT_ONCE: usize = 8;

impl Chat {
    /// Tells the members of `room` who are not looking at it that `message` arrived. A side
    /// effect after the durable write: failures are logged, never returned.
    pub(crate) async fn notify_non_viewers(&self, room: &RoomId, message: &Message) {
        if self.live.is_none() {
            return;
        }
        let lookers = match self.store.live.lookers(room, Utc::now()).await {
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
}
