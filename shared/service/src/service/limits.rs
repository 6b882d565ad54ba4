//! The limits step of every member write (after slowmode, before the word filter:
//! `messages::checks`): the user's token bucket over every write, the member's trust level in
//! the room (`crate::trust`: what their text may carry and their rate there), the room's
//! ceiling on sends and the repeat-text rule. The server's own lines never come here. The
//! rules are `crate::limits` and `crate::trust`; the state is `crate::store::limits` and the
//! members' tallies (`crate::store::tally`).
//!
//! # Across processes
//!
//! Serverless runs many instances on one store, so a bucket's state is a row in `Limits`,
//! never a process's memory. Asking the row for every write would double a write's storage
//! round-trips, so a process *leases* a few tokens at once (a conditional write on the row:
//! two processes never get the same tokens) and spends them locally; a lease it has not spent
//! within [`LEASE_LIFETIME`] is dropped, not returned. A token is therefore spent at most
//! [`LEASE_LIFETIME`] after the row granted it, and the row grants at most `burst + rate × t`
//! in any `t`: one user's writes over any `t`, summed over every process, stay within
//! `burst + rate × (t + LEASE_LIFETIME)` — one second's refill above the single-process limit,
//! however many processes there are (and within the limit itself while their clocks agree and
//! the leases are spent at once). The price is fairness, not safety: tokens one process leased
//! and did not spend are lost to the others, so a user spread over many processes may be
//! refused slightly early.
//!
//! An empty bucket is remembered locally until a token will be there, so a flood of refused
//! writes costs no storage at all. A bucket row the store cannot read or write refuses the
//! write (`Unavailable`, 503): the limits fail closed, as the slowmode clock does, rather than
//! let unlimited writes through silently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration};

use crate::access::Access;
use crate::adapters::clock::Clock;
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId, UserId};
use crate::limits::{BucketId, Rate, USER_RATE, Write, repeat_fingerprint, too_many};
use crate::messages::send::Draft;
use crate::permissions::Permission;
use crate::store::limits::{Leased, TextClaim};
use crate::trust::{Counted, TallyRead, Thresholds, TrustLevel};

/// How long a leased token may wait to be spent; also the most the combined rate of all
/// processes can exceed the limit by, in refill (see the module comment).
pub const LEASE_LIFETIME: Duration = Duration::seconds(1);
/// Buckets remembered in a process before expired ones are forgotten.
const MAX_LOCAL_BUCKETS: usize = 100_000;

/// How the limits are set up: the server's trust thresholds (a room may override them), and
/// the clock.
#[derive(Debug, Clone)]
pub struct LimitSettings {
    pub thresholds: Thresholds,
    pub clock: Arc<dyn Clock>,
}

/// How long a member this process stored a message of counts as a known sender of the room.
const KNOWN_SENDER_FOR: Duration = Duration::minutes(10);

/// The limits of one process: its settings, the leases and empty buckets it knows, and who
/// it stored messages of lately.
#[derive(Debug)]
pub(crate) struct WriteLimits {
    settings: LimitSettings,
    local: Mutex<HashMap<BucketId, Local>>,
    /// Room and member of each message this process stored lately, and when: their next send
    /// claims its text in its first round (`Limiter::claim_text_ahead`).
    senders: Mutex<HashMap<(RoomId, UserId), DateTime<chrono::Utc>>>,
}

impl WriteLimits {
    pub(crate) fn new(settings: LimitSettings) -> WriteLimits {
        WriteLimits {
            settings,
            local: Mutex::default(),
            senders: Mutex::default(),
        }
    }
}

/// A send's repeat-text claim as its first round left it (`Limiter::claim_text_ahead`).
#[derive(Debug, Default)]
pub(crate) enum TextAhead {
    /// Not taken: the limits step claims the text after the other checks.
    #[default]
    Later,
    /// Taken together with the membership reads: the store's answer, `None` for a text the
    /// rule ignores.
    Taken(Result<Option<Result<TextClaim, Duration>>>),
}

