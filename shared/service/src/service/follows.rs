//! Following threads: a replier follows automatically (their follower row commits with their
//! reply, `service::send`); anyone in the room may follow or unfollow a thread; followers are
//! pushed for its replies, subject to their level and mute (`notify`); "my threads" lists the
//! threads the caller follows with their unread replies.
//!
//! "My threads" costs one range read of the caller's rows, then per thread a member row, the
//! root and one range read of its index rows after the caller's position, all at once.

use super::read::Reading;
use crate::keys::MessageKey;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::messages::Message;
use crate::messages::threads::{FollowedThread, Following, MAX_FOLLOWED_THREADS, MAX_UNREAD_REPLIES_COUNTED};
use crate::service::rooms::ROOMS_IN_FLIGHT;
use crate::store::stored_time;

impl Reading {
    /// Follows the thread of message `id` (its root's thread when it is a reply).
    pub async fn follow_thread(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<Following> {
        self.access.access(room, &who.user_id).await?;
        let root = self.thread_root(room, id).await?;
        self.store
            .follows
            .follow(room, &root, &who.user_id, stored_time(self.store.now()))
            .await?;
        Ok(Following {
            thread_id: root,
            room_id: room.to_string(),
            following: true,
        })
    }

    /// Stops following the thread of message `id`; not following it is no error.
    pub async fn unfollow_thread(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<Following> {
        self.access.access(room, &who.user_id).await?;
        let root = self.thread_root(room, id).await?;
        self.store.follows.unfollow(room, &root, &who.user_id).await?;
        Ok(Following {
            thread_id: root,
            room_id: room.to_string(),
            following: false,
        })
    }

    /// Marks the thread of message `id` read up to now for the caller, who must follow it.
    pub async fn mark_thread_read(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<()> {
        self.access.access(room, &who.user_id).await?;
        let root = self.thread_root(room, id).await?;
        match self
            .store
            .follows
            .mark_thread_read(room, &root, &who.user_id, stored_time(self.store.now()))
            .await?
        {
            true => Ok(()),
            false => Err(Error::Conflict("you do not follow this thread".into())),
        }
    }

    /// The threads the caller follows, the most recent reply first, with unread replies.
    pub async fn my_threads(&self, who: &Principal) -> Result<Vec<FollowedThread>> {
        let followed = self.store.follows.followed(&who.user_id, MAX_FOLLOWED_THREADS).await?;
        // Collected first: a stream holding the mapping closure is not `Send` for every lifetime.
        let lookups: Vec<_> = followed
            .into_iter()
            .map(|thread| async move {
                let member = async { Ok::<_, Error>(self.store.members.member(&thread.room, &who.user_id).await?) };
                let root = async {
                    let Some(root) = MessageKey::parse(&thread.root) else {
                        return Ok(None);
                    };
                    match self.live_message(&thread.room, &root).await {
                        Ok(root) => Ok(Some(root)),
                        Err(Error::NotFound(_)) => Ok(None),
                        Err(e) => Err(e),
                    }
                };
                let (member, root) = tokio::try_join!(member, root)?;
                // A room left since, or a root deleted since, lists nothing.
                let (Some(_), Some(mut root)) = (member, root) else {
                    return Ok::<_, Error>(None);
                };
                self.hide_foreign_sources(&thread.room, &who.user_id, std::slice::from_mut(&mut root))
                    .await;
                let (unread, capped) = self
                    .store
                    .follows
                    .replies_after(&thread.room, &thread.root, thread.read_at, MAX_UNREAD_REPLIES_COUNTED)
                    .await?;
                Ok(Some(FollowedThread {
                    room_id: thread.room.to_string(),
                    root,
                    unread_replies: unread,
                    unread_capped: capped,
                }))
            })
            .collect();
        // Three reads or more a thread, a wave of threads at a time (as `my_rooms` reads).
        let found: Vec<_> = futures::stream::iter(lookups)
            .buffered(ROOMS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut threads: Vec<FollowedThread> = found.into_iter().flatten().collect();
        let last = |t: &FollowedThread| {
            t.root
                .thread
                .as_ref()
                .and_then(|s| s.last_reply_at)
                .unwrap_or(t.root.created_at)
        };
        threads.sort_by(|a, b| (last(b), &b.root.id).cmp(&(last(a), &a.root.id)));
        Ok(threads)
    }

    /// The root of the thread message `id` is in: itself, unless it is a reply.
    async fn thread_root(&self, room: &RoomId, id: &MessageKey) -> Result<String> {
        let message: Message = self.live_message(room, id).await?;
        Ok(message.thread_id.unwrap_or(message.id))
    }
}
