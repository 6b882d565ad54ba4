//! Erasure: a user erases themselves (`erase_me`, answered at once with the job), and the job
//! runs in the background in batches, recording a checkpoint after each, so that a process
//! that dies mid-way leaves a job the next one finishes (`resume_erasures`, run at startup and
//! by every housekeeping run). What is erased and what is left is `crate::erasure`.
//!
//! **Finding the user's messages.** Every room they have ever been a member of is in their
//! history (`store::erasure`: one row per (user, room), written at the first join, kept when
//! they leave); inside a room, their messages lie among those sent since that first join, one
//! key range. The send path writes nothing more than before. A membership older than the
//! history index has no row: the job adds the rooms of the user's current memberships (their
//! whole range), but a room left before the index existed is not found.
//!
//! **The job.** One row per user (`Housekeeping`, partition `erasures`): status, counts, the
//! checkpoint (room, step, last key done) and a lease. The history is the work list: the job
//! takes its first room, goes through the room's steps, forgets the room, and takes the next,
//! until it is empty; then it deletes the push subscriptions and is done. Per room:
//! 1. membership: a room the user owns goes to the highest-ranked remaining member (rank as
//!    moderation compares it; ties: the longest-standing, then the smallest id), or is deleted
//!    when no one else is in it; then the membership goes (no line is written: a "left" line
//!    would be a new message in their name). A pause as long as a room deletion's follows, so a
//!    send that passed its membership check just before lands before the scan;
//! 2. messages: each of theirs still live is tombstoned through the delete path
//!    (`Editing::tombstone`: the next version, so the change feed and the live signal learn it;
//!    its reactions and votes go with it), without their display name (`Message::erase`);
//! 3. marks: their reactions and votes on other people's messages are deleted; then the
//!    reports they filed are withdrawn, their rows of the limits and their scheduled messages
//!    deleted (first the files those still waiting hold, which no message will carry).
//!
//! Last, their push subscriptions, the invitations waiting for them and their write bucket.
//!
//! Every write is conditional on what the job holds: a message no longer live is not written
//! again (no second tombstone, no second version), and a checkpoint is written over the job
//! row's version as read, so a process whose lease lapsed and was taken over stops at its next
//! checkpoint. A resumed job starts its room again at the recorded step, after the recorded
//! key. `messagesErased` counts a tombstone of the user's made since the job began once, even
//! when a crash came between the tombstone and its checkpoint; the other counts may miss the
//! items of the one batch a crash interrupts.
//!
//! **The user's requests while it runs.** Joining a room, creating one and registering a push
//! subscription are refused (409): they would add to what is being erased. Everything else
//! answers as the rooms now are: a room already done answers 404 (no longer a member), and
//! whatever the user writes in a room not yet done is erased when the job reaches it. Once
//! done, the user starts afresh; a new `POST` erases again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::auth::Principal;
use crate::erasure::{
    Candidate, Checkpoint, Erasure, ErasureJob, ErasureSettings, ErasureStatus, RoomStep, authored_range, successor,
};
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::MemberRole;
use crate::messages::Message;
use crate::store::erasure::{Held, PastRoom};
use crate::store::rooms::Handover;
use crate::store::{Attempt, retry_lost_races};

/// Pause between removing a membership and scanning the room, as room deletion pauses between
/// its sweeps: longer than a send takes from its checks to its write.
const SETTLE: Duration = Duration::from_millis(200);
/// Members read to choose who inherits a room.
const MAX_CANDIDATES: usize = 10_000;

/// Why a run stopped before the job was done.
#[derive(Debug)]
pub(super) enum Stop {
    /// Another process holds the job now.
    Lost,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Failed(e)
    }
}

impl From<crate::store::error::Error> for Stop {
    fn from(e: crate::store::error::Error) -> Stop {
        Stop::Failed(e.into())
    }
}

/// A job as the process running it holds it.
pub(super) struct Run {
    pub user: UserId,
    pub job: ErasureJob,
    held: Held,
}