impl TextAhead {
    /// The claim it holds, if any: a send that ends before the limits step takes it back.
    pub(crate) fn held(self) -> Option<TextClaim> {
        match self {
            TextAhead::Taken(Ok(Some(Ok(claim)))) => Some(claim),
            _ => None,
        }
    }
}

/// How the send a repeat-text claim was taken for ended, which decides whether the claim is
/// kept ([`Limiter::settle_text`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum SendEnd<'a> {
    /// It stored its message.
    Stored,
    /// It was answered with the message an earlier attempt of it (the same client id) stored.
    Repeat,
    /// It was refused or failed.
    Failed(&'a Error),
}

/// What this process knows of a bucket.
#[derive(Debug, Clone, Copy)]
enum Local {
    /// Tokens leased at `granted_at`, not spent yet.
    Lease {
        tokens: u32,
        granted_at: DateTime<chrono::Utc>,
    },
    /// The row was empty; nothing is there before `until`.
    Empty { until: DateTime<chrono::Utc> },
}

impl Local {
    fn is_current(&self, now: DateTime<chrono::Utc>) -> bool {
        match *self {
            Local::Lease { tokens, granted_at } => tokens > 0 && now >= granted_at && now - granted_at < LEASE_LIFETIME,
            Local::Empty { until } => now < until,
        }
    }
}

/// Tokens leased at once: a quarter of the burst, at most 10 (half a second of a user's rate),
/// so a lease stranded in another process costs little and most writes still need no round
/// trip; of a member's own bucket in a room (at most one write a second), at most 5.
fn lease_size(bucket: &BucketId, rate: Rate) -> u32 {
    match bucket {
        BucketId::User(_) | BucketId::Room(_) => (rate.burst / 4).clamp(1, 10),
        BucketId::Member(..) => (rate.burst / 4).clamp(1, 5),
    }
}

impl WriteLimits {
    /// The thresholds in force in `access`'s room: its own, else the server's.
    fn thresholds(&self, access: &Access) -> Thresholds {
        access.room.trust_thresholds.unwrap_or(self.settings.thresholds)
    }

    /// Whether this process stored a message of `user` in `room` lately.
    fn knows_sender(&self, room: &RoomId, user: &UserId) -> bool {
        let now = self.settings.clock.now();
        let senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        senders
            .get(&(room.clone(), user.clone()))
            .is_some_and(|at| now - *at < KNOWN_SENDER_FOR)
    }

    fn remember_sender(&self, room: &RoomId, user: &UserId) {
        let now = self.settings.clock.now();
        let mut senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        if senders.len() >= MAX_LOCAL_BUCKETS {
            senders.retain(|_, at| now - *at < KNOWN_SENDER_FOR);
        }
        senders.insert((room.clone(), user.clone()), now);
    }
}

/// The limits against abuse: every member write draws from its buckets here. Holds what it uses:
/// the store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Limiter {
    pub(crate) store: crate::store::Store,
    pub(crate) limits: Option<std::sync::Arc<crate::service::limits::WriteLimits>>,
}

impl Limiter {
    /// The limits step of a member's write that is not a send (an edit, a reaction, a vote, a
    /// report, a pin): the user's bucket, and below the top trust level the member's rate in
    /// the room and (for an edit's text) what their level lets it carry. Call it after the
    /// write's own checks that refuse without cost (membership, a timeout), before the word
    /// filter.
    pub async fn check_write_limits(&self, access: &Access, write: Write<'_>) -> Result<()> {
        let Some(limits) = &self.limits else {
            return Ok(());
        };
        self.check_member_write(limits, access, write).await
    }

    /// `access`'s trust level under the thresholds in force, from `tally` as read, or read here
    /// unless the level cannot depend on it (a level set, or one exempt).
    async fn level_in(&self, limits: &WriteLimits, access: &Access, tally: Option<&TallyRead>) -> Result<TrustLevel> {
        let now = limits.settings.clock.now();
        let thresholds = limits.thresholds(access);
        let read = match (tally, access.level_reads_tally()) {
            (Some(read), _) => read.clone(),
            (None, false) => TallyRead::default(),
            (None, true) => {
                let room = RoomId::parse(&access.room.id)?;
                self.store.tally.read(&room, &access.member.user_id).await?
            }
        };
        Ok(access.trust_level(&read.tally, &thresholds, now))
    }

