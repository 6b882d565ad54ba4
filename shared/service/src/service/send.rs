//! The one door: every message is created here, in the checks' fixed order (`messages::checks`) — a member's send,
//! a reply, each copy of a forward, a webhook's message ([`Sending::send_as_webhook`]) and the
//! lines the server writes itself.
//!
//! 1. membership and the idempotency lookup, read together (with whether the room has outgoing
//!    webhooks, and — for a member this process stored a message of lately — the repeat-text
//!    claim of step 2, so the limits add no round trip): a repeat of a client id returns the
//!    first stored message and triggers nothing again (only to a member of the room);
//! 2. checks (member → timed out → read-only → slowmode → the limits (`service::limits`: the
//!    user's bucket, a newcomer's rate and content, the room's ceiling, the repeat-text rule)
//!    → word filter), then content validation (text, poll, mentions, reply target); the
//!    server's own lines skip all of them. A send that fails after the repeat-text rule
//!    claimed its text takes the claim back, so sending it again is no repeat;
//! 3. the slowmode clock advances on the member row, conditionally on the row as step 1 read
//!    it, before the write: a send that cannot move it fails (closed), so slowmode never
//!    silently stops applying;
//! 4. the message row, its change-feed row, its idempotency record and its thread index row in
//!    one entity group transaction with the room's version counter (`store::ledger`), and
//!    alongside it (the same round trip) the ascending index row at the message's tick. The
//!    message row is inserted, never overwritten: a 409 on it means another send, in this
//!    process or another, took the tick, and the send takes the next one. If the transaction
//!    fails, the index row this send created is deleted again (on its own version, so a row
//!    re-written for another send's message at that tick stays), so a failed send leaves
//!    nothing readable — unless the store cannot tell whether it committed: a message that may
//!    be stored keeps its index row. A stored message whose index row could not be written, or
//!    was found already there, writes it again (an upsert of a key-only row);
//! 5. after the durable write only: side effects, which never fail the send.

use super::limits::{SendEnd, TextAhead};
use crate::access::Access;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::events::MessageEvent;
use crate::html;
use crate::ids::{ClientId, RoomId, UserId};
use crate::messages::checks::{self, Admission};
use crate::messages::operations::{Operation, authorize};
use crate::messages::send::{Draft, DraftAttachments, NewMessage, Post, Sent};
use crate::messages::{Message, MessageType, Origin};
use crate::permissions::Permission;
use crate::rooms::Visibility;
use crate::signals::Signal;
use crate::store::messages::{IndexRow, Inserted, NotInserted};
use crate::store::stored_time;
use crate::webhooks::{CheckedPayload, Webhook};
use chrono::{DateTime, Duration, Utc};

/// Ticks tried before a send gives up on finding a free one. Each collision means another send
/// took that exact 100 ns tick, so even a handful in a row is extraordinary.
const MAX_TICK_ATTEMPTS: usize = 64;

/// Writes of a stored message's index row tried before it is given up (and logged).
const INDEX_ROW_ATTEMPTS: usize = 3;

/// What a send read before its checks that its write needs too, so it is not read again.
#[derive(Debug, Clone, Copy, Default)]
struct Prefetched {
    /// Whether the room has outgoing webhooks (`store::outgoing`): none when not read.
    hooked: Option<bool>,
}

