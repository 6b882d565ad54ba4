//! Outgoing webhooks at the service level, against a real local HTTP receiver, where a failure
//! can be placed exactly: a send whose transaction fails (no event, nothing delivered), one
//! that commits and then reports a timeout (delivered once), a run that dies between fanning
//! an event out and clearing it (each delivery once), and two processes' runs at once (each
//! delivery posted once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::adapters::clock::ManualClock;
use crate::adapters::outbound::{OutboundClient, Reach};
use crate::adapters::outgoing::{HookSender, Sealer};
use crate::ids::RoomId;
use crate::messages::send::NewMessage;
use crate::outgoing::{DeliveryStatus, NewOutgoingWebhook};
use crate::service::Chat;
use crate::service::testing::{alice, chat_on, store};
use crate::storage::faults::FaultyTables;
use crate::storage::{ErrorKind, RangeQuery, StoreError, Tables};
use crate::store::schema::{HOOK_EVENT_PREFIX, Schema};

/// Requests by delivery id, as a real receiver on loopback got them.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<HashMap<String, usize>>>);

impl Receiver {
    fn posts(&self) -> HashMap<String, usize> {
        self.0.lock().unwrap().clone()
    }
}

/// A minimal HTTP/1.1 server answering every request 200 and counting its delivery ids.
async fn start_receiver() -> (Receiver, String) {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let counts = receiver.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let counts = counts.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                // Headers, then as much body as Content-Length says.
                loop {
                    let Ok(n) = socket.read(&mut buffer).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (name, value) = l.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            let id = head.lines().find_map(|l| {
                                let (name, value) = l.split_once(':')?;
                                name.eq_ignore_ascii_case("x-tabletalk-delivery")
                                    .then(|| value.trim().to_owned())
                            });
                            *counts.0.lock().unwrap().entry(id.unwrap_or_default()).or_default() += 1;
                            break;
                        }
                    }
                }
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (receiver, url)
}

fn with_webhooks(chat: Chat, clock: &ManualClock) -> Chat {
    let client = OutboundClient::new(Reach::Anywhere, StdDuration::from_secs(5)).unwrap();
    chat.with_outgoing_webhooks(HookSender::new(client, Sealer::new(b"test sealing key")))
        .with_time(Arc::new(clock.clone()))
}

/// A second process on the same tables that sends but delivers nothing itself (no sealing
/// key): its sends still commit their events, and only the test's runs deliver them.
async fn sender_on(tables: Tables) -> Chat {
    Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap()
}

async fn register(chat: &Chat, room: &RoomId, url: &str) -> String {
    let input = NewOutgoingWebhook {
        url: url.to_owned(),
        events: None,
    };
    chat.sending
        .create_outgoing_webhook(&alice(), room, input)
        .await
        .unwrap()
        .webhook
        .id
}

/// A message of alice's in `room`, sent before any endpoint exists (so it makes no event):
/// what the deliveries a test makes by hand are about. A delivery of a message that is not
/// there (or deleted) is never posted (`Sending::still_said`).
async fn a_message(chat: &Chat, room: &RoomId) -> String {
    chat.sending
        .send_message(&alice(), room, NewMessage::text("said"))
        .await
        .unwrap()
        .message
        .id
}