    /// 403 unless `access`'s trust level lets them attach files (an upload declared that no
    /// message of theirs could carry would only take space).
    pub(crate) async fn check_may_upload(&self, access: &Access) -> Result<()> {
        let Some(limits) = &self.limits else {
            return Ok(());
        };
        let level = self.level_in(limits, access, None).await?;
        crate::trust::check_content(level, "", true)
    }

    /// Whether the limits (and so trust levels) are on.
    pub(crate) fn enforced(&self) -> bool {
        self.limits.is_some()
    }

    /// The trust level of each member of `accesses` (one room's), their tallies read in one
    /// range read.
    pub(crate) async fn trust_levels(&self, room: &RoomId, accesses: &[Access]) -> Result<Vec<TrustLevel>> {
        let Some(limits) = &self.limits else {
            return Ok(Vec::new());
        };
        let now = limits.settings.clock.now();
        let tallies = self.store.tally.list(room, crate::members::MAX_LISTED_MEMBERS).await?;
        Ok(accesses
            .iter()
            .map(|access| {
                let tally = tallies.get(access.member.user_id.as_str()).copied().unwrap_or_default();
                access.trust_level(&tally, &limits.thresholds(access), now)
            })
            .collect())
    }

    /// The tally a send counts: the member's as read ahead, while the limits are on and their
    /// sends count (`Access::trust_exempt`).
    pub(crate) fn counted(&self, access: &Access, tally: Option<TallyRead>) -> Option<Counted> {
        let read = tally.filter(|_| self.limits.is_some() && !access.trust_exempt())?;
        Some(Counted {
            user: access.member.user_id.clone(),
            read,
        })
    }

    /// A send's tally, read together with its membership (`Sending::admit_member`) so the
    /// level adds no round trip; none while the limits are off. A read that failed refuses the
    /// send of a member whose level depends on it, as the limits fail closed.
    pub(crate) async fn read_tally(&self, room: &RoomId, user: &UserId) -> Option<Result<TallyRead>> {
        self.limits.as_ref()?;
        Some(self.store.tally.read(room, user).await.map_err(Error::from))
    }

    /// The user's bucket, then what the member's trust level (from their tally, read here when
    /// it matters) lets a write carry (an edit's text) and, below the top level, their own rate
    /// in the room. The user's bucket goes first, so a flood its empty bucket refuses costs no
    /// storage.
    async fn check_member_write(&self, limits: &WriteLimits, access: &Access, write: Write<'_>) -> Result<()> {
        self.draw_user(limits, access).await?;
        let level = self.level_in(limits, access, None).await?;
        if let Some(text) = write.text() {
            crate::trust::check_content(level, text, false)?;
        }
        self.draw_member(limits, access, level).await
    }

    async fn draw_user(&self, limits: &WriteLimits, access: &Access) -> Result<()> {
        let now = limits.settings.clock.now();
        let user = access.member.user_id.clone();
        self.draw(limits, BucketId::User(user), USER_RATE, now, "too many writes")
            .await
    }

    /// The member's own bucket in the room, at `level`'s rate (none at the top).
    async fn draw_member(&self, limits: &WriteLimits, access: &Access, level: TrustLevel) -> Result<()> {
        let Some(rate) = level.rate() else {
            return Ok(());
        };
        let now = limits.settings.clock.now();
        let room = RoomId::parse(&access.room.id)?;
        let what = format!(
            "at trust level {} you write at most {} times a minute in this room",
            level.get(),
            (rate.per_second * 60.0).round()
        );
        let bucket = BucketId::Member(room, access.member.user_id.clone());
        self.draw(limits, bucket, rate, now, &what).await
    }

    /// The user's bucket alone, for a write that makes a line in the member's name without
    /// being a message of theirs (a join, a leave): without it, leaving and joining again
    /// would fill a room with lines at no cost.
    pub(crate) async fn check_user_limit(&self, user: &crate::ids::UserId) -> Result<()> {
        let Some(limits) = &self.limits else {
            return Ok(());
        };
        let now = limits.settings.clock.now();
        self.draw(limits, BucketId::User(user.clone()), USER_RATE, now, "too many writes")
            .await
    }

