//! The one door every message comes through, in three stages, a file each:
//!
//! 1. **admit** (this file): what the producer may send, decided over what was read — the
//!    checks in their fixed order (`messages::checks`) and the limits' claims — ending in the
//!    [`Post`] to write or the message an earlier attempt of the same send stored;
//! 2. **commit** (`commit.rs`): the one entity-group transaction that stores the message with
//!    its change-feed row, idempotency record, thread index row and outbox event;
//! 3. **publish** (`publish.rs`): the committed message goes to the subscribers registered in
//!    the composition root (`Chat::assemble`); this stage does not know who they are.
//!
//! What admission claimed (the repeat-text claim, attachments) is kept or given back in one
//! step, [`Claims::settle`], by how the send ended. The producer is data ([`Submission`]), so
//! a member's send, a reply, a scheduled send, each copy of a forward, an inbound webhook and
//! the server's own lines take the same path; only admission looks at who sent it.

mod commit;
pub(crate) mod publish;

use super::limits::{SendEnd, TextAhead};
use crate::access::Access;
use crate::attachments::Attachment;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId, UserId};
use crate::keys::MessageKey;
use crate::messages::checks::{self, Admission};
use crate::messages::operations::{Operation, authorize};
use crate::messages::send::{Draft, DraftAttachments, NewMessage, Post, Sent};
use crate::messages::{Message, MessageType, Origin};
use crate::permissions::Permission;
use crate::rooms::Visibility;
use crate::trust::TallyRead;
use crate::webhooks::{CheckedPayload, Webhook};
use crate::{html, markdown};
use chrono::{DateTime, Duration, Utc};
use commit::{Prefetched, Stored};
use std::sync::Arc;

/// A message on its way in, with who produces it.
#[derive(Clone)]
pub enum Submission {
    /// A member's message: a send, a reply, a scheduled send, each copy of a forward. Every
    /// check applies.
    Member {
        who: Principal,
        draft: Draft,
        client_id: Option<ClientId>,
    },
    /// An inbound webhook's message, with the access its maker's webhook has in the room. A
    /// webhook is no member: no timeout, no slowmode, and a filtered text is refused without
    /// the filter's timeout, which would have no member row to land on.
    Webhook {
        hook: Webhook,
        access: Access,
        payload: CheckedPayload,
        client_id: Option<ClientId>,
    },
    /// A line in the room's own voice (a join, a rename, a pin): unchecked, the server decided
    /// to write it.
    Line(Post),
}

impl Submission {
    /// A member's message as the API takes it: `Message` or `Poll`, its HTML sanitized.
    pub fn member(who: &Principal, input: NewMessage, names: &markdown::RoomNames) -> Result<Submission> {
        let kind = input.kind.unwrap_or(MessageType::Message);
        if !matches!(kind, MessageType::Message | MessageType::Poll) {
            return Err(Error::Forbidden(format!(
                "members send Message and Poll; {} lines are written by the server",
                kind.as_str()
            )));
        }
        let format = input.format.unwrap_or_default();
        let (text, source) = match input.text.as_deref() {
            Some(text) => {
                let (text, source) = markdown::body(text, format, names)?;
                (Some(text), source)
            }
            None => (None, None),
        };
        Ok(Submission::Member {
            who: who.clone(),
            client_id: input.client_id.as_deref().map(ClientId::parse).transpose()?,
            draft: Draft {
                kind,
                text,
                source,
                poll: input.poll,
                reply_to: input.reply_to,
                forwarded_from: None,
                attachments: match input.attachments {
                    Some(ids) => DraftAttachments::Named(ids),
                    None => DraftAttachments::None,
                },
            },
        })
    }

    /// A server line of `kind` naming `author`. `Message` and `Webhook` text is sanitized like
    /// a member's; every other type's is plain text.
    pub fn line(kind: MessageType, author: &Principal, text: &str) -> Submission {
        let text = match kind {
            MessageType::Webhook | MessageType::Message => html::sanitize(text),
            _ => text.to_owned(),
        };
        Submission::Line(Post::line(kind, author, text))
    }
}

/// Admissions a send may take when the room keeps changing under it, each after another
/// process changed the room row between its admission and its commit.
const ADMISSIONS: usize = 4;

fn room_kept_changing() -> Error {
    Error::Unavailable("the room kept changing; try again".into())
}

/// What admission decided.
enum Admitted {
    /// Write this post, given what was read on the way.
    Post(Box<Post>, Prefetched),
    /// An earlier attempt of this send (the same client id) stored this message.
    Repeat(Message),
}