async fn pending_events(chat: &Chat, room: &RoomId) -> usize {
    let query = RangeQuery::prefix(room.as_str(), HOOK_EVENT_PREFIX, 100);
    let rows = chat
        .wiring
        .store
        .tables()
        .query_up_to(&chat.wiring.store.schema().messages, &query, 100);
    rows.await.unwrap().0.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_delivers_nothing_and_one_that_commits_then_times_out_is_delivered_once() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(Tables::new(faults.clone())).await;
    let (receiver, url) = start_receiver().await;
    let hook = register(&chat, &room, &url).await;
    let messages = chat.wiring.store.schema().messages.clone();

    // The transaction fails outright: no message, no event, nothing delivered.
    faults.fail_operation(
        "transact",
        Some(&messages),
        1,
        StoreError::new(ErrorKind::Internal, "injected"),
    );
    assert!(
        sender
            .sending
            .send_message(&alice(), &room, NewMessage::text("lost"))
            .await
            .is_err()
    );
    assert_eq!(pending_events(&chat, &room).await, 0);
    chat.sending.deliver_webhooks().await.unwrap();
    assert!(receiver.posts().is_empty());

    // It commits and then reports a timeout: the message is stored, its event with it.
    faults.fail_operation_after_applying(
        "transact",
        Some(&messages),
        1,
        StoreError::unavailable("operation timed out"),
    );
    let sent = sender
        .sending
        .send_message(&alice(), &room, NewMessage::text("kept"))
        .await;
    assert!(sent.is_ok(), "the ledger finds the commit: {sent:?}");
    assert_eq!(pending_events(&chat, &room).await, 1);
    let report = chat.sending.deliver_webhooks().await.unwrap();
    assert_eq!((report.events, report.delivered), (1, 1));
    chat.sending.deliver_webhooks().await.unwrap();
    let posts = receiver.posts();
    assert_eq!(posts.len(), 1);
    assert!(posts.values().all(|n| *n == 1), "{posts:?}");
    let listed = chat.sending.list_deliveries(&alice(), &room, &hook).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, DeliveryStatus::Delivered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_dies_between_fan_out_and_clearing_the_event_delivers_each_once() {
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(Tables::new(faults.clone())).await;
    let (receiver, url) = start_receiver().await;
    register(&chat, &room, &url).await;
    register(&chat, &room, &url).await;
    sender
        .sending
        .send_message(&alice(), &room, NewMessage::text("once"))
        .await
        .unwrap();

    // The deliveries are recorded, then clearing the event fails: the run stops there.
    let messages = chat.wiring.store.schema().messages.clone();
    faults.fail_operation("delete", Some(&messages), 1, StoreError::unavailable("injected"));
    chat.sending.deliver_webhooks().await.unwrap();
    assert_eq!(pending_events(&chat, &room).await, 1, "the event waits");
    // The next run fans it out again, which finds both deliveries recorded.
    let report = chat.sending.deliver_webhooks().await.unwrap();
    assert_eq!((report.events, report.delivered), (1, 2));
    assert_eq!(pending_events(&chat, &room).await, 0);
    chat.sending.deliver_webhooks().await.unwrap();
    let posts = receiver.posts();
    assert_eq!(posts.len(), 2, "one delivery per endpoint: {posts:?}");
    assert!(posts.values().all(|n| *n == 1), "{posts:?}");
}

/// A run that read an event before another run fanned it out, posted it and cleared it, fans
/// it out late (the order two runs at once can take): the delivery is not posted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_fan_out_of_an_event_already_delivered_posts_nothing_again() {
    let tables = Tables::new(FaultyTables::new(store()));
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(tables.clone()).await;
    let chat = with_webhooks(chat, &clock);
    let (receiver, url) = start_receiver().await;
    register(&chat, &room, &url).await;
    // Sent by a process that delivers nothing, so no run of its own starts now.
    sender_on(tables.clone())
        .await
        .sending
        .send_message(&alice(), &room, NewMessage::text("once"))
        .await
        .unwrap();
    // The late run reads the event and the endpoints…
    let events = chat.wiring.store.outgoing.hook_events(&room).await.unwrap();
    let hooks = chat.wiring.store.outgoing.outgoing_webhooks(&room).await.unwrap();
    assert_eq!((events.len(), hooks.len()), (1, 1));
    // …another run delivers it…
    assert_eq!(chat.sending.deliver_webhooks().await.unwrap().delivered, 1);
    // …then the late run fans it out and delivers what it finds pending.
    let late = crate::store::outgoing::new_delivery(&hooks[0].id, &events[0], "{}".into(), Utc::now());
    chat.wiring.store.outgoing.insert_delivery(&room, &late).await.unwrap();
    assert_eq!(chat.sending.deliver_webhooks().await.unwrap().delivered, 0);
    let posts = receiver.posts();
    assert_eq!((posts.len(), posts.values().sum::<usize>()), (1, 1), "{posts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_delivering_at_once_post_each_delivery_once() {
    let tables = Tables::new(FaultyTables::new(store()));
    let clock = ManualClock::at(Utc::now());
    let (a, room) = chat_on(tables.clone()).await;
    let a = with_webhooks(a, &clock);
    let b = with_webhooks(sender_on(tables.clone()).await, &clock);
    let (receiver, url) = start_receiver().await;
    register(&a, &room, &url).await;
    for n in 0..6 {
        // Each send nudges a run of its own in the background, too.
        let chat = if n % 2 == 0 { &a } else { &b };
        chat.sending
            .send_message(&alice(), &room, NewMessage::text(&format!("m{n}")))
            .await
            .unwrap();
    }
    for _ in 0..3 {
        let (x, y, z) = tokio::join!(
            a.sending.deliver_webhooks(),
            b.sending.deliver_webhooks(),
            a.sending.deliver_webhooks()
        );
        x.unwrap();
        y.unwrap();
        z.unwrap();
    }
    for _ in 0..100 {
        if receiver.posts().len() == 6 {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
    let posts = receiver.posts();
    assert_eq!(posts.len(), 6, "{posts:?}");
    assert!(posts.values().all(|n| *n == 1), "each delivery posted once: {posts:?}");
}

/// The history is listed newest change first, and pruning takes only the deliveries of
/// changes older than the history it keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_deliveries_are_listed_newest_first_and_the_oldest_pruned() {
    let clock = ManualClock::at(Utc::now());
    let tables = Tables::new(FaultyTables::new(store()));
    let (chat, room) = chat_on(tables.clone()).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(tables).await;
    let (_receiver, url) = start_receiver().await;
    let hook = register(&chat, &room, &url).await;
    for n in 0..5 {
        sender
            .sending
            .send_message(&alice(), &room, NewMessage::text(&format!("m{n}")))
            .await
            .unwrap();
    }
    assert_eq!(chat.sending.deliver_webhooks().await.unwrap().delivered, 5);
    let listed = chat.sending.list_deliveries(&alice(), &room, &hook).await.unwrap();
    let versions: Vec<u64> = listed.iter().map(|d| d.version).collect();
    let mut newest_first = versions.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(versions, newest_first);
    let newest = versions[0];
    let pruned = chat
        .wiring
        .store
        .outgoing
        .prune_deliveries(&room, &hook, newest, 2)
        .await
        .unwrap();
    assert_eq!(pruned, 2, "versions below {} go", newest - 2);
    let kept: Vec<u64> = chat
        .sending
        .list_deliveries(&alice(), &room, &hook)
        .await
        .unwrap()
        .iter()
        .map(|d| d.version)
        .collect();
    assert_eq!(kept, versions[..3].to_vec());
}

/// What a receiver got in one request.
#[derive(Clone, Debug)]
struct Posted {
    delivery: String,
    signature: String,
    body: String,
}

/// How a receiver answers a request: the status, once the future is ready (a future that is
/// never ready holds the request open until the client gives up).
type Behave = Arc<dyn Fn(Posted) -> futures::future::BoxFuture<'static, u16> + Send + Sync>;

/// A minimal HTTP/1.1 receiver on loopback answering each request as `behave` says.
async fn serve(behave: Behave) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let behave = behave.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                let posted = loop {
                    let Ok(n) = socket.read(&mut buffer).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let header = |wanted: &str| {
                        head.lines().find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case(wanted).then(|| value.trim().to_owned())
                        })
                    };
                    let length = header("content-length")
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() >= length {
                        break Posted {
                            delivery: header("x-tabletalk-delivery").unwrap_or_default(),
                            signature: header("x-tabletalk-signature").unwrap_or_default(),
                            body: body.to_owned(),
                        };
                    }
                };
                let mut rest = [0u8; 64];
                let status = tokio::select! {
                    status = behave(posted) => status,
                    // The client gave up waiting.
                    _ = socket.read(&mut rest) => return,
                };
                let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