fn lease_until(settings: &ErasureSettings, now: DateTime<Utc>) -> DateTime<Utc> {
    now + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(60))
}

/// How a user's leaving a room for good ended.
enum Leaving {
    /// Their membership is gone (or was already).
    Left,
    /// No one was left to inherit the room: it was deleted.
    Deleted,
}

/// Erasing a user: the job that removes what they wrote and leaves their rooms. Holds what it uses:
/// the store, the adapters and settings, and the components it calls.
#[derive(Clone)]
pub struct Eraser {
    pub(crate) store: crate::store::Store,
    pub(crate) erasure: crate::erasure::ErasureSettings,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) editing: std::sync::Arc<crate::service::changes::Editing>,
    pub(crate) rooms: std::sync::Arc<crate::service::rooms::Rooms>,
    pub(crate) scheduler: std::sync::Arc<crate::service::scheduled::Scheduler>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Eraser {
    /// Starts erasing the caller, or answers the erasure already running (a repeat is a
    /// no-op). The work goes on in the background.
    pub async fn erase_me(&self, who: &Principal) -> Result<Erasure> {
        let (erasure, run) = self.begin_erasure(who).await?;
        if let Some(run) = run {
            let chat = self.clone();
            self.tasks.spawn_until_stopped(async move { chat.drive(run).await });
        }
        Ok(erasure)
    }

    /// `erase_me` without the background work: the job as the caller sees it, and the job to
    /// run when this call started it.
    pub(super) async fn begin_erasure(&self, who: &Principal) -> Result<(Erasure, Option<Run>)> {
        let user = &who.user_id;
        let attempt = move || async move {
            let current = self.store.erasure.erasure(user).await?;
            let replacing = match &current {
                Some((job, _)) if job.is_running() => {
                    return Ok(Attempt::Done((self.erasure_view(user, job).await?, None)));
                }
                Some((_, held)) => Some(held),
                None => None,
            };
            let now = crate::store::stored_time(self.store.now());
            let job = ErasureJob::start(uuid::Uuid::new_v4().to_string(), now, lease_until(&self.erasure, now));
            // Another start that got there first is answered on the next read.
            let Some(held) = self.store.erasure.start_erasure(user, &job, replacing).await? else {
                return Ok(Attempt::LostRace);
            };
            {
                let erasure = job.view(self.store.erasure.past_room_count(user).await?);
                let run = Run {
                    user: user.clone(),
                    job,
                    held,
                };
                Ok(Attempt::Done((erasure, Some(run))))
            }
        };
        retry_lost_races::<_, Error, _, _>(attempt)
            .await?
            .ok_or_else(|| Error::Conflict("erasure was being started meanwhile; try again".into()))
    }

    /// The caller's erasure: running with its progress, or done; 404 if they never asked.
    pub async fn my_erasure(&self, who: &Principal) -> Result<Erasure> {
        match self.store.erasure.erasure(&who.user_id).await? {
            Some((job, _)) => self.erasure_view(&who.user_id, &job).await,
            None => Err(Error::not_found("no erasure was asked for")),
        }
    }

    async fn erasure_view(&self, user: &UserId, job: &ErasureJob) -> Result<Erasure> {
        let left = match job.is_running() {
            true => self.store.erasure.past_room_count(user).await?,
            false => 0,
        };
        Ok(job.view(left))
    }

    /// Takes over every running erasure whose lease lapsed (its process died or gave up) and
    /// runs each in the background. Answers how many were taken over.
    pub async fn resume_erasures(&self, now: DateTime<Utc>) -> Result<usize> {
        let runs = self.take_over_erasures(now).await?;
        let taken = runs.len();
        for run in runs {
            let chat = self.clone();
            self.tasks.spawn_until_stopped(async move { chat.drive(run).await });
        }
        Ok(taken)
    }

    /// `resume_erasures` without the background work: the jobs this call took over.
    pub(super) async fn take_over_erasures(&self, now: DateTime<Utc>) -> Result<Vec<Run>> {
        let mut taken = Vec::new();
        for (user, mut job, held) in self.store.erasure.running_erasures().await? {
            if job.lease_until > now {
                continue;
            }
            job.lease_until = lease_until(&self.erasure, now);
            job.updated_at = crate::store::stored_time(now);
            // Another process may take it at the same moment: one write wins.
            if let Some(held) = self.store.erasure.save_erasure(&user, &job, &held).await? {
                tracing::info!(%user, job = %job.id, "resuming an erasure");
                taken.push(Run { user, job, held });
            }
        }
        Ok(taken)
    }

    /// Runs a held job until it is done, lost to another process, or stopped by a failure
    /// (logged; its lease lapses and a later housekeeping run resumes it).
    async fn drive(&self, mut run: Run) {
        match self.erase_everything(&mut run).await {
            Ok(()) => tracing::info!(user = %run.user, job = %run.job.id, counts = ?run.job.counts, "erasure done"),
            Err(Stop::Lost) => {
                tracing::info!(user = %run.user, job = %run.job.id, "another process took the erasure over")
            }
            Err(Stop::Failed(e)) => {
                tracing::warn!(user = %run.user, job = %run.job.id, error = %e, "erasure stopped; it is resumed once its lease lapses")
            }
        }
    }

    /// Adds the rooms `user` is a member of now to their history (`Store::record_current_rooms`);
    /// answers how many were added.
    async fn record_current_rooms(&self, user: &UserId) -> Result<usize> {
        let current = self
            .store
            .members
            .user_rooms(user, crate::store::erasure::ALL_ROOMS)
            .await?;
        Ok(self.store.erasure.record_current_rooms(user, &current).await?)
    }

    /// The whole job, from where it stands to done.
    pub(super) async fn erase_everything(&self, run: &mut Run) -> Result<(), Stop> {
        self.record_current_rooms(&run.user).await?;
        loop {
            let Some(past) = self.store.erasure.next_past_room(&run.user).await? else {
                // A membership that appeared meanwhile (a join that passed its check just
                // before the job began) is taken too.
                if self.record_current_rooms(&run.user).await? > 0 {
                    continue;
                }
                break;
            };
            self.erase_in_room(run, &past).await?;
            self.store.erasure.forget_past_room(&run.user, &past.room).await?;
        }
        run.job.counts.subscriptions_removed += self.store.erasure.delete_subscriptions(&run.user).await?;
        self.drop_invitations_for(&run.user).await?;
        self.store.follows.unfollow_all(&run.user).await?;
        // Which room their live connections showed.
        self.store.live.forget_views(&run.user).await?;
        self.store.limits.delete_user_bucket(&run.user).await?;
        self.store.presence.delete_presence(&run.user).await?;
        let now = crate::store::stored_time(self.store.now());
        run.job.status = ErasureStatus::Done;
        run.job.finished_at = Some(now);
        run.job.checkpoint = None;
        self.checkpoint(run).await
    }

    /// Removes every invitation waiting for `user`, and its pointer in their list.
    async fn drop_invitations_for(&self, user: &UserId) -> Result<()> {
        let id = crate::rooms::invitations::user_invitation_id(user);
        // A read lists a page of them; each removed, the next read lists the rest.
        loop {
            let rooms = self.store.invitations.pending_invitations(user).await?;
            if rooms.is_empty() {
                return Ok(());
            }
            for room in rooms {
                match self.store.invitations.invitation(&room, &id).await? {
                    Some(invitation) => self.store.invitations.remove_invitation(&invitation, None).await?,
                    None => self.store.invitations.drop_pending_invitation(user, &room).await?,
                }
            }
        }
    }

    /// Takes one room through its steps, from its checkpoint if the job has one for it.
    async fn erase_in_room(&self, run: &mut Run, past: &PastRoom) -> Result<(), Stop> {
        let mut at = match &run.job.checkpoint {
            Some(checkpoint) if checkpoint.room_id == past.room.as_str() => checkpoint.clone(),
            _ => Checkpoint {
                room_id: past.room.to_string(),
                step: RoomStep::Membership,
                after: None,
            },
        };
        let room = &past.room;
        loop {
            match at.step {
                RoomStep::Membership => {
                    let kept = self.leave_for_good(run, room).await?;
                    at.step = match kept {
                        true => RoomStep::Messages,
                        false => RoomStep::Finished,
                    };
                    if at.step == RoomStep::Finished {
                        run.job.counts.rooms_done += 1;
                    }
                    self.record(run, &at).await?;
                    if kept {
                        tokio::time::sleep(SETTLE).await;
                    }
                }
                RoomStep::Messages => {
                    let range = authored_range(past.first_joined);
                    let (messages, last, more) = self
                        .store
                        .erasure
                        .message_batch(room, (&range.0, &range.1), at.after.as_deref(), self.erasure.batch)
                        .await?;
                    for message in messages.iter().filter(|m| m.author_id == run.user.as_str()) {
                        if self.erase_message(room, message, run.job.started_at).await? {
                            run.job.counts.messages_erased += 1;
                        }
                    }
                    at = next(at, last, more, RoomStep::Marks);
                    self.record(run, &at).await?;
                }
                RoomStep::Marks => {
                    let (marks, last, more) = self
                        .store
                        .erasure
                        .mark_batch(room, &run.user, at.after.as_deref(), self.erasure.batch)
                        .await?;
                    for mark in &marks {
                        self.store.erasure.delete_mark(room, mark).await?;
                        match mark.is_vote {
                            true => run.job.counts.votes_removed += 1,
                            false => run.job.counts.reactions_removed += 1,
                        }
                    }
                    at = next(at, last, more, RoomStep::Finished);
                    if at.step == RoomStep::Finished {
                        // Each is idempotent: a crash before the checkpoint does them again.
                        self.store.reports.withdraw_reports_by(room, &run.user).await?;
                        self.store.limits.delete_user_limits(room, &run.user).await?;
                        self.store.tally.forget(room, &run.user).await?;
                        self.scheduler.erase_scheduled_of(room, &run.user).await?;
                        run.job.counts.rooms_done += 1;
                    }
                    self.record(run, &at).await?;
                }
                RoomStep::Finished => return Ok(()),
            }
        }
    }

    /// Step 1: hands over or deletes a room the user owns, and removes their membership.
    /// Answers whether the room is still there to scan.
    async fn leave_for_good(&self, run: &mut Run, room: &RoomId) -> Result<bool, Stop> {
        let user = &run.user;
        let Some(row) = self.store.rooms.room_row(room).await? else {
            return Ok(false);
        };
        if row.being_deleted {
            // A delete that stopped halfway: finished if it is the user's, else left to its owner.
            if row.owner_id.as_deref() == Some(user.as_str()) {
                self.rooms.delete_room(&as_principal(user), room).await?;
            }
            return Ok(false);
        }
        // Until the user is no member: an owner hands the room over first, then the member row
        // is read again (the heir may hand it back meanwhile), and a hand-over whose heir left
        // or whose room changed chooses again.
        let handed_over = AtomicBool::new(false);
        let handed_over_ref = &handed_over;
        let attempt = move || async move {
            let Some(member) = self.store.members.member(room, user).await? else {
                return Ok(Attempt::Done(Leaving::Left));
            };
            if member.role != MemberRole::Owner {
                self.store.members.remove_member(room, user).await?;
                self.signals.revoke_live(room, user).await;
                return Ok(Attempt::Done(Leaving::Left));
            }
            let Some(heir) = self.heir(room, user).await? else {
                self.rooms.delete_room(&as_principal(user), room).await?;
                return Ok(Attempt::Done(Leaving::Deleted));
            };
            if let Handover::Done { .. } = self.store.rooms.transfer_ownership(room, user, &heir, None).await? {
                handed_over_ref.store(true, Ordering::Relaxed);
            }
            Ok(Attempt::LostRace)
        };
        let leaving = retry_lost_races::<_, Error, _, _>(attempt).await?.ok_or_else(|| {
            Stop::Failed(Error::Conflict(format!(
                "room {room} kept changing while it was handed over"
            )))
        })?;
        if handed_over.load(Ordering::Relaxed) {
            run.job.counts.rooms_handed_over += 1;
        }
        match leaving {
            Leaving::Left => Ok(true),
            Leaving::Deleted => {
                run.job.counts.rooms_deleted += 1;
                Ok(false)
            }
        }
    }

    /// Who inherits `room` from `user`: the highest-ranked of the other members, if any.
    async fn heir(&self, room: &RoomId, user: &UserId) -> Result<Option<UserId>> {
        let Some(settings) = self.rooms.find_room(room).await? else {
            return Ok(None);
        };
        let mut candidates = Vec::new();
        for member in self.store.members.members(room, MAX_CANDIDATES, false).await? {
            if member.user_id == *user {
                continue;
            }
            let (_, rank) = self.access.standing(room, &settings, &member).await?;
            candidates.push(Candidate {
                user_id: member.user_id.clone(),
                rank,
                joined_at: member.joined_at,
            });
        }
        Ok(successor(&candidates).map(|c| c.user_id.clone()))
    }

    /// Step 2 for one message of the user's: tombstones it if it is live. Answers whether it
    /// counts as erased by this job: tombstoned now, or by the user since the job began (a
    /// tombstone of this job's whose checkpoint a crash lost).
    async fn erase_message(&self, room: &RoomId, message: &Message, since: DateTime<Utc>) -> Result<bool> {
        if !message.is_live() {
            let user = message.author_id.as_str();
            let ours = message.deleted_by.as_deref() == Some(user) && message.deleted_at.is_some_and(|at| at >= since);
            if ours {
                // A crash may have come between the tombstone and the deletion of its
                // reactions and votes: delete them (again).
                self.store.companions.delete_companions(room, &message.key()).await?;
            }
            return Ok(ours);
        }
        let now = self.store.now();
        match self
            .editing
            .tombstone(room, message, |m| m.erase(now), |_| Vec::new())
            .await
        {
            Ok(()) => Ok(true),
            // Deleted meanwhile by someone else: nothing left to erase.
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Records `at` as the job's checkpoint, then pauses as configured.
    async fn record(&self, run: &mut Run, at: &Checkpoint) -> Result<(), Stop> {
        run.job.checkpoint = Some(at.clone());
        self.checkpoint(run).await?;
        if !self.erasure.pause.is_zero() {
            tokio::time::sleep(self.erasure.pause).await;
        }
        Ok(())
    }

    /// Writes the job as it is over the version held, renewing the lease.
    async fn checkpoint(&self, run: &mut Run) -> Result<(), Stop> {
        let now = self.store.now();
        run.job.updated_at = crate::store::stored_time(now);
        run.job.lease_until = lease_until(&self.erasure, now);
        match self.store.erasure.save_erasure(&run.user, &run.job, &run.held).await? {
            Some(held) => {
                run.held = held;
                Ok(())
            }
            None => Err(Stop::Lost),
        }
    }
}

/// The checkpoint after a batch: the same step after `last` while more follow, else `then`
/// from its start.
fn next(at: Checkpoint, last: Option<String>, more: bool, then: RoomStep) -> Checkpoint {
    match (more, last) {
        (true, Some(last)) => Checkpoint {
            after: Some(last),
            ..at
        },
        _ => Checkpoint {
            step: then,
            after: None,
            ..at
        },
    }
}

/// The erased user as the room deletion path takes its caller (only the id is read).
fn as_principal(user: &UserId) -> Principal {
    Principal {
        user_id: user.clone(),
        name: String::new(),
    }
}