/// Sending: the one door, inbound and outgoing webhooks. Holds what it uses: the store, the
/// adapters and settings, the components it calls and the publisher of committed messages.
pub struct Sending {
    pub(crate) store: crate::store::Store,
    pub(crate) ticks: Arc<crate::keys::TickSource>,
    pub(crate) time: Arc<dyn crate::adapters::clock::Clock>,
    pub(crate) outgoing: Option<Arc<crate::adapters::outgoing::HookSender>>,
    pub(crate) automation: Option<Arc<crate::adapters::events::EventGrid>>,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) access: Arc<crate::service::access::RoomAccess>,
    pub(crate) files: Arc<crate::service::attachments::Files>,
    pub(crate) limiter: Arc<crate::service::limits::Limiter>,
    pub(crate) outbox: Arc<crate::service::outbox::Outbox>,
    pub(crate) reading: Arc<crate::service::read::Reading>,
    pub(crate) signals: Arc<crate::service::live::Signals>,
    /// The subscribers of committed messages, registered in `Chat::assemble`.
    pub(crate) publisher: publish::Publisher,
}

impl Sending {
    /// A member's message from the API (`Submission::member`).
    pub async fn send_message(&self, who: &Principal, room: &RoomId, input: NewMessage) -> Result<Sent> {
        let format = input.format.unwrap_or_default();
        let names = self
            .room_names(room, &who.user_id, input.text.as_deref(), format)
            .await?;
        self.submit(room, Submission::member(who, input, &names)?).await
    }

    /// What of `room` a Markdown `text` by `author` names: the users it writes as `@id` who
    /// are members (one member read per name, at most `MAX_MENTIONS`), and the room's own emoji
    /// when it writes a `:name:` that is no standard shortcode (one range read). None for HTML,
    /// whose marks are the client's, and none unless the author is a member.
    pub(crate) async fn room_names(
        &self,
        room: &RoomId,
        author: &UserId,
        text: Option<&str>,
        format: markdown::TextFormat,
    ) -> Result<markdown::RoomNames> {
        let mut names = markdown::RoomNames::default();
        let Some(text) = text.filter(|_| format == markdown::TextFormat::Markdown) else {
            return Ok(names);
        };
        let (mentions, emoji) = (text.contains('@'), markdown::names_custom_emoji(text));
        if !(mentions || emoji) || self.store.members.member(room, author).await?.is_none() {
            return Ok(names);
        }
        if emoji {
            names.emoji = self
                .store
                .room_emoji
                .list(room)
                .await?
                .into_iter()
                .map(|emoji| emoji.name)
                .collect();
        }
        let named: Vec<UserId> = markdown::named_users(text)
            .iter()
            .filter_map(|id| UserId::parse(id).ok())
            .collect();
        for chunk in named.chunks(8) {
            let rows =
                futures::future::try_join_all(chunk.iter().map(|user| self.store.members.member(room, user))).await?;
            names
                .members
                .extend(rows.into_iter().flatten().map(|member| member.user_id.to_string()));
        }
        Ok(names)
    }

    /// The one door: admit, commit, settle the claims, publish. A member's message admitted on
    /// a kept copy of the room row that changed before it committed is admitted again.
    pub async fn submit(&self, room: &RoomId, submission: Submission) -> Result<Sent> {
        let mut submission = submission;
        // A send admitted again draws the rate buckets once, not once an admission.
        let mut rates_drawn = false;
        for _ in 0..ADMISSIONS {
            let again = match &submission {
                Submission::Member { .. } => Some(submission.clone()),
                _ => None,
            };
            let mut claims = Claims {
                rates_drawn,
                ..Claims::default()
            };
            let stored = match self.admit(room, submission, &mut claims).await {
                Ok(Admitted::Post(post, known)) => self.commit(room, *post, known).await,
                Ok(Admitted::Repeat(first)) => Ok(Stored::Repeat(first)),
                Err(refused) => Err(refused),
            };
            let kept_room = claims.kept_room;
            rates_drawn = claims.rates_drawn;
            self.settle(room, claims, &stored).await;
            let refused = match stored {
                Ok(Stored::Repeat(first)) => return Ok(Sent::repeat(first)),
                Ok(Stored::New(committed)) => {
                    self.publisher.publish(&committed).await;
                    return Ok(Sent {
                        message: committed.message,
                        created: true,
                    });
                }
                Ok(Stored::RoomChanged) => None,
                // Refused on a kept copy of the room row (read-only, the everyone permissions,
                // the word filter): the row as it is now may admit it.
                Err(refused @ Error::Forbidden(_)) if kept_room => {
                    self.access.forget_room_row(room);
                    Some(refused)
                }
                Err(refused) => return Err(refused),
            };
            match again {
                Some(again) => submission = again,
                None => return Err(refused.unwrap_or_else(room_kept_changing)),
            }
        }
        Err(room_kept_changing())
    }