fn answering(status: u16, posts: Arc<Mutex<Vec<Posted>>>) -> Behave {
    Arc::new(move |posted| {
        posts.lock().unwrap().push(posted);
        Box::pin(async move { status })
    })
}

/// A run working through a backlog can take minutes (ten seconds an endpoint may take, per
/// delivery). Each attempt is still signed — and claimed — at the time of that attempt, not
/// of the run's start: receivers are told to refuse a timestamp five minutes off, and a claim
/// dated at the run's start would lapse while its attempt is still under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_delivery_is_signed_at_its_own_attempt_however_long_the_run() {
    use crate::adapters::clock::Clock;
    let clock = ManualClock::at(Utc::now());
    let tables = Tables::new(FaultyTables::new(store()));
    let (chat, room) = chat_on(tables.clone()).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(tables).await;
    let seen: Arc<Mutex<Vec<(Posted, i64)>>> = Arc::default();
    let url = {
        let (clock, seen) = (clock.clone(), seen.clone());
        serve(Arc::new(move |posted| {
            seen.lock().unwrap().push((posted, clock.now().timestamp()));
            // Each answer takes two minutes of the (test's) clock.
            clock.advance(chrono::Duration::minutes(2));
            Box::pin(async { 200 })
        }))
        .await
    };
    let input = NewOutgoingWebhook { url, events: None };
    let created = chat
        .sending
        .create_outgoing_webhook(&alice(), &room, input)
        .await
        .unwrap();
    for n in 0..4 {
        sender
            .sending
            .send_message(&alice(), &room, NewMessage::text(&format!("m{n}")))
            .await
            .unwrap();
    }
    assert_eq!(chat.sending.deliver_webhooks().await.unwrap().delivered, 4);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    for (posted, received_at) in &seen {
        let t: i64 = posted
            .signature
            .strip_prefix("t=")
            .and_then(|rest| rest.split(',').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no timestamp: {posted:?}"));
        let expected = crate::adapters::outgoing::signature(&created.secret, t, posted.body.as_bytes());
        assert_eq!(posted.signature, expected, "a valid signature");
        assert_eq!(t, *received_at, "signed at its own attempt: {posted:?}");
    }
}

