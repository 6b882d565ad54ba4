//! Scheduled messages: a member schedules a text or a poll, with attachments or not, for a
//! time, lists, edits and cancels their own; when it is due, a timer run (the `sendScheduled` function on Azure, the
//! housekeeping loop self-hosted) sends it through the one door as if the member sent it then:
//! `Sending::send_message`, with every check run again at that time. A check that refuses it
//! (the member left, was banned or timed out, the room went read-only) is recorded in the item
//! (`refused`, with the code and message the send answered) and told to the member at once
//! through a live notice to their connections alone (`scheduled.refused`).
//!
//! Exactly once, across processes, restarts, crashes and a timer that fires twice: see
//! `crate::scheduled`. A run reads only the index rows due (`store::scheduled`), so its cost
//! grows with the items due, not with those stored.
//!
//! The uploads an item names are checked and claimed when it is scheduled, with the claim its
//! send makes (see `crate::scheduled`), so the send checks them again and takes them through
//! the one door; a cancelled or refused item releases them.

use chrono::{DateTime, Utc};

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::scheduled::{
    MAX_ATTEMPTS, MAX_KEPT_PER_MEMBER, MAX_PENDING_PER_MEMBER, NewScheduled, Refusal, Scheduled, ScheduledEdit,
    ScheduledStatus, check_id, checked_body, checked_send_at, refuses,
};
use crate::signals::Signal;
use crate::store::scheduled::{Due, ItemVersion};
use crate::store::stored_time;

/// Index rows one timer run reads at most; the next run goes on.
pub const MAX_DUE_PER_RUN: usize = 500;

/// What a timer run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScheduledReport {
    pub sent: usize,
    pub refused: usize,
    /// Due but claimed by another sender, or changed since read: theirs to finish.
    pub skipped: usize,
    /// Failed for the server's reasons; tried again once the claim lapses.
    pub failed: usize,
}

/// How one item's turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    Sent,
    Refused,
    Skipped,
}