    /// `submit` for a server line that is a side effect: a failure is logged, never returned.
    pub(crate) async fn announce(&self, room: &RoomId, line: Submission) {
        if let Err(e) = self.submit(room, line).await {
            tracing::warn!(%room, error = %e, "could not write a server line");
        }
    }

    /// Stage 1 for any producer. What it claims goes into `claims` as it is taken, so the
    /// send's one settlement sees it however admission ends.
    async fn admit(&self, room: &RoomId, submission: Submission, claims: &mut Claims) -> Result<Admitted> {
        match submission {
            Submission::Member { who, draft, client_id } => {
                self.admit_member(room, &who, draft, client_id, claims).await
            }
            Submission::Webhook {
                hook,
                access,
                payload,
                client_id,
            } => self.admit_webhook(&hook, access, payload, client_id, claims).await,
            Submission::Line(post) => Ok(Admitted::Post(Box::new(post), Prefetched::default())),
        }
    }

    /// A member's message, in the checks' order:
    /// 1. membership (the room row from a kept copy while the room stamp allows,
    ///    `RoomAccess::access_for_send`), the sender's tally (their trust level, counted in the
    ///    commit) and — for a member this process stored a message of lately — the
    ///    repeat-text claim, read together so the limits add no round trip;
    /// 2. member → timed out → read-only → slowmode → the limits (`service::limits`) → word
    ///    filter, then content validation, the reply target and the attachments;
    /// 3. the slowmode clock moves on the member row, conditionally on the row as step 1 read
    ///    it: a send that cannot move it fails (closed), so slowmode never silently stops
    ///    applying.
    ///
    /// A repeat of a client id is not looked up ahead: the transaction's insert of the
    /// idempotency record tells it (`Stored::Repeat`), and a repeat the checks refuse (a
    /// retry inside the slowmode window, or past a rate) looks its record up then — so a send
    /// reads nothing for the rare retry, and only a member is answered with a message of the
    /// room, even a repeat of their own.
    async fn admit_member(
        &self,
        room: &RoomId,
        who: &Principal,
        draft: Draft,
        client_id: Option<ClientId>,
        claims: &mut Claims,
    ) -> Result<Admitted> {
        let user = &who.user_id;
        claims.sender = Some((user.clone(), client_id.clone()));
        let (access, ahead, tally) = tokio::join!(
            self.sender_access(room, user),
            self.limiter.claim_text_ahead(room, user, &draft, client_id.as_ref()),
            self.limiter.read_tally(room, user)
        );
        claims.ahead = ahead;
        let access = access?;
        // Not needed for a member whose level is the top whatever they sent: a failed read
        // then fails nothing.
        let tally = match tally.transpose() {
            Err(_) if access.access.trust_exempt() => None,
            read => read?,
        };
        claims.kept_room = access.kept;
        let known = Prefetched {
            room_stamp: access.stamp,
        };
        let access = access.access;
        let admitted = self
            .admit_checked(room, who, access, draft, client_id.as_ref(), (known, tally), claims)
            .await;
        match admitted {
            Ok(admitted) => Ok(admitted),
            // A lookup that fails leaves the refusal as it was.
            Err(refused) => match client_id {
                Some(client_id) => match self.store.messages.sent_with_client_id(room, user, &client_id).await {
                    Ok(Some(first)) => Ok(Admitted::Repeat(first)),
                    _ => Err(refused),
                },
                None => Err(refused),
            },
        }
    }

