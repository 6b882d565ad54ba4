//! Link previews at the service level, where a process can stop exactly between recording a
//! job and fetching it (a host that freezes once it answered leaves every job to the timer),
//! where the store can fail the job's write, and where a message can go before its fetch.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration as StdDuration;

use chrono::{Duration, Utc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::adapters::clock::{Clock, ManualClock};
use crate::adapters::link_preview::PreviewFetcher;
use crate::adapters::outbound::{OutboundClient, Reach};
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::service::Chat;
use crate::service::previews::RETRY_AFTER;
use crate::service::testing::{alice, chat_on, store};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, StoreError, Tables};
use crate::store::schema::preview_key;

/// A page server on loopback speaking just enough HTTP/1.1: `/page` is an HTML page, any
/// other path a 500. Counts the requests it answered.
async fn page_server() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let hits = counted.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                hits.fetch_add(1, Ordering::SeqCst);
                let ok = request.starts_with(b"GET /page ");
                let (status, body) = match ok {
                    true => ("200 OK", "<html><head><title>The page</title></head></html>"),
                    false => ("500 Internal Server Error", "<title>broken</title>"),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (base, hits)
}

/// A service that leaves every preview job to the timer (as a frozen host does), on a clock
/// the test moves, with a room alice owns.
async fn chat_leaving_jobs(tables: Tables) -> (Chat, RoomId, ManualClock) {
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(tables).await;
    let client = OutboundClient::new(Reach::PublicAndLoopback, StdDuration::from_secs(5)).unwrap();
    let chat = chat
        .with_time(Arc::new(clock.clone()))
        .with_previews(PreviewFetcher::new(client))
        .with_inline_events();
    (chat, room, clock)
}

async fn preview_shown(chat: &Chat, room: &RoomId, id: &str) -> Option<String> {
    let message = chat
        .reading
        .get_message(&alice(), room, &crate::keys::MessageKey::parse(id).unwrap())
        .await
        .unwrap();
    message.preview.map(|p| p.title)
}

#[tokio::test]
async fn a_job_a_stopped_process_left_is_tried_once_by_housekeeping() {
    let (base, hits) = page_server().await;
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(store())).await;
    let good = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(&format!("{base}/page")))
        .await
        .unwrap()
        .message;
    let broken = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(&format!("{base}/broken")))
        .await
        .unwrap()
        .message;

    // A job younger than the retry delay may still be with a running worker: left alone.
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.preview_jobs_retried, 0);
    assert_eq!(hits.load(Ordering::SeqCst), 0);

    clock.advance(RETRY_AFTER + Duration::seconds(1));
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.preview_jobs_retried, 2);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    assert_eq!(preview_shown(&chat, &room, &good.id).await.as_deref(), Some("The page"));
    assert_eq!(
        preview_shown(&chat, &room, &broken.id).await,
        None,
        "a failed fetch leaves none"
    );
    assert_eq!(
        good.version,
        chat.reading
            .get_message(&alice(), &room, &good.key())
            .await
            .unwrap()
            .version
    );

    // Tried once: the failed one is not fetched again, run after run.
    clock.advance(RETRY_AFTER * 10);
    for _ in 0..3 {
        let report = chat.housekeeping(clock.now()).await.unwrap();
        assert_eq!(report.preview_jobs_retried, 0);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

/// A URL's cached preview serves later messages until it expires; housekeeping then forgets
/// it, and the next message with that link fetches the page again.
#[tokio::test]
async fn a_cached_url_is_fetched_again_once_its_cache_expired() {
    let (base, hits) = page_server().await;
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(store())).await;
    let link = format!("{base}/page");
    let send = |chat: Chat, room: RoomId, link: String| async move {
        chat.sending
            .send_message(&alice(), &room, NewMessage::text(link))
            .await
            .unwrap()
            .message
    };
    let first = send(chat.clone(), room.clone(), link.clone()).await;
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    chat.housekeeping(clock.now()).await.unwrap();
    let second = send(chat.clone(), room.clone(), link.clone()).await;
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the second came from the cache");
    for id in [&first.id, &second.id] {
        assert_eq!(preview_shown(&chat, &room, id).await.as_deref(), Some("The page"));
    }

    clock.advance(crate::service::previews::CACHE_FOR);
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.link_previews_expired, 1);
    let third = send(chat.clone(), room.clone(), link).await;
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 2, "fetched again once expired");
    assert_eq!(
        preview_shown(&chat, &room, &third.id).await.as_deref(),
        Some("The page")
    );
}

/// The job's row is a side effect: when the store refuses it, the send still succeeds and the
/// message simply has no preview.
#[tokio::test]
async fn a_job_the_store_would_not_record_fails_no_send() {
    let (base, hits) = page_server().await;
    let faults = FaultyTables::new(store());
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(faults.clone())).await;
    let housekeeping = chat.wiring.store.schema().housekeeping.clone();
    faults.fail_operation(
        "upsert",
        Some(&housekeeping),
        1,
        StoreError::new(ErrorKind::Unavailable, "injected"),
    );
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(&format!("{base}/page")))
        .await
        .unwrap()
        .message;
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.preview_jobs_retried, 0);
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert_eq!(preview_shown(&chat, &room, &sent.id).await, None);
}