/// Scheduled messages, sent by the timer when due. Holds what it uses: the store, the adapters and
/// settings, and the components it calls.
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) store: crate::store::Store,
    pub(crate) time: std::sync::Arc<dyn crate::adapters::clock::Clock>,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) files: std::sync::Arc<crate::service::attachments::Files>,
    pub(crate) sending: std::sync::Arc<crate::service::send::Sending>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Scheduler {
    pub async fn schedule_message(&self, who: &Principal, room: &RoomId, input: NewScheduled) -> Result<Scheduled> {
        let now = self.time.now();
        let send_at = stored_time(checked_send_at(input.send_at, now)?);
        let (text, poll) = checked_body(input.text.as_deref(), input.poll.as_ref())?;
        let access = self.access.access(room, &who.user_id).await?;
        let pending = self.store.scheduled.scheduled_of(room, &who.user_id).await?;
        if pending.iter().filter(|item| item.status.is_pending()).count() >= MAX_PENDING_PER_MEMBER {
            return Err(Error::Conflict(format!(
                "at most {MAX_PENDING_PER_MEMBER} scheduled messages may wait in one room; cancel one first"
            )));
        }
        if pending.len() >= MAX_KEPT_PER_MEMBER {
            return Err(Error::Conflict(format!(
                "at most {MAX_KEPT_PER_MEMBER} scheduled messages, waiting or finished in the last week, are kept in one room; finished ones go a week after they finish"
            )));
        }
        let mut item = Scheduled {
            id: uuid::Uuid::new_v4().simple().to_string(),
            room_id: room.to_string(),
            user_id: who.user_id.to_string(),
            user_name: access.member.nickname.clone().unwrap_or_else(|| who.name.clone()),
            text,
            poll,
            attachments: Vec::new(),
            send_at,
            status: ScheduledStatus::Scheduled,
            created_at: stored_time(now),
            claimed_at: None,
            attempts: 0,
            message_id: None,
            refusal: None,
            finished_at: None,
        };
        // Checked as the send will check them, and held for it from now on.
        let ids = input.attachments.unwrap_or_default();
        let claim = crate::service::attachments::Files::attachment_claim(&who.user_id, Some(&item.client_id()));
        // No message can hold this new item's claim yet: a failure releases what it took.
        let files = self
            .files
            .claim_attachments(&who.user_id, room, &ids, &claim, None)
            .await?;
        item.attachments = files.files.iter().map(|file| file.id.clone()).collect();
        if let Err(e) = self.store.scheduled.insert_scheduled(&item).await {
            self.files
                .release_attachments(room, &files.taken, &claim, &who.user_id, None)
                .await;
            return Err(e.into());
        }
        Ok(item)
    }

    /// Gives a finished item's uploads back to its owner (they are theirs to attach again,
    /// or for housekeeping to remove). Logged, never failing: an upload left claimed is only
    /// one its owner cannot attach again.
    async fn release_scheduled_files(&self, item: &Scheduled) {
        if item.attachments.is_empty() {
            return;
        }
        let (Ok(room), Ok(user)) = (RoomId::parse(&item.room_id), UserId::parse(&item.user_id)) else {
            return;
        };
        let claim = crate::service::attachments::Files::attachment_claim(&user, Some(&item.client_id()));
        for id in &item.attachments {
            if let Err(e) = self
                .store
                .uploads
                .release_upload(&room, id, &claim, self.store.now())
                .await
            {
                tracing::warn!(%room, attachment = %id, error = %e, "could not release a scheduled message's attachment");
            }
        }
    }

    /// An erasure's step: deletes every item of `user` in `room`, a listing at a time until
    /// none is left (one listing holds at most a few hundred), each listing's files first.
    pub(crate) async fn erase_scheduled_of(&self, room: &RoomId, user: &UserId) -> Result<()> {
        loop {
            let items = self.store.scheduled.scheduled_of(room, user).await?;
            if items.is_empty() {
                return Ok(());
            }
            self.remove_scheduled_files(room, user, &items).await?;
            self.store.scheduled.delete_scheduled(room, user, &items).await?;
        }
    }

    /// Before an erasure deletes `items`: deletes the files those still waiting hold (objects,
    /// then rows; failing, so the step is done again), which nothing else would ever free.
    /// Only those the item's claim holds: a file it gave back, or one a message carries, is
    /// not the item's.
    async fn remove_scheduled_files(&self, room: &RoomId, user: &UserId, items: &[Scheduled]) -> Result<()> {
        for item in items {
            if !item.status.is_pending() || item.attachments.is_empty() {
                continue;
            }
            let claim = crate::service::attachments::Files::attachment_claim(user, Some(&item.client_id()));
            let mut held = Vec::new();
            for id in &item.attachments {
                if let Some(upload) = self.store.uploads.upload(room, id).await?
                    && upload.claimed_by.as_deref() == Some(claim.as_str())
                {
                    held.push(upload.attachment());
                }
            }
            self.files.purge_attachments(room, &held).await?;
        }
        Ok(())
    }

    /// The caller's scheduled messages in the room, whatever became of them (finished ones for
    /// a week), soonest first.
    pub async fn list_scheduled(&self, who: &Principal, room: &RoomId) -> Result<Vec<Scheduled>> {
        self.access.access(room, &who.user_id).await?;
        let mut items = self.store.scheduled.scheduled_of(room, &who.user_id).await?;
        items.sort_by(|a, b| (a.send_at, &a.id).cmp(&(b.send_at, &b.id)));
        Ok(items)
    }

    /// Changes the text, the poll or the time of one of the caller's items still waiting.
    pub async fn edit_scheduled(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &str,
        edit: ScheduledEdit,
    ) -> Result<Scheduled> {
        let now = self.time.now();
        let send_at = edit
            .send_at
            .map(|at| checked_send_at(at, now))
            .transpose()?
            .map(stored_time);
        let body = match (&edit.text, &edit.poll) {
            (None, None) => None,
            (text, poll) => Some(checked_body(text.as_deref(), poll.as_ref())?),
        };
        self.change_scheduled(who, room, id, |item| {
            if let Some((text, poll)) = body.clone() {
                item.text = text;
                item.poll = poll;
            }
            if let Some(at) = send_at {
                item.send_at = at;
            }
        })
        .await
    }

    /// Cancels one of the caller's items still waiting; it stays listed as `cancelled`.
    pub async fn cancel_scheduled(&self, who: &Principal, room: &RoomId, id: &str) -> Result<Scheduled> {
        let now = stored_time(self.time.now());
        let cancelled = self
            .change_scheduled(who, room, id, |item| {
                item.status = ScheduledStatus::Cancelled;
                item.finished_at = Some(now);
            })
            .await?;
        self.release_scheduled_files(&cancelled).await;
        Ok(cancelled)
    }

    async fn change_scheduled(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &str,
        change: impl Fn(&mut Scheduled),
    ) -> Result<Scheduled> {
        self.access.access(room, &who.user_id).await?;
        check_id(id)?;
        let missing = || Error::not_found("scheduled message not found");
        let (item, etag) = self
            .store
            .scheduled
            .scheduled(room, &who.user_id, id)
            .await?
            .ok_or_else(missing)?;
        item.require_changeable()?;
        let mut changed = item.clone();
        change(&mut changed);
        match self.store.scheduled.replace_scheduled(&item, &etag, &changed).await? {
            Some(_) => Ok(changed),
            None => Err(Error::Conflict(
                "the scheduled message changed meanwhile (it may be being sent); read it again".into(),
            )),
        }
    }

    /// One timer run: sends what is due now.
    pub async fn send_due_messages(&self) -> Result<ScheduledReport> {
        let now = self.time.now();
        let mut report = ScheduledReport::default();
        for due in self.store.scheduled.due_scheduled(now, MAX_DUE_PER_RUN).await? {
            // One item's trouble never stops the others; its claim lapses and a later run
            // tries it again.
            match self.take_turn(&due, now).await {
                Ok(Turn::Sent) => report.sent += 1,
                Ok(Turn::Refused) => report.refused += 1,
                Ok(Turn::Skipped) => report.skipped += 1,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(item = %due.item_key, error = %e, "a scheduled message was not sent; retried later");
                }
            }
        }
        Ok(report)
    }

    /// Claims a due item, then delivers it.
    async fn take_turn(&self, due: &Due, now: DateTime<Utc>) -> Result<Turn> {
        let Some((item, etag)) = self.store.scheduled.scheduled_at(&due.item_key).await? else {
            self.store.scheduled.drop_due(due).await?;
            return Ok(Turn::Skipped);
        };
        if !due.indexes(&item) {
            self.store.scheduled.drop_due(due).await?;
            return Ok(Turn::Skipped);
        }
        let Some((claimed, etag)) = self.claim_scheduled(&item, &etag, now).await? else {
            return Ok(Turn::Skipped);
        };
        self.deliver_scheduled(&claimed, &etag).await
    }

    /// One item as stored, whoever asks: for tools and tests (a member who left can no longer
    /// list it through the API).
    pub async fn scheduled_item(&self, room: &RoomId, user: &UserId, id: &str) -> Result<Option<Scheduled>> {
        check_id(id)?;
        Ok(self
            .store
            .scheduled
            .scheduled(room, user, id)
            .await?
            .map(|(item, _)| item))
    }

    /// A timer run's first step for one item alone: claims it if it is due now, and stops.
    /// Public so a test can stop a sender right there (a crash between claim and send); the
    /// claim lapses after `CLAIM_LEASE` and a later run sends the item.
    pub async fn claim_due_item(&self, room: &RoomId, user: &UserId, id: &str) -> Result<bool> {
        check_id(id)?;
        let Some((item, etag)) = self.store.scheduled.scheduled(room, user, id).await? else {
            return Ok(false);
        };
        Ok(self.claim_scheduled(&item, &etag, self.time.now()).await?.is_some())
    }

    /// Marks `item` as being sent by this run, if it is claimable and unchanged since read.
    pub(crate) async fn claim_scheduled(
        &self,
        item: &Scheduled,
        etag: &ItemVersion,
        now: DateTime<Utc>,
    ) -> Result<Option<(Scheduled, ItemVersion)>> {
        if !item.claimable(now) {
            return Ok(None);
        }
        let mut claimed = item.clone();
        claimed.status = ScheduledStatus::Sending;
        claimed.claimed_at = Some(stored_time(now));
        claimed.attempts += 1;
        Ok(self
            .store
            .scheduled
            .replace_scheduled(item, etag, &claimed)
            .await?
            .map(|etag| (claimed, etag)))
    }

    /// Sends a claimed item through the one door and records how that ended.
    pub(crate) async fn deliver_scheduled(&self, item: &Scheduled, etag: &ItemVersion) -> Result<Turn> {
        let room = RoomId::parse(&item.room_id)?;
        let user = UserId::parse(&item.user_id)?;
        // A send that stored its message before its sender stopped: record it, send nothing.
        // (Asked before the send, whose own repeat check comes only after membership: a member
        // who left since must not turn a sent message into a refused one.)
        if let Some(first) = self
            .store
            .messages
            .sent_with_client_id(&room, &user, &item.client_id())
            .await?
        {
            return self.finish_scheduled(item, etag, Ok(first.id)).await;
        }
        let who = Principal {
            user_id: user,
            name: item.user_name.clone(),
        };
        match self.sending.send_message(&who, &room, item.message()).await {
            Ok(sent) => self.finish_scheduled(item, etag, Ok(sent.message.id)).await,
            // An outcome the store could not confirm may still land, so the item is never
            // refused for one (that would give back files its message holds). It stays claimed;
            // once the claim lapses a later run asks again, and a send with the same client id
            // is the one message either way.
            Err(e) if e.is_unconfirmed() => Err(e),
            Err(e) if refuses(&e) || item.attempts >= MAX_ATTEMPTS => {
                // A sender whose claim lapsed may have stored it meanwhile (its files are that
                // message's now): then it was sent, and nothing is given back.
                match self
                    .store
                    .messages
                    .sent_with_client_id(&room, &who.user_id, &item.client_id())
                    .await?
                {
                    Some(first) => self.finish_scheduled(item, etag, Ok(first.id)).await,
                    None => self.finish_scheduled(item, etag, Err(e)).await,
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn finish_scheduled(
        &self,
        item: &Scheduled,
        etag: &ItemVersion,
        outcome: std::result::Result<String, Error>,
    ) -> Result<Turn> {
        let mut done = item.clone();
        done.finished_at = Some(stored_time(self.time.now()));
        let turn = match outcome {
            Ok(message_id) => {
                done.status = ScheduledStatus::Sent;
                done.message_id = Some(message_id);
                Turn::Sent
            }
            Err(e) => {
                tracing::info!(item = %item.id, room = %item.room_id, error = %e, "a scheduled message was refused");
                done.status = ScheduledStatus::Refused;
                // The server's own trouble is told in general terms, as the API tells it.
                let message = match refuses(&e) {
                    true => e.to_string(),
                    false => format!("it could not be sent after {MAX_ATTEMPTS} attempts; the server was unavailable"),
                };
                done.refusal = Some(Refusal {
                    code: e.code().to_owned(),
                    message,
                });
                Turn::Refused
            }
        };
        // Lost only to a sender that took over after this one's claim lapsed: it finds the
        // message by its client id and records the same outcome.
        if self
            .store
            .scheduled
            .replace_scheduled(item, etag, &done)
            .await?
            .is_none()
        {
            return Ok(Turn::Skipped);
        }
        // The member is told at once if they are connected; the item's status tells it anyway.
        if turn == Turn::Refused {
            self.release_scheduled_files(&done).await;
        }
        if turn == Turn::Refused
            && let (Ok(room), Ok(user)) = (RoomId::parse(&done.room_id), UserId::parse(&done.user_id))
        {
            let signal = Signal::ScheduledRefused {
                scheduled: Box::new(done),
            };
            self.signals.notice(&room, &user, signal);
        }
        Ok(turn)
    }
}
