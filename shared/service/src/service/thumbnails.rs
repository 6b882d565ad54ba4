//! Thumbnails of image attachments. After a send's durable write, each PNG, JPEG, GIF or WebP
//! file the message carries is read back from the object store (its size was checked against
//! its declaration when the send claimed it, so at most the upload maximum), decoded within
//! bounds (`adapters::thumbnails`), scaled to fit 320 pixels a side and stored beside the file
//! (`attachments::thumbnail_key`); a companion row then records the image's size, which reads
//! show on the attachment (`ImageInfo`), and the room is told to re-read the message
//! (`message.previewed`). A file that does not decode — a decompression bomb, bytes of another
//! type — gets no thumbnail, and a client shows the file as before.
//!
//! One image is read and decoded at a time in a process (each decode may take a few times
//! `attachments::MAX_DECODE_BYTES`), off the async threads, and at most [`MAX_WAITING`] wait
//! for their turn: beyond that an image gets no thumbnail rather than holding memory or a
//! send. Where the host freezes once it has answered (a Functions app), the thumbnails are made
//! before the send answers; elsewhere in the background. A process that stops in between
//! leaves those images without a thumbnail: a nicety lost, never the file.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::{BoxFuture, FutureExt};
use tokio::sync::Semaphore;

use crate::adapters::objects::ObjectKey;
use crate::adapters::thumbnails::make_thumbnail;
use crate::attachments::{Attachment, is_thumbnailed, thumbnail_key};
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::service::attachments::AttachmentSettings;
use crate::service::send::publish::{Committed, Subscriber};
use crate::signals::Signal;

/// Images read and decoded at once in this process: the memory one decode may take bounds how
/// many. A `'static` permit moves into the blocking decode, so the turn lasts as long as the
/// decode does even if the future that waited for it is dropped.
static DECODING: Semaphore = Semaphore::const_new(1);
/// Images waiting for their turn in this process, at most.
const MAX_WAITING: usize = 32;
/// Images waiting for their turn now.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// One image's place among those `waiting`, given back when it is dropped (also when the
/// future that waits is dropped, so no place is lost).
struct Waiting(&'static AtomicUsize);

impl Waiting {
    /// A place, unless [`MAX_WAITING`] images wait already.
    fn enter(waiting: &'static AtomicUsize) -> Result<Waiting> {
        if waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING {
            waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::Unavailable("too many images wait for a thumbnail".into()));
        }
        Ok(Waiting(waiting))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Makes the thumbnails of a committed message's images. Holds what it uses.
#[derive(Clone)]
pub struct Thumbnailer {
    pub(crate) store: crate::store::Store,
    pub(crate) attachments: Option<Arc<AttachmentSettings>>,
    /// Make them before the send answers (a host that freezes after answering).
    pub(crate) inline: bool,
    pub(crate) tasks: crate::adapters::tasks::Supervisor,
    pub(crate) signals: Arc<crate::service::live::Signals>,
}

impl Subscriber for Thumbnailer {
    fn committed<'a>(&'a self, committed: &'a Committed) -> BoxFuture<'a, ()> {
        async move {
            let images: Vec<Attachment> = committed
                .message
                .attachments
                .iter()
                .filter(|file| is_thumbnailed(&file.mime))
                .cloned()
                .collect();
            if images.is_empty() || self.attachments.is_none() {
                return;
            }
            let (this, room, message) = (self.clone(), committed.room.clone(), committed.message.key());
            let work = async move {
                for file in &images {
                    if let Err(e) = this.thumbnail(&room, &message, file).await {
                        tracing::info!(%room, attachment = %file.id, error = %e, "an image got no thumbnail");
                    }
                }
            };
            match self.inline {
                true => work.await,
                false => self.tasks.spawn(work),
            }
        }
        .boxed()
    }
}

impl Thumbnailer {
    /// Makes and stores the thumbnail of `file`, an image of `message`, and records it.
    async fn thumbnail(&self, room: &RoomId, message: &MessageKey, file: &Attachment) -> Result<()> {
        let settings = self
            .attachments
            .as_deref()
            .ok_or_else(|| Error::Unavailable("attachments are not configured".into()))?;
        let Some(upload) = self.store.uploads.upload(room, &file.id).await? else {
            return Ok(());
        };
        let too_large = || Error::validation("the file is larger than any upload may be");
        if upload.size > settings.rules.max_bytes {
            return Err(too_large());
        }
        let turn = {
            let waiting = Waiting::enter(&WAITING)?;
            let turn = DECODING.acquire().await;
            drop(waiting);
            turn.map_err(|_| Error::Internal("the decoding turns are closed".into()))?
        };
        let Some(bytes) = settings.objects.get(&ObjectKey::parse(&upload.key)?).await? else {
            return Ok(());
        };
        if bytes.len() as u64 > settings.rules.max_bytes {
            return Err(too_large());
        }
        let mime = upload.mime.clone();
        let made = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            make_thumbnail(&bytes, &mime)
        })
        .await
        .map_err(|e| Error::Internal(format!("a thumbnail's decoding stopped: {e}")))?
        .map_err(Error::validation)?;
        let key = ObjectKey::parse(&thumbnail_key(&upload.key))?;
        settings.objects.put(&key, made.mime, made.bytes).await?;
        self.store
            .companions
            .attach_thumbnail(room, message, &file.id, made.width, made.height)
            .await?;
        // The file may have gone while its thumbnail was made (its message deleted or purged,
        // its room deleted): its thumbnail and row go too, as nothing else would delete them.
        if self.store.uploads.upload(room, &file.id).await?.is_none() {
            self.store.companions.detach_thumbnail(room, message, &file.id).await?;
            settings.objects.delete(&key).await?;
            return Ok(());
        }
        self.signals.signal(
            room,
            Signal::Previewed {
                message_id: message.as_str().to_owned(),
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_dropped_while_it_waits_gives_its_place_back() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let turns = Semaphore::new(0);
        let wait = async {
            let _place = Waiting::enter(&COUNT)?;
            let _turn = turns.acquire().await;
            Ok::<(), Error>(())
        };
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), wait)
                .await
                .is_err()
        );
        assert_eq!(COUNT.load(Ordering::SeqCst), 0);
        let places: Vec<Waiting> = (0..MAX_WAITING).map(|_| Waiting::enter(&COUNT).unwrap()).collect();
        assert!(Waiting::enter(&COUNT).is_err(), "full");
        drop(places);
        assert!(Waiting::enter(&COUNT).is_ok());
    }
}
