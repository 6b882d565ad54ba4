//! Link previews of members' messages. After a send's durable write, a message with a link
//! records a job (`store::previews`) and hands it to this process's preview worker, so the
//! fetch is never on the send's path; the worker fetches the page through the SSRF-safe
//! client (`adapters::link_preview`), caches what it gave per URL for [`CACHE_FOR`], attaches
//! the preview as a companion row (the message's version does not change) and signals the
//! room (`message.previewed`).
//!
//! One worker per process takes jobs in the order they were sent: fetches of pages users name
//! stay one at a time however many links arrive, and a message's preview never overtakes an
//! earlier one's. A full queue leaves the job to the timer.
//!
//! Every job is tried once. The worker clears the job after its attempt, whatever came of it
//! (a failed fetch is cached as "no preview", so the same link is not fetched again for a
//! while). A job still there after [`RETRY_AFTER`] is one whose process stopped (a crash, a
//! full queue, a host that freezes after answering): housekeeping clears it first and then
//! tries it, so it is tried at most once more and never in a loop. Housekeeping fetches the
//! jobs it tries [`FETCHES_AT_ONCE`] at a time, so a slow page never holds up the run (nor,
//! where every job is left to the timer, everyone else's previews). A crash between the durable
//! write and the job's row loses that message's preview: it is a nicety, and writing the row
//! first would put a write before every send that has a link.

use crate::keys::MessageKey;
use std::sync::OnceLock;

use chrono::{DateTime, Duration, Utc};
use futures::StreamExt as _;
use tokio::sync::mpsc;

use crate::adapters::link_preview::PreviewFetcher;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::messages::Message;
use crate::previews::{self, LinkPreview};
use crate::signals::Signal;
use crate::store::previews::{CachedLink, PreviewJob};

/// How long a fetched URL's preview (or its absence) is reused before it is fetched again.
pub const CACHE_FOR: Duration = Duration::hours(6);
/// A job older than this was left by a process that stopped; housekeeping tries it once.
pub const RETRY_AFTER: Duration = Duration::minutes(2);
/// Jobs housekeeping tries per run.
const JOBS_PER_RUN: usize = 50;
/// Of those, fetched at once.
const FETCHES_AT_ONCE: usize = 10;
/// Cache rows housekeeping reads per run (the rest wait for the next run).
const CACHE_ROWS_PER_RUN: usize = 5000;
/// Jobs waiting in a process's queue before new ones are left to the timer.
const QUEUE_DEPTH: usize = 1024;

/// Link previews as a process runs them: the fetcher, and its worker's queue once started.
#[derive(Debug)]
pub struct Previews {
    fetcher: PreviewFetcher,
    queue: OnceLock<mpsc::Sender<PreviewJob>>,
}

impl Previews {
    pub fn new(fetcher: PreviewFetcher) -> Previews {
        Previews {
            fetcher,
            queue: OnceLock::new(),
        }
    }
}

/// Link previews, made in the background after a send. Holds what it uses: the store, the adapters
/// and settings, and the components it calls.
#[derive(Clone)]
pub struct Previewer {
    pub(crate) store: crate::store::Store,
    pub(crate) inline_events: bool,
    pub(crate) time: std::sync::Arc<dyn crate::adapters::clock::Clock>,
    pub(crate) previews: Option<std::sync::Arc<crate::service::previews::Previews>>,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
    pub(crate) signals: std::sync::Arc<crate::service::live::Signals>,
}

impl Previewer {
    /// After `message`'s durable write: records and queues its preview job when it is a
    /// member's message with a link. A side effect: a failure is logged, never returned.
    pub(crate) async fn preview_later(&self, room: &RoomId, message: &Message) {
        let Some(previews) = &self.previews else {
            return;
        };
        if !previews::is_previewed(message) {
            return;
        }
        let Some(url) = previews::first_link(&message.text) else {
            return;
        };
        let job = PreviewJob {
            room: room.clone(),
            message: message.key(),
            url,
            created_at: Some(self.time.now()),
        };
        if let Err(e) = self.store.previews.put_preview_job(&job).await {
            tracing::warn!(%room, error = %e, "could not record a link preview job; the message gets none");
            return;
        }
        // A host that freezes once it has answered leaves the job to the timer.
        if self.inline_events {
            return;
        }
        let queue = previews.queue.get_or_init(|| self.start_preview_worker());
        if queue.try_send(job).is_err() {
            tracing::warn!(%room, "the link preview queue is full; the timer will fetch it");
        }
    }

    fn start_preview_worker(&self) -> mpsc::Sender<PreviewJob> {
        let (queue, mut jobs) = mpsc::channel::<PreviewJob>(QUEUE_DEPTH);
        let chat = self.clone();
        // It holds its own queue's sender (through `chat`), so only a stop ends it.
        self.tasks.spawn_until_stopped(async move {
            while let Some(job) = jobs.recv().await {
                chat.make_preview(&job).await;
                if let Err(e) = chat.store.previews.clear_preview_job(&job.room, &job.message).await {
                    tracing::warn!(room = %job.room, error = %e, "could not clear a link preview job");
                }
            }
        });
        queue
    }