    /// Steps 2 and 3 of [`Sending::admit_member`], for a member whose access was read.
    #[allow(clippy::too_many_arguments)]
    async fn admit_checked(
        &self,
        room: &RoomId,
        who: &Principal,
        access: Access,
        draft: Draft,
        client_id: Option<&ClientId>,
        (known, tally): (Prefetched, Option<TallyRead>),
        claims: &mut Claims,
    ) -> Result<Admitted> {
        let user = &who.user_id;
        let now = self.time.now();
        checks::before_limits(&access, now)?;
        checks::replies_only(&access, draft.reply_to.is_some())?;
        self.check_limits(&access, &draft, tally.as_ref(), client_id, claims)
            .await?;
        if let Admission::Filtered { timeout } = checks::word_filter(&access, &draft.filter_text()) {
            // A retry of a send stored before the filter changed is answered with its message,
            // and times nobody out.
            if let Some(client_id) = client_id
                && let Some(first) = self.store.messages.sent_with_client_id(room, user, client_id).await?
            {
                return Ok(Admitted::Repeat(first));
            }
            // On a kept copy of the room row the filter may be out of date: the refusal times
            // nobody out, and the send is admitted again on the row as it is (`submit`), whose
            // filter applies its own timeout.
            if claims.kept_room {
                return Err(Error::Forbidden("the message contains blocked content".into()));
            }
            return Err(self.refuse_filtered(room, user, timeout, now).await);
        }
        let content = draft.validate(&access)?;
        let (reply_to, thread_id) = match &draft.reply_to {
            Some(id) => {
                let target = self.reading.live_message(room, &MessageKey::of_message(id)?).await?;
                authorize(&access, &target, Operation::Reply)?;
                let root = target.thread_id.clone().unwrap_or_else(|| target.id.clone());
                (Some(target.id), Some(root))
            }
            None => (None, None),
        };
        // The attachments, last of the checks: each upload named is checked and claimed for
        // this send (a forward's files are copied into this room).
        let claim = crate::service::attachments::Files::attachment_claim(user, client_id);
        match &draft.attachments {
            DraftAttachments::None => {}
            DraftAttachments::Named(ids) => {
                let claimed = self.files.claim_attachments(user, room, ids, &claim, client_id).await?;
                claims.files = FileClaims::Taken {
                    claim,
                    files: claimed.files,
                    taken: claimed.taken,
                };
            }
            DraftAttachments::Copied { from, files } => {
                let copied = self.files.copy_attachments(user, from, room, files, &claim).await?;
                claims.files = FileClaims::Copied(copied);
            }
        }
        let mut post = Post {
            kind: draft.kind,
            author_id: user.to_string(),
            author_name: access.member.nickname.clone().unwrap_or_else(|| who.name.clone()),
            avatar_url: None,
            text: content.text,
            source: content.source,
            poll: content.poll,
            mentions: content.mentions,
            idempotency: client_id.map(|c| (user.clone(), c.clone())),
            reply_to,
            thread_id,
            pinned_message_id: None,
            forwarded_from: draft.forwarded_from,
            attachments: claims.files.attached().to_vec(),
            reader: Some(user.clone()),
            reader_row: Some(access.member.clone()),
            counted: self.limiter.counted(&access, tally),
            origin: Origin::User,
            public_room: access.room.visibility == Visibility::Public,
        };
        // The member row as the clock's write left it: the read position moves on it. A
        // concurrent retry of the same client id that moved the clock first is answered by
        // the caller with its message.
        if let Some(moved) = self.advance_slowmode_clock(room, &access, now).await? {
            post.reader_row = Some(moved);
        }
        Ok(Admitted::Post(Box::new(post), known))
    }