    /// The limits step of a send: its rates and what its trust level lets it carry
    /// ([`Limiter::check_send_rates`], from `tally` as admission read it), then the repeat-text
    /// rule — its claim taken here, or `ahead` in the send's first round. Answers the claim the send now holds, refused or not (the
    /// send's settlement keeps it or gives it back), and the verdict.
    pub(crate) async fn check_send_limits(
        &self,
        access: &Access,
        draft: &Draft,
        tally: Option<&TallyRead>,
        ahead: TextAhead,
        client: Option<&ClientId>,
        rates_drawn: &mut bool,
    ) -> (Option<TextClaim>, Result<()>) {
        let Some(limits) = &self.limits else {
            return (ahead.held(), Ok(()));
        };
        let text = draft.filter_text();
        let room = match crate::ids::RoomId::parse(&access.room.id) {
            Ok(room) => room,
            Err(e) => return (ahead.held(), Err(e)),
        };
        let user = &access.member.user_id;
        if let Err(refused) = self
            .check_send_rates(limits, access, draft, tally, &room, rates_drawn)
            .await
        {
            return (ahead.held(), Err(refused));
        }
        let claimed = match ahead {
            TextAhead::Taken(claimed) => claimed,
            TextAhead::Later => self.claim_text(limits, &room, user, &text, client).await,
        };
        match claimed {
            Err(e) => (None, Err(e)),
            Ok(None) => (None, Ok(())),
            Ok(Some(Ok(claim))) => (Some(claim), Ok(())),
            Ok(Some(Err(wait))) => (
                None,
                Err(too_many("you sent this text here less than ten minutes ago", wait)),
            ),
        }
    }

    /// A send's rates (the user's, the member's in the room at their trust level, the room's
    /// ceiling) and what its level lets it carry, checked before the member's bucket so refused
    /// content costs none of it. A send admitted again (`Sending::submit`) drew its rates in an
    /// earlier admission; what it carries is checked on each, against the room row it is
    /// admitted on.
    async fn check_send_rates(
        &self,
        limits: &WriteLimits,
        access: &Access,
        draft: &Draft,
        tally: Option<&TallyRead>,
        room: &RoomId,
        rates_drawn: &mut bool,
    ) -> Result<()> {
        if !*rates_drawn {
            self.draw_user(limits, access).await?;
        }
        let level = self.level_in(limits, access, tally).await?;
        crate::trust::check_content(level, &draft.filter_text(), draft.attachments.carries_files())?;
        if !*rates_drawn {
            self.draw_member(limits, access, level).await?;
            let ceiling = access.room.max_sends_per_second;
            if ceiling > 0 && !access.can(Permission::ManageMessages) {
                let now = limits.settings.clock.now();
                let what = format!("this room takes at most {ceiling} messages a second");
                self.draw(limits, BucketId::Room(room.clone()), Rate::room(ceiling), now, &what)
                    .await?;
            }
            *rates_drawn = true;
        }
        Ok(())
    }

    /// The repeat-text rule's claim of `text` by `user` in `room` for the send with `client`
    /// as its client id (a retry of it is no repeat): `None` for a text the rule ignores, else
    /// the claim or how long until the text may be sent again.
    async fn claim_text(
        &self,
        limits: &WriteLimits,
        room: &RoomId,
        user: &UserId,
        text: &str,
        client: Option<&ClientId>,
    ) -> Result<Option<Result<TextClaim, Duration>>> {
        let Some(fingerprint) = repeat_fingerprint(text) else {
            return Ok(None);
        };
        let now = limits.settings.clock.now();
        Ok(Some(
            self.store
                .limits
                .claim_text(room, user, &fingerprint, now, client)
                .await?,
        ))
    }