/// An endpoint slow to answer holds up no other: a room's endpoints, and the rooms, are
/// called at once. Each receiver here answers only once all three have their request (else
/// the client's timeout ends it), so a run calling them one after another gets timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_endpoint_holds_up_no_other_endpoint_or_room() {
    let clock = ManualClock::at(Utc::now());
    let tables = Tables::new(FaultyTables::new(store()));
    let (chat, room) = chat_on(tables.clone()).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(tables).await;
    let other = chat
        .rooms
        .create_room(
            &alice(),
            crate::rooms::NewRoom {
                name: "other".into(),
                description: None,
                visibility: crate::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let other = RoomId::parse(&other.id).unwrap();
    let (arrived, _) = tokio::sync::watch::channel(0usize);
    let arrived = Arc::new(arrived);
    let behave: Behave = {
        let arrived = arrived.clone();
        Arc::new(move |_posted| {
            arrived.send_modify(|n| *n += 1);
            let mut all = arrived.subscribe();
            Box::pin(async move {
                let _ = all.wait_for(|n| *n >= 3).await;
                200
            })
        })
    };
    register(&chat, &room, &serve(behave.clone()).await).await;
    register(&chat, &room, &serve(behave.clone()).await).await;
    register(&chat, &other, &serve(behave).await).await;
    for room in [&room, &other] {
        sender
            .sending
            .send_message(&alice(), room, NewMessage::text("hello"))
            .await
            .unwrap();
    }
    let report = chat.sending.deliver_webhooks().await.unwrap();
    assert_eq!((report.delivered, report.failed), (3, 0), "{report:?}");
}

/// Deleting an endpoint takes its deliveries with it: the backlog of one that kept failing
/// is neither posted later nor kept (a pending delivery holds the message's text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_endpoint_keeps_no_pending_delivery_and_gets_no_more_posts() {
    use crate::store::schema::{DELIVERY_DONE_PREFIX, DELIVERY_PENDING_PREFIX};
    let clock = ManualClock::at(Utc::now());
    let tables = Tables::new(FaultyTables::new(store()));
    let (chat, room) = chat_on(tables.clone()).await;
    let chat = with_webhooks(chat, &clock);
    let sender = sender_on(tables).await;
    let posts: Arc<Mutex<Vec<Posted>>> = Arc::default();
    let failing = register(&chat, &room, &serve(answering(500, posts.clone())).await).await;
    let kept = register(&chat, &room, &serve(answering(200, Arc::default())).await).await;
    sender
        .sending
        .send_message(&alice(), &room, NewMessage::text("private words"))
        .await
        .unwrap();
    let report = chat.sending.deliver_webhooks().await.unwrap();
    assert_eq!((report.delivered, report.failed), (1, 1));

    chat.sending
        .delete_outgoing_webhook(&alice(), &room, &failing)
        .await
        .unwrap();
    clock.advance(chrono::Duration::hours(2));
    chat.sending.deliver_webhooks().await.unwrap();
    let posted: Vec<String> = posts.lock().unwrap().iter().map(|p| p.delivery.clone()).collect();
    assert_eq!(posted.len(), 1, "no post after the delete: {posted:?}");
    assert!(posted[0].starts_with(&failing), "{posted:?}");
    let rows = |prefix: String| {
        let query = RangeQuery::prefix(room.as_str(), &prefix, 100);
        let chat = chat.clone();
        async move {
            chat.wiring
                .store
                .tables()
                .query_up_to(&chat.wiring.store.schema().rooms, &query, 100)
                .await
                .unwrap()
                .0
        }
    };
    assert!(rows(format!("{DELIVERY_PENDING_PREFIX}{failing}.")).await.is_empty());
    assert!(rows(format!("{DELIVERY_DONE_PREFIX}{failing}.")).await.is_empty());
    assert_eq!(
        rows(format!("{DELIVERY_DONE_PREFIX}{kept}.")).await.len(),
        1,
        "the other's stay"
    );
}