/// A message deleted before its fetch gets no preview row (its companions are gone, and none
/// comes back).
#[tokio::test]
async fn a_message_deleted_before_its_fetch_gets_no_preview() {
    let (base, _hits) = page_server().await;
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(store())).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(&format!("{base}/page")))
        .await
        .unwrap()
        .message;
    chat.editing.delete_message(&alice(), &room, &sent.key()).await.unwrap();
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    chat.housekeeping(clock.now()).await.unwrap();
    let row = chat
        .wiring
        .store
        .tables()
        .get(
            &chat.wiring.store.schema().metadata,
            room.as_str(),
            &preview_key(&sent.key()),
        )
        .await
        .unwrap();
    assert!(row.is_none());
}

/// Housekeeping reads the cache a page at a time, and each run goes on where the last one
/// stopped: an expired URL whose key sorts after a page of fresh ones is forgotten too, so
/// the cache never grows past what its window holds, however many URLs are linked.
#[tokio::test]
async fn an_expired_url_behind_a_page_of_fresh_ones_is_forgotten_too() {
    use crate::service::previews::CACHE_FOR;
    use crate::store::previews::CachedLink;
    use crate::store::schema::link_cache_key;
    let (chat, _room) = chat_on(Tables::new(store())).await;
    let now = Utc::now();
    let mut urls: Vec<String> = (0..5).map(|n| format!("https://n{n}.example/")).collect();
    urls.sort_by_key(|url| link_cache_key(url));
    let expired = urls.last().unwrap().clone();
    for url in &urls {
        let fetched_at = if *url == expired {
            now - CACHE_FOR - Duration::hours(1)
        } else {
            now
        };
        let cached = CachedLink {
            preview: None,
            fetched_at,
        };
        chat.wiring.store.previews.cache_link(url, &cached).await.unwrap();
    }
    let mut forgotten = 0;
    for _ in 0..3 {
        forgotten += chat
            .wiring
            .store
            .previews
            .expire_link_cache(now - CACHE_FOR, 2)
            .await
            .unwrap();
    }
    assert_eq!(forgotten, 1);
    assert!(
        chat.wiring
            .store
            .previews
            .cached_link(&expired)
            .await
            .unwrap()
            .is_none()
    );
    for url in &urls[..4] {
        assert!(
            chat.wiring.store.previews.cached_link(url).await.unwrap().is_some(),
            "{url} is fresh"
        );
    }
}

/// A page server answering each request only once `together` requests have arrived (until
/// then a request waits, and the client's timeout ends it): pages served at once, or not at
/// all.
async fn pages_answered_together(together: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let arrived = Arc::new(tokio::sync::watch::channel(0usize).0);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let arrived = arrived.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                arrived.send_modify(|n| *n += 1);
                let mut all = arrived.subscribe();
                tokio::select! {
                    _ = all.wait_for(|n| *n >= together) => {}
                    // The client gave up waiting.
                    _ = socket.read(&mut buf) => return,
                }
                let body = "<html><head><title>Together</title></head></html>";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    base
}

/// Housekeeping fetches the jobs it retries several at once: a page slow to answer (up to the
/// fetch's time limit) holds up no other link's preview, and a run's fetches take a few
/// time limits, not one per job. Where the host freezes once it has answered, every preview
/// is made this way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_fetches_the_previews_it_retries_at_once() {
    let base = pages_answered_together(3).await;
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(store())).await;
    let mut sent = Vec::new();
    for page in ["a", "b", "c"] {
        let text = format!("{base}/{page}");
        sent.push(
            chat.sending
                .send_message(&alice(), &room, NewMessage::text(text))
                .await
                .unwrap()
                .message,
        );
    }
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.preview_jobs_retried, 3);
    for message in &sent {
        assert_eq!(
            preview_shown(&chat, &room, &message.id).await.as_deref(),
            Some("Together"),
            "{}",
            message.text
        );
    }
}

/// A link whose message was deleted before its job ran is not fetched at all: its author took
/// it back (a one-time link, a page they had not meant to share), and nothing would show it.
#[tokio::test]
async fn a_link_whose_message_was_deleted_before_its_job_ran_is_not_fetched() {
    let (base, hits) = page_server().await;
    let (chat, room, clock) = chat_leaving_jobs(Tables::new(store())).await;
    let sent = chat
        .sending
        .send_message(&alice(), &room, NewMessage::text(&format!("{base}/page")))
        .await
        .unwrap()
        .message;
    chat.editing.delete_message(&alice(), &room, &sent.key()).await.unwrap();
    clock.advance(RETRY_AFTER + Duration::seconds(1));
    let report = chat.housekeeping(clock.now()).await.unwrap();
    assert_eq!(report.preview_jobs_retried, 1, "the job is done with");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the page was not fetched");
}