    /// The repeat-text claim of a send, taken in its first round together with its membership
    /// reads instead of after its checks, so the limits add no round trip before the commit —
    /// but only for a member this process stored a message of in the room lately: a stranger's
    /// sends (refused anyway) must cost no writes. A claim of a send the checks then refuse is
    /// taken back, as for any send that fails after its claim.
    pub(crate) async fn claim_text_ahead(
        &self,
        room: &RoomId,
        user: &UserId,
        draft: &Draft,
        client: Option<&ClientId>,
    ) -> TextAhead {
        match &self.limits {
            Some(limits) if limits.knows_sender(room, user) => {
                TextAhead::Taken(self.claim_text(limits, room, user, &draft.filter_text(), client).await)
            }
            _ => TextAhead::Later,
        }
    }

    /// Notes that this process stored a message of `user` in `room` (see
    /// [`Limiter::claim_text_ahead`]).
    pub(crate) fn remember_sender(&self, room: &RoomId, user: &UserId) {
        if let Some(limits) = &self.limits {
            limits.remember_sender(room, user);
        }
    }

    /// Keeps or takes back a send's repeat-text claim by how the send ended, so that the claim
    /// is never left behind by a send that did not happen and never missing for a message that
    /// did. A stored message keeps it. A repeat answer gives back what it took — unless it took
    /// over the record of its earlier attempt (`TextClaim::taken_over`), which is the stored
    /// message's own. A refused or failed send gives it back — unless the store could not say
    /// whether its message was stored (a retry of its client id takes the claim over, so the
    /// retry is no repeat), or it took the record over from an earlier attempt that stored its
    /// message (looked up by the client id; kept when that cannot be told).
    pub(crate) async fn settle_text(
        &self,
        claim: Option<TextClaim>,
        room: &RoomId,
        user: &UserId,
        client: Option<&ClientId>,
        end: SendEnd<'_>,
    ) {
        let Some(claim) = claim else {
            return;
        };
        let keep = match end {
            SendEnd::Stored => true,
            SendEnd::Repeat => claim.taken_over,
            SendEnd::Failed(e) if e.is_unconfirmed() => true,
            SendEnd::Failed(_) => match (claim.taken_over, client) {
                (true, Some(client)) => !matches!(
                    self.store.messages.sent_with_client_id(room, user, client).await,
                    Ok(None)
                ),
                _ => false,
            },
        };
        if !keep {
            self.store.limits.release_text(claim).await;
        }
    }

    /// Spends one token of `bucket`: from this process's lease while it lasts, else from a new
    /// lease on the bucket's row.
    async fn draw(
        &self,
        limits: &WriteLimits,
        bucket: BucketId,
        rate: Rate,
        now: DateTime<chrono::Utc>,
        what: &str,
    ) -> Result<()> {
        {
            let mut local = limits.local.lock().unwrap_or_else(|e| e.into_inner());
            match local.get_mut(&bucket) {
                Some(known) if known.is_current(now) => match known {
                    Local::Lease { tokens, .. } => {
                        *tokens -= 1;
                        return Ok(());
                    }
                    Local::Empty { until } => return Err(too_many(what, *until - now)),
                },
                _ => {}
            }
        }
        let leased = self
            .store
            .limits
            .lease_tokens(&bucket, rate, lease_size(&bucket, rate), now)
            .await?;
        let mut local = limits.local.lock().unwrap_or_else(|e| e.into_inner());
        if local.len() >= MAX_LOCAL_BUCKETS {
            local.retain(|_, known| known.is_current(now));
        }
        match leased {
            Leased::Granted(granted) => {
                let spare = granted - 1;
                match local.get_mut(&bucket) {
                    // A concurrent write of this process leased too: keep both, under the
                    // older grant's lifetime.
                    Some(Local::Lease { tokens, granted_at })
                        if *granted_at <= now && now - *granted_at < LEASE_LIFETIME =>
                    {
                        *tokens += spare
                    }
                    _ => {
                        local.insert(
                            bucket,
                            Local::Lease {
                                tokens: spare,
                                granted_at: now,
                            },
                        );
                    }
                }
                Ok(())
            }
            Leased::Empty(wait) => {
                local.insert(bucket, Local::Empty { until: now + wait });
                Err(too_many(what, wait))
            }
        }
    }
}