    /// One attempt at a job's preview: from the cache when fresh, else fetched (and cached,
    /// a failure too); attached unless the message is gone or its author removed the preview.
    async fn make_preview(&self, job: &PreviewJob) {
        let Some(previews) = &self.previews else {
            return;
        };
        // A message deleted since its send is not fetched for: its author took the link back
        // (a one-time link, a page not meant to be shared), and nothing would show it.
        match self.reading.find_message(&job.room, &job.message).await {
            Ok(Some(message)) if message.is_live() => {}
            Ok(_) => return,
            Err(e) => {
                return tracing::warn!(room = %job.room, error = %e, "a link preview's message could not be read");
            }
        }
        let preview = match self.preview_of(&previews.fetcher, &job.url, self.time.now()).await {
            Ok(Some(preview)) => preview,
            Ok(None) => return,
            Err(e) => {
                return tracing::warn!(room = %job.room, error = %e, "a link preview could not be made");
            }
        };
        if let Err(e) = self.attach(job, &preview).await {
            tracing::warn!(room = %job.room, error = %e, "a link preview could not be attached");
        }
    }

    /// The preview of `url`: the cache's when younger than [`CACHE_FOR`], else a fetch's.
    async fn preview_of(&self, fetcher: &PreviewFetcher, url: &str, now: DateTime<Utc>) -> Result<Option<LinkPreview>> {
        if let Some(cached) = self.store.previews.cached_link(url).await?
            && now - cached.fetched_at < CACHE_FOR
        {
            return Ok(cached.preview);
        }
        let preview = match fetcher.fetch(url).await {
            Ok(preview) => Some(preview),
            Err(why) => {
                tracing::info!(%why, "a link got no preview");
                None
            }
        };
        let cached = CachedLink {
            preview,
            fetched_at: now,
        };
        self.store.previews.cache_link(url, &cached).await?;
        Ok(cached.preview)
    }

    async fn attach(&self, job: &PreviewJob, preview: &LinkPreview) -> Result<()> {
        // A message deleted meanwhile keeps no preview (its companion rows are gone).
        let live = self
            .reading
            .find_message(&job.room, &job.message)
            .await?
            .is_some_and(|m| m.is_live());
        if live
            && self
                .store
                .previews
                .attach_preview(&job.room, &job.message, preview)
                .await?
        {
            self.signals.signal(
                &job.room,
                Signal::Previewed {
                    message_id: job.message.as_str().to_owned(),
                },
            );
        }
        Ok(())
    }

    /// Removes the preview of `who`'s own message `id` (none attached yet: none will be).
    /// A non-member is answered as for a missing room; another member's message is 403.
    pub async fn remove_preview(&self, who: &Principal, room: &RoomId, id: &MessageKey) -> Result<()> {
        self.access.access(room, &who.user_id).await?;
        let message = self.reading.live_message(room, id).await?;
        previews::may_remove(&message, &who.user_id)?;
        self.store.previews.remove_preview(room, &message.key()).await?;
        self.signals.signal(room, Signal::Previewed { message_id: message.id });
        Ok(())
    }

    /// Housekeeping's part: forgets what the cache holds past [`CACHE_FOR`]. Returns how many
    /// URLs it forgot.
    pub(crate) async fn expire_link_cache(&self, now: DateTime<Utc>) -> Result<usize> {
        Ok(self
            .store
            .previews
            .expire_link_cache(now - CACHE_FOR, CACHE_ROWS_PER_RUN)
            .await?)
    }

    /// Housekeeping's part: each job older than [`RETRY_AFTER`] (its process stopped) is
    /// cleared, then tried once. Returns the jobs tried.
    pub(crate) async fn retry_preview_jobs(&self, now: DateTime<Utc>) -> Result<usize> {
        if self.previews.is_none() {
            return Ok(0);
        }
        // Jobs a running worker holds are young and few; the stopped ones come after them.
        let due: Vec<PreviewJob> = self
            .store
            .previews
            .preview_jobs(20 * JOBS_PER_RUN)
            .await?
            .into_iter()
            .filter(|job| job.created_at.is_none_or(|at| now - at >= RETRY_AFTER))
            .take(JOBS_PER_RUN)
            .collect();
        // Several at once: a page slow to answer holds up only its own preview, and the run
        // takes a few fetch time limits, not one per job (where the host freezes after
        // answering, this is how every preview is made, inside the housekeeping run).
        let tries = futures::stream::iter(due)
            .map(|job| async move {
                self.store.previews.clear_preview_job(&job.room, &job.message).await?;
                self.make_preview(&job).await;
                Ok::<(), Error>(())
            })
            .buffer_unordered(FETCHES_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        let mut tried = 0;
        for outcome in tries {
            outcome?;
            tried += 1;
        }
        Ok(tried)
    }
}