/// A run over a failing endpoint's backlog reads a page of it, not all of it: during an
/// outage every run, and every change's nudge, costs the same whatever the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_a_failing_endpoints_backlog_costs_the_same_whatever_its_size() {
    use crate::outgoing::HookEvent;
    use crate::store::outgoing::{HookEventRow, new_delivery};
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = with_webhooks(chat, &clock);
    let said = a_message(&chat, &room).await;
    let failing = register(&chat, &room, &serve(answering(500, Arc::default())).await).await;
    let mut costs = Vec::new();
    let mut made = 0;
    for size in [10u64, 2500] {
        for version in made..size {
            let event = HookEventRow {
                row_key: String::new(),
                event: HookEvent::Created,
                version: version + 1,
                message_id: said.clone(),
                message: serde_json::Value::Null,
            };
            let delivery = new_delivery(&failing, &event, "{}".into(), Utc::now());
            chat.wiring
                .store
                .outgoing
                .insert_delivery(&room, &delivery)
                .await
                .unwrap();
        }
        made = size;
        clock.advance(chrono::Duration::hours(2));
        let before = faults.calls();
        let report = chat.sending.deliver_webhooks().await.unwrap();
        assert_eq!(report.failed, 1, "{report:?}");
        costs.push(faults.calls() - before);
    }
    assert_eq!(costs[0], costs[1], "store calls of a run: {costs:?}");
}

/// A backlog longer than a page is still delivered in one run once the endpoint answers:
/// the run reads the next page when it posted the whole of one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_longer_than_a_page_is_delivered_in_one_run() {
    use crate::outgoing::HookEvent;
    use crate::store::outgoing::{HookEventRow, new_delivery};
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(FaultyTables::new(store()))).await;
    let chat = with_webhooks(chat, &clock);
    let said = a_message(&chat, &room).await;
    let posts: Arc<Mutex<Vec<Posted>>> = Arc::default();
    let hook = register(&chat, &room, &serve(answering(200, posts.clone())).await).await;
    for version in 1..=150u64 {
        let event = HookEventRow {
            row_key: String::new(),
            event: HookEvent::Created,
            version,
            message_id: said.clone(),
            message: serde_json::Value::Null,
        };
        let delivery = new_delivery(&hook, &event, "{}".into(), Utc::now());
        chat.wiring
            .store
            .outgoing
            .insert_delivery(&room, &delivery)
            .await
            .unwrap();
    }
    assert_eq!(chat.sending.deliver_webhooks().await.unwrap().delivered, 150);
    let posted: Vec<String> = posts.lock().unwrap().iter().map(|p| p.delivery.clone()).collect();
    let mut in_order = posted.clone();
    in_order.sort();
    assert_eq!(posted, in_order, "in the order of their changes");
    assert_eq!(posted.len(), 150);
}

