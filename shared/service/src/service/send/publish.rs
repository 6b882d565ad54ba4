//! Stage 3 of the one door: after the durable write only, the committed message goes to every
//! subscriber registered in the composition root (`Chat::assemble`), all at once. The send
//! waits for them (so a message's notification event is handed over before the send answers)
//! but none can fail it: a subscriber logs its own trouble, and what must not be lost was
//! committed with the message (the outbox event, the webhook event row).
//!
//! The subscribers, and what each does with a new message:
//! - [`Reading`]: lists a reply's thread under its replier's followed threads;
//! - [`Signals`]: the full message to the room's live viewers, a notice to its other members;
//! - [`Outbox`]: the notification event to its consumer, clearing its outbox row;
//! - [`Previewer`]: a link preview job for a member's first link;
//! - [`Thumbnailer`](crate::service::thumbnails::Thumbnailer): thumbnails of its images;
//! - [`OutgoingNudge`]: a delivery run of the room's outgoing webhooks.

use futures::future::{BoxFuture, FutureExt, join_all};
use std::sync::Arc;

use crate::events::MessageEvent;
use crate::ids::{RoomId, UserId};
use crate::messages::Message;
use crate::service::live::Signals;
use crate::service::outbox::Outbox;
use crate::service::outgoing::OutgoingNudge;
use crate::service::previews::Previewer;
use crate::service::read::Reading;
use crate::signals::Signal;

/// A message the commit stored, as the subscribers see it.
pub struct Committed {
    pub room: RoomId,
    pub message: Message,
    /// The notification event committed with it (its outbox row), when events are published.
    pub event: Option<MessageEvent>,
    /// The member whose reply it is, when it is a member's reply in a thread.
    pub replier: Option<UserId>,
}

/// What runs after a message is committed.
pub trait Subscriber: Send + Sync {
    /// Reacts to `committed`. Never fails the send: trouble is logged here.
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()>;
}

/// The subscribers of committed messages, in the order they were registered.
#[derive(Clone, Default)]
pub struct Publisher {
    subscribers: Vec<Arc<dyn Subscriber>>,
}

impl Publisher {
    pub fn new(subscribers: Vec<Arc<dyn Subscriber>>) -> Publisher {
        Publisher { subscribers }
    }

    /// Hands `committed` to every subscriber at once and waits for them all.
    pub async fn publish(&self, committed: &Committed) {
        join_all(self.subscribers.iter().map(|s| s.committed(committed))).await;
    }
}

impl Subscriber for Reading {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        async move {
            let (Some(replier), Some(root)) = (&committed.replier, &committed.message.thread_id) else {
                return;
            };
            let room = &committed.room;
            let listed = self
                .store
                .follows
                .index_followed(room, root, replier, committed.message.created_at)
                .await;
            if let Err(e) = listed {
                tracing::warn!(%room, error = %e, "could not list a followed thread for its replier");
            }
        }
        .boxed()
    }
}

impl Subscriber for Signals {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        async move {
            let message = committed.message.clone();
            self.signal(&committed.room, Signal::Created { message });
            self.notify_non_viewers(&committed.room, &committed.message).await;
        }
        .boxed()
    }
}

impl Subscriber for Outbox {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        async move {
            if let Some(event) = &committed.event {
                self.dispatch(&committed.room, event.clone()).await;
            }
        }
        .boxed()
    }
}

impl Subscriber for Previewer {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        self.preview_later(&committed.room, &committed.message).boxed()
    }
}

impl Subscriber for OutgoingNudge {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        self.nudge(&committed.room);
        futures::future::ready(()).boxed()
    }
}