/// Sending: the one door every message comes through, inbound and outgoing webhooks. Holds what it
/// uses: the store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Sending {
    pub(crate) store: crate::store::Store,
    pub(crate) clock: fn() -> crate::keys::Ticks,
    pub(crate) time: std::sync::Arc<dyn crate::adapters::clock::Clock>,
    pub(crate) outgoing: Option<std::sync::Arc<crate::adapters::outgoing::HookSender>>,
    pub(crate) automation: Option<std::sync::Arc<crate::adapters::events::EventGrid>>,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) files: std::sync::Arc<crate::service::attachments::Files>,
    pub(crate) limiter: std::sync::Arc<crate::service::limits::Limiter>,
    pub(crate) outbox: std::sync::Arc<crate::service::outbox::Outbox>,
    pub(crate) previewer: std::sync::Arc<crate::service::previews::Previewer>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Sending {
    /// Sends a member's message into a room.
    pub async fn send_message(&self, who: &Principal, room: &RoomId, input: NewMessage) -> Result<Sent> {
        let kind = input.kind.unwrap_or(MessageType::Message);
        if !matches!(kind, MessageType::Message | MessageType::Poll) {
            return Err(Error::Forbidden(format!(
                "members send Message and Poll; {} lines are written by the server",
                kind.as_str()
            )));
        }
        let client_id = input.client_id.as_deref().map(ClientId::parse).transpose()?;
        let draft = Draft {
            kind,
            text: input.text.as_deref().map(html::sanitize),
            poll: input.poll,
            reply_to: input.reply_to,
            forwarded_from: None,
            attachments: match input.attachments {
                Some(ids) => DraftAttachments::Named(ids),
                None => DraftAttachments::None,
            },
        };
        // One round trip: the membership, the idempotency record, whether the room has
        // outgoing webhooks and (for a known sender) the repeat-text claim, together.
        let record = async {
            match &client_id {
                Some(client_id) => {
                    self.store
                        .messages
                        .client_id_record(room, &who.user_id, client_id)
                        .await
                }
                None => Ok(None),
            }
        };
        let (access, record, hooked, ahead) = tokio::join!(
            self.sender_access(room, &who.user_id),
            record,
            self.store.outgoing.wants_hook_events(room),
            self.limiter
                .claim_text_ahead(room, &who.user_id, &draft, client_id.as_ref())
        );
        let read = async {
            // Membership first: only a member is answered with a message of the room, even a
            // repeat of their own.
            let access = access?;
            let repeat = match record? {
                Some(key) => self.store.messages.message(room, &key).await?,
                None => None,
            };
            Ok::<_, Error>((access, repeat, hooked?))
        };
        match read.await {
            Ok((access, None, hooked)) => {
                let known = Prefetched { hooked: Some(hooked) };
                self.admit_and_post(who, room, access, draft, client_id, known, ahead)
                    .await
            }
            Ok((_, Some(first), _)) => {
                self.limiter
                    .settle_ahead(ahead, room, &who.user_id, client_id.as_ref(), SendEnd::Repeat)
                    .await;
                Ok(Sent::repeat(first))
            }
            Err(e) => {
                self.limiter
                    .settle_ahead(ahead, room, &who.user_id, client_id.as_ref(), SendEnd::Failed(&e))
                    .await;
                Err(e)
            }
        }
    }

    /// Steps 2 to 5 for a member's message.
    pub(crate) async fn send_as_member(
        &self,
        who: &Principal,
        room: &RoomId,
        draft: Draft,
        client_id: Option<ClientId>,
    ) -> Result<Sent> {
        let access = self.sender_access(room, &who.user_id).await?;
        let known = Prefetched::default();
        self.admit_and_post(who, room, access, draft, client_id, known, TextAhead::Later)
            .await
    }

    /// Steps 2 to 5 for a member's message, given the sender's access (and the repeat-text
    /// claim if its first round took it).
    #[allow(clippy::too_many_arguments)]
    async fn admit_and_post(
        &self,
        who: &Principal,
        room: &RoomId,
        access: Access,
        draft: Draft,
        client_id: Option<ClientId>,
        known: Prefetched,
        ahead: TextAhead,
    ) -> Result<Sent> {
        let now = self.time.now();
        let client = client_id.clone();
        if let Err(refused) = checks::before_limits(&access, now) {
            self.limiter
                .settle_ahead(ahead, room, &who.user_id, client.as_ref(), SendEnd::Failed(&refused))
                .await;
            return Err(refused);
        }
        let claim = self
            .limiter
            .check_send_limits(&access, &draft, ahead, client.as_ref())
            .await?;
        let sent = self
            .filter_and_post(who, room, access, draft, client_id, now, known)
            .await;
        self.limiter
            .settle_text(claim, room, &who.user_id, client.as_ref(), SendEnd::of(&sent))
            .await;
        if let Ok(stored) = &sent
            && stored.created
        {
            self.limiter.remember_sender(room, &who.user_id);
        }
        sent
    }

    /// Steps 2 (from the word filter on) to 5 for a member's message.
    #[allow(clippy::too_many_arguments)]
    async fn filter_and_post(
        &self,
        who: &Principal,
        room: &RoomId,
        access: Access,
        draft: Draft,
        client_id: Option<ClientId>,
        now: DateTime<Utc>,
        known: Prefetched,
    ) -> Result<Sent> {
        if let Admission::Filtered { timeout } = checks::word_filter(&access, &draft.filter_text()) {
            return Err(self.refuse_filtered(room, &who.user_id, timeout, now).await);
        }
        let content = draft.validate(&access)?;
        let (reply_to, thread_id) = match &draft.reply_to {
            Some(id) => {
                let target = self.reading.live_message(room, id).await?;
                authorize(&access, &target, Operation::Reply)?;
                let root = target.thread_id.clone().unwrap_or_else(|| target.id.clone());
                (Some(target.id), Some(root))
            }
            None => (None, None),
        };
        // The attachments, last of the checks: each upload named is checked and claimed for
        // this send (a forward's files are copied into this room); a send that does not
        // happen releases them (copies are removed).
        let claim = crate::service::attachments::Files::attachment_claim(&who.user_id, client_id.as_ref());
        let (files, taken) = match &draft.attachments {
            DraftAttachments::None => (Vec::new(), Vec::new()),
            DraftAttachments::Named(ids) => {
                let claimed = self
                    .files
                    .claim_attachments(&who.user_id, room, ids, &claim, client_id.as_ref())
                    .await?;
                (claimed.files, claimed.taken)
            }
            DraftAttachments::Copied { from, files } => (
                self.files
                    .copy_attachments(&who.user_id, from, room, files, &claim)
                    .await?,
                Vec::new(),
            ),
        };
        let post = Post {
            kind: draft.kind,
            author_id: who.user_id.to_string(),
            author_name: access.member.nickname.clone().unwrap_or_else(|| who.name.clone()),
            avatar_url: None,
            text: content.text,
            poll: content.poll,
            mentions: content.mentions,
            idempotency: client_id.clone().map(|c| (who.user_id.clone(), c)),
            reply_to,
            thread_id,
            pinned_message_id: None,
            forwarded_from: draft.forwarded_from,
            attachments: files.clone(),
            reader: Some(who.user_id.clone()),
            reader_row: Some(access.member.clone()),
            origin: Origin::User,
            public_room: access.room.visibility == Visibility::Public,
        };
        let sent = self
            .advance_and_post(who, room, &access, post, client_id.clone(), now, known)
            .await;
        // A repeat carries the first send's claim (the same client id): nothing to release.
        match &sent {
            Err(_) => match &draft.attachments {
                DraftAttachments::Copied { .. } => self.files.remove_attachments(room, &files).await,
                _ => {
                    self.files
                        .release_attachments(room, &taken, &claim, &who.user_id, client_id.as_ref())
                        .await
                }
            },
            // Files another attempt of this send claimed: that attempt may have failed and
            // released them while this one was storing its message.
            Ok(stored) if stored.created && taken.len() < files.len() => {
                self.files.keep_claims(room, &files, &taken, &claim).await
            }
            // Another attempt of this send stored its message first: what this attempt took
            // and that message does not carry (a retry naming other files) is no message's.
            Ok(stored) if !stored.created && !taken.is_empty() => {
                let unused: Vec<_> = taken
                    .iter()
                    .filter(|t| !stored.message.attachments.iter().any(|a| a.id == t.id))
                    .cloned()
                    .collect();
                self.files.give_back(room, &unused, &claim).await
            }
            Ok(_) => {}
        }
        sent
    }

    /// Steps 3 to 5 for a member's checked message.
    #[allow(clippy::too_many_arguments)]
    async fn advance_and_post(
        &self,
        who: &Principal,
        room: &RoomId,
        access: &Access,
        mut post: Post,
        client_id: Option<ClientId>,
        now: DateTime<Utc>,
        known: Prefetched,
    ) -> Result<Sent> {
        match self.advance_slowmode_clock(room, access, now).await {
            // The member row as the clock's write left it: the read position moves on it.
            Ok(Some(moved)) => post.reader_row = Some(moved),
            Ok(None) => {}
            Err(refused) => {
                // A concurrent retry of the same client id moved the clock first: answer with
                // its message once it is stored.
                if let Some(client_id) = &client_id
                    && let Some(first) = self
                        .store
                        .messages
                        .sent_with_client_id(room, &who.user_id, client_id)
                        .await?
                {
                    return Ok(Sent::repeat(first));
                }
                return Err(refused);
            }
        }
        self.post_with(room, post, known).await
    }

    /// A webhook's message (`service::webhooks`), through the checks a webhook can meet:
    /// read-only, the limits (the webhook's own bucket, the room's ceiling, the repeat-text
    /// rule), the word filter and content validation. A webhook is no member, so it has no
    /// timeout; slowmode paces a person and does not apply; a filtered text is refused without
    /// the filter's timeout, which has no member row to land on.
    pub(crate) async fn send_as_webhook(
        &self,
        room: &RoomId,
        hook: &Webhook,
        access: Access,
        payload: CheckedPayload,
        client_id: Option<ClientId>,
    ) -> Result<Sent> {
        if access.room.read_only {
            return Err(Error::Forbidden("the room is read-only".into()));
        }
        let draft = Draft {
            kind: MessageType::Webhook,
            text: Some(payload.html),
            poll: None,
            reply_to: None,
            forwarded_from: None,
            attachments: DraftAttachments::None,
        };
        let client = client_id.clone();
        let claim = self
            .limiter
            .check_send_limits(&access, &draft, TextAhead::Later, client.as_ref())
            .await?;
        let sent = async {
            if let Admission::Filtered { .. } = checks::word_filter(&access, &draft.filter_text()) {
                return Err(Error::Forbidden("the message contains blocked content".into()));
            }
            let content = draft.validate(&access)?;
            let post = Post {
                kind: MessageType::Webhook,
                author_id: hook.author_id(),
                author_name: payload.username.unwrap_or_else(|| hook.name.clone()),
                avatar_url: payload.icon_url,
                text: content.text,
                poll: None,
                mentions: content.mentions,
                idempotency: client_id.map(|c| (access.member.user_id.clone(), c)),
                reply_to: None,
                thread_id: None,
                pinned_message_id: None,
                forwarded_from: None,
                attachments: Vec::new(),
                reader: None,
                reader_row: None,
                origin: match hook.automation {
                    true => Origin::Automation,
                    false => Origin::Webhook,
                },
                public_room: access.room.visibility == Visibility::Public,
            };
            self.post(room, post).await
        }
        .await;
        let user = &access.member.user_id;
        self.limiter
            .settle_text(claim, room, user, client.as_ref(), SendEnd::of(&sent))
            .await;
        sent
    }

    /// Writes a line in the room's own voice, unchecked (the server decided to write it).
    /// `Message` and `Webhook` text is sanitized like a member's; every other type's is plain
    /// text.
    pub async fn write_line(
        &self,
        room: &RoomId,
        kind: MessageType,
        author: &Principal,
        text: &str,
    ) -> Result<Message> {
        let text = match kind {
            MessageType::Webhook | MessageType::Message => html::sanitize(text),
            _ => text.to_owned(),
        };
        Ok(self.post(room, Post::line(kind, author, text)).await?.message)
    }

    /// `write_line` for a line that is a side effect: a failure is logged, never returned.
    pub(crate) async fn announce(&self, room: &RoomId, kind: MessageType, author: &Principal, text: String) {
        self.announce_post(room, Post::line(kind, author, text)).await;
    }

    pub(crate) async fn announce_post(&self, room: &RoomId, post: Post) {
        let kind = post.kind;
        if let Err(e) = self.post(room, post).await {
            tracing::warn!(%room, kind = kind.as_str(), error = %e, "could not write a server line");
        }
    }

    /// Steps 4 and 5: the durable write, then side effects.
    pub(crate) async fn post(&self, room: &RoomId, post: Post) -> Result<Sent> {
        self.post_with(room, post, Prefetched::default()).await
    }

    /// [`Sending::post`] given what the send already read.
    async fn post_with(&self, room: &RoomId, post: Post, known: Prefetched) -> Result<Sent> {
        let mut ticks = (self.clock)();
        let client = post.idempotency.as_ref().map(|(user, client_id)| (user, client_id));
        let follower = post.reader.as_ref().filter(|_| post.thread_id.is_some());
        let mut outbox_marked = false;
        for _ in 0..MAX_TICK_ATTEMPTS {
            let mut message = Message {
                id: ticks.message_key().as_str().to_owned(),
                room_id: room.to_string(),
                kind: post.kind,
                author_id: post.author_id.clone(),
                author_name: post.author_name.clone(),
                origin: post.origin,
                avatar_url: post.avatar_url.clone(),
                text: post.text.clone(),
                created_at: stored_time(ticks.to_datetime()),
                version: 0,
                client_id: post.idempotency.as_ref().map(|(_, c)| c.as_str().to_owned()),
                edited_at: None,
                deleted_at: None,
                deleted_by: None,
                moderated: false,
                is_pinned: false,
                reply_to: post.reply_to.clone(),
                thread_id: post.thread_id.clone(),
                pinned_message_id: post.pinned_message_id.clone(),
                forwarded_from: post.forwarded_from.clone(),
                mentions: post.mentions.clone(),
                poll: post.poll.clone(),
                reactions: Vec::new(),
                attachments: post.attachments.clone(),
                thread: None,
                preview: None,
            };
            // The notification event commits with the message (the outbox), so it cannot be lost.
            let event = match self.outbox.publishes_events() {
                true => MessageEvent::of(&message).map(|mut event| {
                    // Never for a webhook's or an automation's message: nothing can loop.
                    event.automation =
                        self.automation.is_some() && post.public_room && message.origin.triggers_automations();
                    event
                }),
                false => None,
            };
            if event.is_some() && !outbox_marked {
                self.store.outbox.mark_outbox(room).await?;
                outbox_marked = true;
            }
            let insert =
                self.store
                    .messages
                    .insert_message(room, &message, client, event.as_ref(), follower, known.hooked);
            let index = self.store.messages.insert_index_row(room, ticks);
            // The index row and the sender's read position are written alongside the message's
            // transaction, not before or after it, so they add no round trip to the send.
            // Moved for a send that then fails, the position only marks read what its sender
            // had seen anyway.
            let (index, inserted) = match &post.reader {
                Some(reader) => {
                    let key = ticks.message_key();
                    let known = post.reader_row.as_ref();
                    let (index, inserted, ()) =
                        tokio::join!(index, insert, self.move_read_position(room, reader, known, &key));
                    (index, inserted)
                }
                None => tokio::join!(index, insert),
            };
            match inserted {
                Ok(Inserted::Committed(version)) => {
                    message.version = version;
                    self.settle_index_row(room, ticks, index).await;
                    return self.after_the_write(room, message, follower, event).await;
                }
                // Another send took the tick: its message keeps the index row, and this one
                // takes the next tick.
                Ok(Inserted::TickTaken) => ticks = ticks.next(),
                // A concurrent retry with the same client id stored its message first: answer
                // with that one, as for any repeat.
                Ok(Inserted::ClientIdTaken) => {
                    if let Ok(row) = index {
                        self.store.messages.release_index_row(room, ticks, row).await;
                    }
                    if let Some((user, client_id)) = client
                        && let Some(first) = self.store.messages.sent_with_client_id(room, user, client_id).await?
                    {
                        return Ok(Sent::repeat(first));
                    }
                    return Err(Error::Internal(format!(
                        "the idempotency record of a send in {room} names no message"
                    )));
                }
                Err(NotInserted { may_be_stored, error }) => {
                    match (may_be_stored, index) {
                        (false, Ok(row)) => self.store.messages.release_index_row(room, ticks, row).await,
                        (false, Err(_)) => {}
                        // A message that may be stored keeps (or gets) its index row: without
                        // one it would be hidden from oldest-first reads for good.
                        (true, Ok(IndexRow::Created(_))) => {}
                        (true, _) => {
                            if let Err(e) = self.store.messages.ensure_index_row(room, ticks).await {
                                tracing::warn!(%room, error = %e, "a message that may be stored has no index row");
                            }
                        }
                    }
                    return Err(error);
                }
            }
        }
        Err(Error::Unavailable("no free message key; try again".into()))
    }

    /// A stored message's index row, once its transaction committed: nothing more when this
    /// send created it; written again when it was there already (a failed send at the same
    /// tick may be releasing it) or could not be written.
    async fn settle_index_row(
        &self,
        room: &RoomId,
        ticks: crate::keys::Ticks,
        index: std::result::Result<IndexRow, crate::store::error::Error>,
    ) {
        if let Ok(IndexRow::Created(_)) = index {
            return;
        }
        let mut last = None;
        for _ in 0..INDEX_ROW_ATTEMPTS {
            match self.store.messages.ensure_index_row(room, ticks).await {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            tracing::error!(%room, error = %e, "a stored message has no index row; oldest-first reads miss it");
        }
    }

    /// Step 5, after the durable write only.
    async fn after_the_write(
        &self,
        room: &RoomId,
        message: Message,
        follower: Option<&UserId>,
        event: Option<MessageEvent>,
    ) -> Result<Sent> {
        // Step 5, after the durable write only: side effects, none of which can fail the send.
        // A replier's "my threads" row, their read position in the thread at their reply.
        if let (Some(follower), Some(root)) = (follower, &message.thread_id)
            && let Err(e) = self
                .store
                .follows
                .index_followed(room, root, follower, message.created_at)
                .await
        {
            tracing::warn!(%room, error = %e, "could not list a followed thread for its replier");
        }
        // The notification event goes to its consumer; its outbox row is cleared once accepted.
        self.signals.signal(
            room,
            Signal::Created {
                message: message.clone(),
            },
        );
        // The full message went to those showing the room; the others get a notice, alongside
        // the event's dispatch rather than after it.
        let notices = self.signals.notify_non_viewers(room, &message);
        match event {
            Some(event) => {
                tokio::join!(notices, self.outbox.dispatch(room, event));
            }
            None => notices.await,
        }
        // A member's link gets its preview in the background (`service::previews`).
        self.previewer.preview_later(room, &message).await;
        self.nudge_outgoing(room);
        Ok(Sent { message, created: true })
    }

    /// Moves `reader`'s read position forward to `key` (`Store::move_read_position`). A side
    /// effect of the send: a failure is logged, never returned.
    async fn move_read_position(
        &self,
        room: &RoomId,
        reader: &UserId,
        known: Option<&crate::members::Member>,
        key: &crate::keys::MessageKey,
    ) {
        if let Err(e) = self.store.members.move_read_position(room, reader, known, key).await {
            tracing::warn!(%room, error = %e, "could not move a sender's read position");
        }
    }

    /// The sender's access; a banned user is told so, anyone else outside the room gets 404.
    async fn sender_access(&self, room: &RoomId, user: &UserId) -> Result<Access> {
        match self.access.access(room, user).await {
            Err(Error::NotFound(m)) => match self.access.is_banned(room, user).await? {
                true => Err(Error::Forbidden("you are banned from this room".into())),
                false => Err(Error::NotFound(m)),
            },
            other => other,
        }
    }

    /// Step 3: moves the sender's slowmode clock to `now`, re-checking the window against the
    /// row as it is (a concurrent send may have moved it), with one conditional write on the
    /// member row as step 1 read it (a lost race re-reads it). Only when slowmode applies; the
    /// row as written when it does.
    async fn advance_slowmode_clock(
        &self,
        room: &RoomId,
        access: &Access,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::members::Member>> {
        if access.room.slowmode_seconds == 0 || access.can(Permission::ManageMessages) {
            return Ok(None);
        }
        let moved = self
            .store
            .members
            .update_member_from(room, &access.member, |member| {
                checks::slowmode(&access.room, member, now)?;
                member.last_message_at = Some(now);
                Ok(())
            })
            .await?;
        Ok(Some(moved))
    }

    /// The refusal of a filtered send or edit, after the filter's timeout (if any) is applied:
    /// it extends a running timeout, never shortens it.
    pub(crate) async fn refuse_filtered(
        &self,
        room: &RoomId,
        user: &UserId,
        timeout: Option<Duration>,
        now: DateTime<Utc>,
    ) -> Error {
        if let Some(timeout) = timeout {
            let until = now + timeout;
            let extended = self
                .store
                .members
                .update_member(room, user, |member| {
                    member.timeout_until = Some(member.timeout_until.map_or(until, |t| t.max(until)));
                    Ok(())
                })
                .await;
            if let Err(e) = extended {
                return e.into();
            }
        }
        Error::Forbidden("the message contains blocked content".into())
    }
}