/// A run that loses the claim of a delivery to another run stops there: posting the later
/// ones would overtake the one the other run is attempting, and an endpoint gets its events
/// in the order of their changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_loses_a_claim_posts_nothing_after_it() {
    use crate::outgoing::HookEvent;
    use crate::store::outgoing::{HookEventRow, new_delivery};
    let faults = FaultyTables::new(store());
    let clock = ManualClock::at(Utc::now());
    let (chat, room) = chat_on(Tables::new(faults.clone())).await;
    let chat = with_webhooks(chat, &clock);
    let said = a_message(&chat, &room).await;
    let posts: Arc<Mutex<Vec<Posted>>> = Arc::default();
    let hook = register(&chat, &room, &serve(answering(200, posts.clone())).await).await;
    for version in 1..=3u64 {
        let event = HookEventRow {
            row_key: String::new(),
            event: HookEvent::Created,
            version,
            message_id: said.clone(),
            message: serde_json::Value::Null,
        };
        let delivery = new_delivery(&hook, &event, "{}".into(), Utc::now());
        chat.wiring
            .store
            .outgoing
            .insert_delivery(&room, &delivery)
            .await
            .unwrap();
    }
    // The first claim is lost, as to another run that changed the row first.
    let rooms = chat.wiring.store.schema().rooms.clone();
    let lost = StoreError::new(ErrorKind::PreconditionFailed, "another run claimed it");
    faults.fail_operation("update", Some(&rooms), 1, lost);
    chat.sending.deliver_webhooks().await.unwrap();
    assert!(posts.lock().unwrap().is_empty(), "nothing overtakes the first");
    chat.sending.deliver_webhooks().await.unwrap();
    let posted: Vec<String> = posts.lock().unwrap().iter().map(|p| p.delivery.clone()).collect();
    let mut in_order = posted.clone();
    in_order.sort();
    assert_eq!(posted.len(), 3);
    assert_eq!(posted, in_order);
}

/// Whether a room's changes commit an event row comes from the counter the change's
/// transaction moves: an endpoint registered through another process gets the very next send
/// of a process that sent into the room before it existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_registered_through_another_process_gets_the_next_send() {
    let tables = Tables::new(FaultyTables::new(store()));
    let clock = ManualClock::at(Utc::now());
    let (a, room) = chat_on(tables.clone()).await;
    let a = with_webhooks(a, &clock);
    let b = sender_on(tables.clone()).await;
    a_message(&b, &room).await;
    assert_eq!(pending_events(&b, &room).await, 0);
    let (_receiver, url) = start_receiver().await;
    register(&a, &room, &url).await;
    a_message(&b, &room).await;
    assert_eq!(
        pending_events(&b, &room).await,
        1,
        "the send after the endpoint made its event"
    );
}

/// A counter from before the hooked flag: the listing of rooms with endpoints decides, and
/// the commit writes the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_from_before_the_hooked_flag_takes_it_from_the_listing() {
    let tables = Tables::new(FaultyTables::new(store()));
    let clock = ManualClock::at(Utc::now());
    let (a, room) = chat_on(tables.clone()).await;
    let a = with_webhooks(a, &clock);
    // The room's counter exists (a message was sent) before the endpoint.
    a_message(&a, &room).await;
    let (_receiver, url) = start_receiver().await;
    register(&a, &room, &url).await;
    let messages = a.wiring.store.schema().messages.clone();
    let mut counter = tables
        .get(&messages, room.as_str(), crate::store::schema::COUNTER_ROW)
        .await
        .unwrap()
        .unwrap();
    counter.properties.remove("hooked");
    tables
        .upsert(&messages, &counter, crate::storage::UpdateMode::Replace)
        .await
        .unwrap();
    let b = sender_on(tables.clone()).await;
    a_message(&b, &room).await;
    assert_eq!(pending_events(&b, &room).await, 1);
    let counter = b.wiring.store.ledger.counter(&room).await.unwrap();
    assert_eq!(counter.hooked, Some(true), "the commit wrote the flag");
}

/// A registration that stopped between its room's listing and the counter's hooked flag: the
/// next delivery run sets the flag, and the sends after it commit their events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_run_sets_the_hooked_flag_a_stopped_registration_left_unset() {
    let tables = Tables::new(FaultyTables::new(store()));
    let clock = ManualClock::at(Utc::now());
    let (a, room) = chat_on(tables.clone()).await;
    let a = with_webhooks(a, &clock);
    a_message(&a, &room).await;
    let (_receiver, url) = start_receiver().await;
    register(&a, &room, &url).await;
    a.wiring.store.ledger.set_hooked(&room, false).await.unwrap();
    a_message(&a, &room).await;
    assert_eq!(
        pending_events(&a, &room).await,
        0,
        "the flag unset, the send made no event"
    );
    a.sending.deliver_webhooks().await.unwrap();
    assert_eq!(a.wiring.store.ledger.counter(&room).await.unwrap().hooked, Some(true));
    // Sent by a process that delivers nothing itself, so no delivery run takes the event away.
    let b = sender_on(tables.clone()).await;
    a_message(&b, &room).await;
    assert_eq!(pending_events(&b, &room).await, 1);
}