    /// A webhook's message, through the checks a webhook can meet: read-only, the limits (the
    /// webhook's own bucket, the room's ceiling, the repeat-text rule), the word filter and
    /// content validation.
    async fn admit_webhook(
        &self,
        hook: &Webhook,
        access: Access,
        payload: CheckedPayload,
        client_id: Option<ClientId>,
        claims: &mut Claims,
    ) -> Result<Admitted> {
        if access.room.read_only {
            return Err(Error::Forbidden("the room is read-only".into()));
        }
        let draft = Draft {
            kind: MessageType::Webhook,
            text: Some(payload.html),
            source: None,
            poll: None,
            reply_to: None,
            forwarded_from: None,
            attachments: DraftAttachments::None,
        };
        claims.sender = Some((access.member.user_id.clone(), client_id.clone()));
        self.check_limits(&access, &draft, None, client_id.as_ref(), claims)
            .await?;
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
            source: None,
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
            counted: None,
            origin: match hook.automation {
                true => Origin::Automation,
                false => Origin::Webhook,
            },
            public_room: access.room.visibility == Visibility::Public,
        };
        Ok(Admitted::Post(Box::new(post), Prefetched::default()))
    }

    /// The limits step: the trust level and the rates (the level from `tally` as read, or read
    /// there), then the repeat-text claim (or the one taken ahead), which goes into `claims`
    /// whether or not the rates refuse.
    async fn check_limits(
        &self,
        access: &Access,
        draft: &Draft,
        tally: Option<&TallyRead>,
        client_id: Option<&ClientId>,
        claims: &mut Claims,
    ) -> Result<()> {
        let ahead = std::mem::take(&mut claims.ahead);
        let (claim, verdict) = self
            .limiter
            .check_send_limits(access, draft, tally, ahead, client_id, &mut claims.rates_drawn)
            .await;
        claims.text = claim;
        verdict
    }

    /// Keeps or gives back what admission claimed, by how the send ended: the one place a
    /// send's compensation happens. Never fails the send.
    async fn settle(&self, room: &RoomId, claims: Claims, stored: &Result<Stored>) {
        let Some((user, client_id)) = &claims.sender else {
            return;
        };
        let changed = Error::Unavailable("the room changed".into());
        let end = match stored {
            Ok(Stored::New(_)) => SendEnd::Stored,
            Ok(Stored::Repeat(_)) => SendEnd::Repeat,
            Ok(Stored::RoomChanged) => SendEnd::Failed(&changed),
            Err(e) => SendEnd::Failed(e),
        };
        let text = claims.text.or_else(|| claims.ahead.held());
        self.limiter
            .settle_text(text, room, user, client_id.as_ref(), end)
            .await;
        match (claims.files, stored) {
            (FileClaims::None, _) => {}
            (FileClaims::Copied(copies), Err(_) | Ok(Stored::RoomChanged)) => {
                self.files.remove_attachments(room, &copies).await
            }
            (FileClaims::Copied(_), Ok(_)) => {}
            (FileClaims::Taken { claim, taken, .. }, Err(_) | Ok(Stored::RoomChanged)) => {
                self.files
                    .release_attachments(room, &taken, &claim, user, client_id.as_ref())
                    .await
            }
            // Files another attempt of this send claimed: that attempt may have failed and
            // released them while this one was storing its message.
            (FileClaims::Taken { claim, files, taken }, Ok(Stored::New(_))) => {
                if taken.len() < files.len() {
                    self.files.keep_claims(room, &files, &taken, &claim).await
                }
            }
            // Another attempt of this send stored its message first: what this attempt took
            // and that message does not carry (a retry naming other files) is no message's.
            (FileClaims::Taken { claim, taken, .. }, Ok(Stored::Repeat(first))) => {
                let unused: Vec<_> = taken
                    .into_iter()
                    .filter(|t| !first.attachments.iter().any(|a| a.id == t.id))
                    .collect();
                if !unused.is_empty() {
                    self.files.give_back(room, &unused, &claim).await
                }
            }
        }
        if let Ok(Stored::New(_)) = stored {
            self.limiter.remember_sender(room, user);
        }
    }

    /// The sender's access, with the room stamp its room row was read under; a banned user is
    /// told so, anyone else outside the room gets 404.
    async fn sender_access(&self, room: &RoomId, user: &UserId) -> Result<crate::service::access::SendAccess> {
        match self.access.access_for_send(room, user).await {
            Err(Error::NotFound(m)) => match self.access.is_banned(room, user).await? {
                true => Err(Error::Forbidden("you are banned from this room".into())),
                false => Err(Error::NotFound(m)),
            },
            other => other,
        }
    }

    /// Moves the sender's slowmode clock to `now`, re-checking the window against the row as
    /// it is (a concurrent send may have moved it), with one conditional write on the member
    /// row as it was read (a lost race re-reads it). Only when slowmode applies; the row as
    /// written when it does.
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
                    if !member.timed_out_at(now) {
                        member.strikes = member.strikes.add(now);
                    }
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

/// What a send claimed on its way through admission, settled once by [`Sending::settle`].
#[derive(Default)]
struct Claims {
    /// The sender (a member, or a webhook's author) and the send's client id: none for a
    /// server line, which claims nothing.
    sender: Option<(UserId, Option<ClientId>)>,
    /// The repeat-text claim taken with the membership reads, until the limits step takes it.
    ahead: TextAhead,
    /// Whether admission read the room row from a kept copy (`RoomAccess::access_for_send`).
    kept_room: bool,
    /// Whether this send drew its rates (in this admission or an earlier one of it).
    rates_drawn: bool,
    /// The repeat-text claim the limits step holds.
    text: Option<crate::store::limits::TextClaim>,
    files: FileClaims,
}

/// The attachments a send holds.
#[derive(Default)]
enum FileClaims {
    #[default]
    None,
    /// Uploads the sender named: all of them, and those this attempt claimed (the rest an
    /// earlier attempt of the same send claimed), under `claim`.
    Taken {
        claim: String,
        files: Vec<Attachment>,
        taken: Vec<Attachment>,
    },
    /// A forward's copies of its source's files, made in this room for this send.
    Copied(Vec<Attachment>),
}

impl FileClaims {
    /// The attachments the message carries.
    fn attached(&self) -> &[Attachment] {
        match self {
            FileClaims::None => &[],
            FileClaims::Taken { files, .. } => files,
            FileClaims::Copied(copies) => copies,
        }
    }
}
