//! How far tabletalk is from its limits, in one run so the ratios are comparable on
//! a noisy machine: the disk's raw ceiling next to the sends, both backends' sends at
//! concurrency 1 and 32 with server CPU per send, the scale-out case on Azurite (four server
//! processes into one room and into 32 rooms), whether the cost stays flat as a room and a
//! member's room list grow, and the server's memory. Not a test: run it with
//!
//! ```text
//! cargo bench -p tabletalk-functions --bench headroom                   # everything
//! cargo bench -p tabletalk-functions --bench headroom -- embedded       # one backend
//! cargo bench -p tabletalk-functions --bench headroom -- --quick        # a smoke run
//! cargo bench -p tabletalk-functions --bench headroom -- listrooms      # listRooms on Azurite only
//! ```
//!
//! Sizes come from the environment (`--quick` or `TABLETALK_BENCH_QUICK=1` makes them small):
//! `TABLETALK_BENCH_SENDS` (sends at concurrency 32, 3000), `TABLETALK_BENCH_DEEP` (the deep
//! room's messages, 100000), `TABLETALK_BENCH_DEPTH` (the deep page's depth, 10000),
//! `TABLETALK_BENCH_ROOMS` (the listed member's rooms, 200), `TABLETALK_BENCH_SCALE_SENDS`
//! (sends per process in the scale-out case, 800). Azurite is found through
//! `TABLETALK_TEST_AZURITE` (default `UseDevelopmentStorage=true`); the store reads of
//! `listRooms` are counted by a proxy in front of `TABLETALK_BENCH_AZURITE_TABLES` (default
//! `http://127.0.0.1:10002`).

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    Backend, CountingProxy, Server, azurite_table_pid, cpu_during, drive, p50_p99, raw_write_rate, rss_mb,
    thread_cpu_seconds, token,
};
use tabletalk::Chat;
use tabletalk::ids::{RoomId, UserId};
use tabletalk::messages::send::NewMessage;
use tabletalk::principal::Principal;

/// Members of every room the sends go to: the sends are spread round-robin over them, so no
/// member row is raced by every send at once (one busy user is the throughput bench's case).
const SENDERS: usize = 32;
/// Rooms of the many-rooms scale-out case; room k is sender k's.
const SPREAD_ROOMS: usize = 32;
/// In-flight sends per server process in the scale-out case.
const SCALE_CONCURRENCY: usize = 8;
/// The rows a plain send writes on the embedded store (see `Sending::post` in
/// docs/ARCHITECTURE.md): the ascending index row, the message, its feed row, its outbox
/// event, the room's counter and activity rows, and the sender's member row (read position).
/// The ceiling writes as many, with the store's own table layout.
const SEND_ROWS: usize = 7;

struct Sizes {
    sends_1: usize,
    sends_32: usize,
    ceiling: usize,
    deep: usize,
    depth: usize,
    rooms: usize,
    scale: usize,
    pages: usize,
    lists: usize,
}

impl Sizes {
    fn from_env(quick: bool) -> Sizes {
        let get = |name: &str, full: usize, small: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if quick { small } else { full })
        };
        let deep = get("TABLETALK_BENCH_DEEP", 100_000, 3_000);
        Sizes {
            sends_1: if quick { 50 } else { 300 },
            sends_32: get("TABLETALK_BENCH_SENDS", 3000, 300),
            ceiling: if quick { 300 } else { 3000 },
            deep,
            depth: get("TABLETALK_BENCH_DEPTH", 10_000, 1_000).min(deep.saturating_sub(100)),
            rooms: get("TABLETALK_BENCH_ROOMS", 200, 20),
            scale: get("TABLETALK_BENCH_SCALE_SENDS", 800, 60),
            pages: if quick { 20 } else { 200 },
            lists: if quick { 5 } else { 30 },
        }
    }
}

fn principal(user: &str) -> Principal {
    Principal {
        user_id: UserId::parse(user).unwrap(),
        name: user.to_owned(),
    }
}

fn sender(k: usize) -> String {
    format!("sender{k}")
}

/// What raw SQLite achieves writing sends ([`raw_ceiling`]).
#[derive(Clone, Copy)]
struct Raw {
    /// Sends per second.
    rate: f64,
    /// CPU a send (user and system, of the writing thread), in ms: what the store alone costs,
    /// beside the server's whole send.
    cpu_ms: f64,
}

/// The raw ceiling: what raw SQLite (WAL, synchronous=FULL, the store's `entities` layout)
/// achieves writing [`SEND_ROWS`] rows per send, `per_transaction` sends per transaction, in a
/// file beside the store's (same disk, same settings).
fn raw_ceiling(dir: &Path, sends: usize, per_transaction: usize) -> Raw {
    let file = format!("ceiling-{}.sqlite", uuid::Uuid::new_v4().simple());
    let conn = rusqlite::Connection::open(dir.join(file)).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE IF NOT EXISTS entities (
             tbl TEXT NOT NULL, pk TEXT NOT NULL, rk TEXT NOT NULL,
             etag TEXT NOT NULL, ts TEXT NOT NULL, props TEXT NOT NULL,
             PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID;",
    )
    .unwrap();
    let message = json!({ "text": "<p>hello, this is a benchmark message</p>", "authorId": "alice",
        "authorName": "Alice", "type": "Message", "createdAt": "2026-12-01T12:00:00.000000Z",
        "version": 1, "mentions": "[]", "origin": "member" })
    .to_string();
    let small = json!({ "messageId": "0000000000000000001", "version": 1 }).to_string();
    let started = Instant::now();
    let cpu = thread_cpu_seconds();
    let mut i = 0;
    while i < sends {
        conn.prepare_cached("BEGIN IMMEDIATE").unwrap().execute([]).unwrap();
        let mut insert = conn
            .prepare_cached("INSERT INTO entities (tbl, pk, rk, etag, ts, props) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .unwrap();
        let mut replace = conn
            .prepare_cached(
                "INSERT OR REPLACE INTO entities (tbl, pk, rk, etag, ts, props) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .unwrap();
        for _ in 0..per_transaction.min(sends - i) {
            let key = format!("{:019}", u64::MAX / 2 - i as u64);
            let etag = format!("W/\"{i}\"");
            let ts = "2026-12-01T12:00:00.000000Z";
            for (table, row, props) in [
                ("MessagesAscending", key.clone(), "{}"),
                ("Messages", key.clone(), message.as_str()),
                ("Messages", format!("v:{key}"), small.as_str()),
                ("Messages", format!("outbox:{key}"), message.as_str()),
            ] {
                insert
                    .execute(rusqlite::params![table, "room", row, etag, ts, props])
                    .unwrap();
            }
            for (table, row, props) in [
                ("Messages", "counter", small.as_str()),
                ("Messages", "activity", message.as_str()),
                ("Members", "alice", small.as_str()),
            ] {
                replace
                    .execute(rusqlite::params![table, "room", row, etag, ts, props])
                    .unwrap();
            }
            i += 1;
        }
        conn.prepare_cached("COMMIT").unwrap().execute([]).unwrap();
    }
    debug_assert_eq!(SEND_ROWS, 7);
    Raw {
        rate: sends as f64 / started.elapsed().as_secs_f64(),
        cpu_ms: (thread_cpu_seconds() - cpu) * 1000.0 / sends as f64,
    }
}

/// A public room of `owner` with senders 0..`members` joined; answers its id.
async fn seed_room(chat: &Chat, owner: &str, name: &str, members: usize) -> RoomId {
    let input = serde_json::from_value(json!({ "name": name, "visibility": "public" })).unwrap();
    let room = chat.rooms.create_room(&principal(owner), input).await.unwrap();
    let id = RoomId::parse(&room.id).unwrap();
    for k in 0..members {
        if sender(k) != owner {
            chat.rooms.join_room(&principal(&sender(k)), &id).await.unwrap();
        }
    }
    id
}

/// `n` messages into `room` in this process, from the senders round-robin, 64 at a time.
async fn seed_messages(chat: &Chat, room: &RoomId, n: usize) {
    let (chat, room) = (chat.clone(), room.clone());
    drive(64, n, move |i| {
        let (chat, room) = (chat.clone(), room.clone());
        async move {
            let text = NewMessage::text(format!("<p>seed message {i}</p>"));
            chat.sending
                .send_message(&principal(&sender(i % SENDERS)), &room, text)
                .await
                .unwrap();
        }
    })
    .await;
}

/// `n` rooms of `owner`, one message in each.
async fn seed_member_of(chat: &Chat, owner: &str, n: usize) {
    let chat = chat.clone();
    let owner = owner.to_owned();
    drive(16, n, move |i| {
        let (chat, owner) = (chat.clone(), owner.clone());
        async move {
            let input = serde_json::from_value(json!({ "name": format!("listed {i}") })).unwrap();
            let room = chat.rooms.create_room(&principal(&owner), input).await.unwrap();
            let id = RoomId::parse(&room.id).unwrap();
            chat.sending
                .send_message(&principal(&owner), &id, NewMessage::text("<p>hello</p>"))
                .await
                .unwrap();
        }
    })
    .await;
}

/// One measured burst of sends.
struct Burst {
    sends: usize,
    rate: f64,
    p50: f64,
    p99: f64,
    /// Server CPU (every process of the burst together) per send, in ms.
    cpu_ms: f64,
    /// Azurite's CPU per send, in ms, when it runs on this machine (it also serves whatever
    /// else uses it meanwhile).
    store_cpu_ms: Option<f64>,
    /// Cores kept busy on average by the servers, Azurite and this client together.
    cores: f64,
    /// 503 answers, each retried with the same client id.
    unavailable: usize,
    /// Any other answer but 201 (a retry's 200 counts as success).
    failed: usize,
}

/// The server processes a burst goes to (`bases`, whose processes are `pids`), and Azurite's
/// process when its CPU is read too.
#[derive(Clone, Copy)]
struct Servers<'a> {
    http: &'a reqwest::Client,
    bases: &'a [String],
    pids: &'a [u32],
    store: Option<u32>,
}

/// `per_target` sends to each server in `bases` at once, `concurrency` in flight per server;
/// send i goes to `rooms[i % rooms.len()]` from `tokens[i % tokens.len()]`, with the client id
/// `{tag}-{server}-{i}` and the text [`burst_text`]. A 503 is counted and retried with the same
/// client id (as a client would), so every send should end up stored exactly once.
async fn burst(to: &Servers<'_>, rooms: &[String], concurrency: usize, per_target: usize, tag: &str) -> Burst {
    let Servers {
        http,
        bases,
        pids,
        store: azurite_pid,
    } = *to;
    let unavailable = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tokens: Arc<Vec<String>> = Arc::new((0..SENDERS).map(|k| token(&sender(k))).collect());
    let rooms = Arc::new(rooms.to_vec());
    let work = bases.iter().enumerate().map(|(t, base)| {
        let (http, base, tokens, rooms, tag) = (
            http.clone(),
            base.clone(),
            tokens.clone(),
            rooms.clone(),
            tag.to_owned(),
        );
        let (unavailable, failed) = (unavailable.clone(), failed.clone());
        drive(concurrency, per_target, move |i| {
            let url = format!("{base}/api/rooms/{}/messages", rooms[i % rooms.len()]);
            let body = json!({ "text": burst_text(&tag, t, i), "clientId": format!("{tag}-{t}-{i}") });
            let (http, token) = (http.clone(), tokens[i % tokens.len()].clone());
            let (unavailable, failed) = (unavailable.clone(), failed.clone());
            async move {
                for _ in 0..20 {
                    match http.post(&url).bearer_auth(&token).json(&body).send().await {
                        Ok(r) if r.status().is_success() => return,
                        Ok(r) if r.status().as_u16() == 503 => {
                            unavailable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    });
    let store = azurite_pid.into_iter().collect::<Vec<_>>();
    let client = [std::process::id()];
    let started = Instant::now();
    let ((((results, cpu), store_cpu), client_cpu), wall) = {
        let work = cpu_during(pids, futures::future::join_all(work));
        let work = cpu_during(&store, work);
        let out = cpu_during(&client, work).await;
        (out, started.elapsed())
    };
    let mut latencies: Vec<Duration> = results.into_iter().flat_map(|(l, _)| l).collect();
    let sends = latencies.len();
    let (p50, p99) = p50_p99(&mut latencies);
    Burst {
        sends,
        rate: sends as f64 / wall.as_secs_f64(),
        p50,
        p99,
        cpu_ms: cpu * 1e3 / sends as f64,
        store_cpu_ms: azurite_pid.map(|_| store_cpu * 1e3 / sends as f64),
        cores: (cpu + store_cpu + client_cpu) / wall.as_secs_f64(),
        unavailable: unavailable.load(std::sync::atomic::Ordering::Relaxed),
        failed: failed.load(std::sync::atomic::Ordering::Relaxed),
    }
}

fn burst_text(tag: &str, server: usize, i: usize) -> String {
    format!("<p>{tag} message {server}-{i}</p>")
}

/// One page of `room`, newest first: its messages' texts and the next cursor.
async fn page(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    room: &str,
    cursor: Option<&str>,
    limit: usize,
) -> (Vec<String>, Option<String>) {
    let mut query = vec![("limit", limit.to_string())];
    if let Some(cursor) = cursor {
        query.push(("cursor", cursor.to_owned()));
    }
    let reply: serde_json::Value = http
        .get(format!("{base}/api/rooms/{room}/messages"))
        .bearer_auth(token)
        .query(&query)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let texts = reply["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    let next = (reply["hasMore"] == true).then(|| reply["nextCursor"].as_str().unwrap().to_owned());
    (texts, next)
}

/// Of the sends of `tag` (`servers` × `per_target`), how many are missing from `rooms` and
/// how many are stored more than once; reads every message of every room (as the member the
/// sends of each room came from: room k of many is sender k's, a single room has them all).
async fn stored_once(
    http: &reqwest::Client,
    base: &str,
    rooms: &[String],
    tag: &str,
    servers: usize,
    per_target: usize,
) -> (usize, usize) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (k, room) in rooms.iter().enumerate() {
        let reader = token(&sender(k));
        let mut cursor = None;
        loop {
            let (texts, next) = page(http, base, &reader, room, cursor.as_deref(), 100).await;
            for text in texts {
                *seen.entry(text).or_default() += 1;
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    let (mut missing, mut doubled) = (0, 0);
    for t in 0..servers {
        for i in 0..per_target {
            match seen.get(&burst_text(tag, t, i)).copied().unwrap_or(0) {
                0 => missing += 1,
                1 => {}
                _ => doubled += 1,
            }
        }
    }
    (missing, doubled)
}

/// p50 and p99 of `calls` sequential `listRooms` of `user`, checking it lists `rooms`.
async fn list_rooms(http: &reqwest::Client, base: &str, user: &str, rooms: usize, calls: usize) -> (f64, f64) {
    let token = token(user);
    let mut latencies = Vec::new();
    for _ in 0..calls {
        let started = Instant::now();
        let list: serde_json::Value = http
            .get(format!("{base}/api/rooms"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        latencies.push(started.elapsed());
        assert_eq!(list.as_array().map(Vec::len), Some(rooms), "listRooms lists every room");
    }
    p50_p99(&mut latencies)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn store_cpu(b: &Burst) -> String {
    b.store_cpu_ms.map_or("–".into(), |ms| format!("{ms:.3}"))
}

fn send_table_header() {
    println!(
        "| concurrency | sends | 503s | sends/s | p50 ms | p99 ms | server CPU ms/send | Azurite CPU ms/send | cores busy | ceiling sends/s | ÷ ceiling |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
}

fn send_row(concurrency: usize, b: &Burst, ceiling: f64) {
    println!(
        "| {concurrency} | {} | {} | {:.0} | {:.2} | {:.2} | {:.3} | {} | {:.2} | {ceiling:.0} | {:.2} |",
        b.sends,
        b.unavailable,
        b.rate,
        b.p50,
        b.p99,
        b.cpu_ms,
        store_cpu(b),
        b.cores,
        b.rate / ceiling
    );
}

async fn embedded(dir: &Path, sizes: &Sizes, summary: &mut Vec<String>) {
    let backend = Backend::Embedded(dir.to_path_buf());
    println!("\n## {}\n", backend.name());
    // The ceiling is measured before and after the sends (an fsync's cost swings with what
    // else writes to the disk), and the sends are held against the mean of the two.
    let before = (
        raw_ceiling(dir, sizes.ceiling, 1),
        raw_ceiling(dir, sizes.ceiling * 8, 32),
    );

    let seeding = Instant::now();
    let chat = backend.chat().await;
    let room = seed_room(&chat, &sender(0), "sends", SENDERS).await;
    let empty = seed_room(&chat, &sender(0), "empty", SENDERS).await;
    let deep = seed_room(&chat, &sender(0), "deep", SENDERS).await;
    seed_messages(&chat, &deep, sizes.deep).await;
    seed_member_of(&chat, "lister", sizes.rooms).await;
    drop(chat);
    eprintln!("embedded: seeded in {}", secs(seeding.elapsed()));

    let (server, base) = backend.spawn(false);
    let pid = server.pid();
    let store_pid = None;
    let http = reqwest::Client::new();
    let idle = rss_mb(pid);
    let bases = [base.clone()];
    let single = Servers {
        http: &http,
        bases: &bases,
        pids: &[pid],
        store: store_pid,
    };

    let rooms = [room.as_str().to_owned()];
    let one = burst(&single, &rooms, 1, sizes.sends_1, "c1").await;
    let many = burst(&single, &rooms, 32, sizes.sends_32, "c32").await;
    let after = (
        raw_ceiling(dir, sizes.ceiling, 1),
        raw_ceiling(dir, sizes.ceiling * 8, 32),
    );
    let (ceiling_1, ceiling_32) = (
        (before.0.rate + after.0.rate) / 2.0,
        (before.1.rate + after.1.rate) / 2.0,
    );
    // The store's own CPU a send against the group size: a group commit of the server at
    // concurrency 32 holds a few sends (tests/bench/sends-per-fsync.sh counts them), not 32.
    let at_4 = raw_ceiling(dir, sizes.ceiling * 4, 4);
    let store_cpu = [
        (before.0.cpu_ms + after.0.cpu_ms) / 2.0,
        at_4.cpu_ms,
        (before.1.cpu_ms + after.1.cpu_ms) / 2.0,
    ];
    println!(
        "raw ceiling (raw SQLite, WAL, synchronous=FULL, {SEND_ROWS} rows a send, same directory), before and \
         after the sends: {:.0} and {:.0} sends/s at 1 send a transaction, {:.0} and {:.0} at 32 a \
         transaction; the ratios below use the means. Its CPU a send: {:.3} ms at 1 a transaction, \
         {:.3} at 4, {:.3} at 32\n",
        before.0.rate, after.0.rate, before.1.rate, after.1.rate, store_cpu[0], store_cpu[1], store_cpu[2]
    );
    send_table_header();
    send_row(1, &one, ceiling_1);
    send_row(32, &many, ceiling_32);
    let fsyncs = fsyncs_a_send_at_1();
    println!("\nfsyncs a send at concurrency 1 (tests/bench/sends-per-fsync.sh, a fresh store): {fsyncs}");
    summary.push(format!("embedded fsyncs a send at concurrency 1: {fsyncs} (target 1)"));
    summary.push(format!(
        "embedded sends ÷ raw ceiling ({ceiling_1:.0} and {ceiling_32:.0} sends/s): {:.2} at concurrency 1, {:.2} at 32 (target ≥ 0.50); p99 at 32 {:.1} ms (≤ 10); CPU/send {:.3} ms (≤ 0.10); p50 at 1 {:.2} ms (≤ 0.8)",
        one.rate / ceiling_1,
        many.rate / ceiling_32,
        many.p99,
        many.cpu_ms,
        one.p50
    ));
    summary.push(format!(
        "raw SQLite's own CPU a send (the store alone): {:.3} ms at 1 send a transaction, {:.3} at 4, {:.3} at 32; \
         the server's whole send {:.3} at concurrency 1 and {:.3} at 32",
        store_cpu[0], store_cpu[1], store_cpu[2], one.cpu_ms, many.cpu_ms
    ));

    // History pages at depth 0 and at `depth`, alternating.
    let reader = token(&sender(0));
    let mut cursor: Option<String> = None;
    for _ in 0..sizes.depth / 100 {
        cursor = page(&http, &base, &reader, deep.as_str(), cursor.as_deref(), 100)
            .await
            .1;
    }
    let (mut top, mut below) = (Vec::new(), Vec::new());
    for _ in 0..sizes.pages {
        let started = Instant::now();
        page(&http, &base, &reader, deep.as_str(), None, 50).await;
        top.push(started.elapsed());
        let started = Instant::now();
        page(&http, &base, &reader, deep.as_str(), cursor.as_deref(), 50).await;
        below.push(started.elapsed());
    }
    let ((t50, t99), (b50, b99)) = (p50_p99(&mut top), p50_p99(&mut below));
    println!("\nhistory page (50 messages) in a room of {} messages:\n", sizes.deep);
    println!("| depth | pages | p50 ms | p99 ms | p50 ÷ depth 0 |");
    println!("|---|---|---|---|---|");
    println!("| 0 | {} | {t50:.2} | {t99:.2} | 1.00 |", sizes.pages);
    println!(
        "| {} | {} | {b50:.2} | {b99:.2} | {:.2} |",
        sizes.depth,
        sizes.pages,
        b50 / t50
    );
    summary.push(format!(
        "page at depth {} ÷ depth 0 (p50): {:.2} (target ≤ 1.10)",
        sizes.depth,
        b50 / t50
    ));

    // Sends into the deep room against an empty one, alternating, two rounds.
    println!(
        "\nsends at concurrency 32 into a room of {} messages and into an empty room:\n",
        sizes.deep
    );
    println!("| round | empty sends/s | deep sends/s | deep ÷ empty |");
    println!("|---|---|---|---|");
    let (mut sum_empty, mut sum_deep) = (0.0, 0.0);
    for round in 1..=2 {
        let e = burst(
            &single,
            &[empty.as_str().to_owned()],
            32,
            sizes.sends_32,
            &format!("e{round}"),
        )
        .await;
        let d = burst(
            &single,
            &[deep.as_str().to_owned()],
            32,
            sizes.sends_32,
            &format!("d{round}"),
        )
        .await;
        println!("| {round} | {:.0} | {:.0} | {:.2} |", e.rate, d.rate, d.rate / e.rate);
        sum_empty += e.rate;
        sum_deep += d.rate;
    }
    summary.push(format!(
        "sends into a {}-message room ÷ an empty room: {:.2} (target ≥ 0.90)",
        sizes.deep,
        sum_deep / sum_empty
    ));

    let (l50, l99) = list_rooms(&http, &base, "lister", sizes.rooms, sizes.lists).await;
    println!(
        "\nlistRooms for a member of {} rooms: p50 {l50:.1} ms, p99 {l99:.1} ms ({} calls)",
        sizes.rooms, sizes.lists
    );
    let after = rss_mb(pid);
    println!("\nserver RSS: idle {idle:.1} MB, after the load {after:.1} MB");
    summary.push(format!(
        "embedded RSS: idle {idle:.1} MB (≤ 30), after the load {after:.1} MB (≤ 100); listRooms of {} rooms p50 {l50:.1} ms",
        sizes.rooms
    ));
    drop(server);
}

async fn azurite(connection: String, sizes: &Sizes, summary: &mut Vec<String>) {
    let backend = Backend::azurite(connection);
    println!("\n## {}\n", backend.name());
    let raw = backend.tables();
    let raw_1 = raw_write_rate(&raw, 1, sizes.sends_1).await;
    let raw_32 = raw_write_rate(&raw, 32, sizes.sends_32).await;
    println!("raw single-entity inserts (Tables layer, no HTTP): {raw_1:.0}/s at concurrency 1, {raw_32:.0}/s at 32\n");

    let seeding = Instant::now();
    let chat = backend.chat().await;
    let room = seed_room(&chat, &sender(0), "sends", SENDERS).await;
    let one_room = seed_room(&chat, &sender(0), "scale", SENDERS).await;
    let mut spread = Vec::new();
    for k in 0..SPREAD_ROOMS {
        spread.push(
            seed_room(&chat, &sender(k), &format!("spread {k}"), 0)
                .await
                .as_str()
                .to_owned(),
        );
    }
    seed_member_of(&chat, "lister", sizes.rooms).await;
    drop(chat);
    eprintln!("azurite: seeded in {}", secs(seeding.elapsed()));

    let (server, base) = backend.spawn(false);
    let pid = server.pid();
    let store_pid = azurite_table_pid();
    let http = reqwest::Client::new();
    let idle = rss_mb(pid);
    let bases = [base.clone()];
    let single = Servers {
        http: &http,
        bases: &bases,
        pids: &[pid],
        store: store_pid,
    };

    println!("(ceiling here: the raw insert rate at the same concurrency)\n");
    send_table_header();
    let rooms = [room.as_str().to_owned()];
    let one = burst(&single, &rooms, 1, sizes.sends_1, "c1").await;
    send_row(1, &one, raw_1);
    let many = burst(&single, &rooms, 32, sizes.sends_32, "c32").await;
    send_row(32, &many, raw_32);
    summary.push(format!(
        "Azurite sends/s: {:.0} at concurrency 1 (p50 {:.1} ms), {:.0} at 32 (p99 {:.1} ms); CPU/send {:.3} ms",
        one.rate, one.p50, many.rate, many.p99, many.cpu_ms
    ));

    azurite_list_rooms(&backend, &http, &base, sizes, summary).await;
    azurite_send_requests(&backend, &http, &room, summary).await;

    // Scale-out: one process, then four, at concurrency 8 each.
    let extra: Vec<(Server, String)> = (0..3).map(|_| backend.spawn(false)).collect();
    let mut processes_bases = vec![base.clone()];
    let mut pids = vec![pid];
    for (s, b) in &extra {
        processes_bases.push(b.clone());
        pids.push(s.pid());
    }
    println!(
        "\nscale-out on Azurite: server processes × concurrency {SCALE_CONCURRENCY}, {} sends a process, {SENDERS} senders; \
         a 503 is counted and retried with the same client id\n",
        sizes.scale
    );
    println!(
        "| rooms | processes | sends | 503s | other failures | missing | stored twice | sends/s | p50 ms | p99 ms | server CPU ms/send | Azurite CPU ms/send | cores busy | sends/s ÷ 1 process | p99 ÷ 1 process |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (label, rooms) in [("1", vec![one_room.as_str().to_owned()]), ("32", spread.clone())] {
        let mut single: Option<Burst> = None;
        for processes in [1, 4] {
            let tag = format!("s{label}p{processes}");
            let to = Servers {
                http: &http,
                bases: &processes_bases[..processes],
                pids: &pids[..processes],
                store: store_pid,
            };
            let b = burst(&to, &rooms, SCALE_CONCURRENCY, sizes.scale, &tag).await;
            let (missing, doubled) = stored_once(&http, &base, &rooms, &tag, processes, sizes.scale).await;
            let base_rate = single.as_ref().map_or(b.rate, |s| s.rate);
            let base_p99 = single.as_ref().map_or(b.p99, |s| s.p99);
            println!(
                "| {label} | {processes} | {} | {} | {} | {missing} | {doubled} | {:.0} | {:.1} | {:.1} | {:.3} | {} | {:.2} | {:.2} | {:.2} |",
                b.sends,
                b.unavailable,
                b.failed,
                b.rate,
                b.p50,
                b.p99,
                b.cpu_ms,
                store_cpu(&b),
                b.cores,
                b.rate / base_rate,
                b.p99 / base_p99
            );
            if processes == 4 {
                summary.push(format!(
                    "scale-out into {label} room(s): 4 processes ÷ 1: {:.2}× sends/s (target ≥ {}), p99 {:.2}× (≤ 5 for one room), {} 503s (target 0), missing {missing}, stored twice {doubled}; {:.2} cores busy",
                    b.rate / base_rate,
                    if rooms.len() == 1 { "1" } else { "1.5" },
                    b.p99 / base_p99,
                    b.unavailable,
                    b.cores
                ));
            }
            if single.is_none() {
                single = Some(b);
            }
        }
    }
    drop(extra);
    let after = rss_mb(pid);
    println!("\nserver RSS: idle {idle:.1} MB, after the load {after:.1} MB");
    summary.push(format!(
        "Azurite server RSS: idle {idle:.1} MB, after the load {after:.1} MB"
    ));
}

/// `listRooms` of the seeded "lister" on Azurite through the server at `base`: its latency, and
/// its store requests counted by a proxy in front of Azurite.
async fn azurite_list_rooms(
    backend: &Backend,
    http: &reqwest::Client,
    base: &str,
    sizes: &Sizes,
    summary: &mut Vec<String>,
) {
    // listRooms, and its store requests counted by a proxy in front of Azurite.
    let (l50, l99) = list_rooms(http, base, "lister", sizes.rooms, sizes.lists).await;
    let upstream = std::env::var("TABLETALK_BENCH_AZURITE_TABLES").unwrap_or_else(|_| "http://127.0.0.1:10002".into());
    let proxy = CountingProxy::start(&upstream).await;
    let (proxied, proxied_base) = backend.spawn_via(false, Some(&proxy.connection));
    // The proxied server's background work (housekeeping) may read meanwhile: of five calls
    // the fewest requests are the call's own.
    list_rooms(http, &proxied_base, "lister", sizes.rooms, 1).await;
    let mut counts = Vec::new();
    for _ in 0..5 {
        proxy.take();
        list_rooms(http, &proxied_base, "lister", sizes.rooms, 1).await;
        counts.push(proxy.take());
    }
    let (reads, writes, per_table) = counts.into_iter().min().unwrap();
    let per_table = match backend {
        Backend::Azurite { prefix, .. } => per_table.replace(prefix.as_str(), ""),
        Backend::Embedded(_) => per_table,
    };
    drop(proxied);
    println!(
        "\nlistRooms for a member of {} rooms: p50 {l50:.1} ms, p99 {l99:.1} ms ({} calls); one call makes \
         {reads} store reads ({per_table}) and {writes} writes (counted by a proxy in front of Azurite; {:.2} reads a room)",
        sizes.rooms,
        sizes.lists,
        reads as f64 / sizes.rooms as f64
    );
    summary.push(format!(
        "listRooms of {} rooms: {reads} store reads, {writes} writes (Azurite, counted at a proxy)",
        sizes.rooms
    ));
}

/// The store requests of one plain send by a member on Azurite, counted by a proxy in front of
/// it: the fewest of five sends one after another, so the proxied server's own background
/// work (housekeeping timers) does not count.
async fn azurite_send_requests(backend: &Backend, http: &reqwest::Client, room: &RoomId, summary: &mut Vec<String>) {
    let upstream = std::env::var("TABLETALK_BENCH_AZURITE_TABLES").unwrap_or_else(|_| "http://127.0.0.1:10002".into());
    let proxy = CountingProxy::start(&upstream).await;
    let (proxied, base) = backend.spawn_via(false, Some(&proxy.connection));
    let url = format!("{base}/api/rooms/{room}/messages");
    let token = token(&sender(1));
    let send = |i: usize| {
        let body = json!({ "text": format!("counted {i}"), "clientId": format!("counted-{i}") });
        http.post(&url).bearer_auth(&token).json(&body).send()
    };
    // The first send warms the process's caches, as a running server has them; then the
    // count waits for the process's start-up housekeeping (a pass over every room) to end.
    assert!(send(0).await.unwrap().status().is_success());
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (reads, writes, _) = proxy.take();
        if reads + writes == 0 {
            break;
        }
    }
    let mut counts = Vec::new();
    for i in 1..=5 {
        proxy.take();
        assert!(send(i).await.unwrap().status().is_success());
        // What the send does after its answer counts too.
        tokio::time::sleep(Duration::from_millis(300)).await;
        counts.push(proxy.take());
    }
    drop(proxied);
    let (reads, writes, per_table) = counts.into_iter().min_by_key(|(r, w, _)| r + w).unwrap();
    let per_table = match backend {
        Backend::Azurite { prefix, .. } => per_table.replace(prefix.as_str(), ""),
        Backend::Embedded(_) => per_table,
    };
    println!(
        "\na plain send makes {} store requests: {reads} reads, {writes} writes ({per_table}; counted by a proxy, after-the-answer work included)",
        reads + writes
    );
    summary.push(format!(
        "Azure requests a plain send: {} ({reads} reads, {writes} writes; target ≤ 4)",
        reads + writes
    ));
}

/// Fsyncs a send of the embedded server at concurrency 1, counted by
/// `tests/bench/sends-per-fsync.sh` (perf's system-call tracepoints; needs root and perf), or
/// why it could not be counted.
fn fsyncs_a_send_at_1() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/bench/sends-per-fsync.sh");
    let out = std::process::Command::new("bash")
        .args([script, env!("CARGO_BIN_EXE_tabletalk"), "1", "3"])
        .output();
    let Ok(out) = out else {
        return "not counted (bash is missing)".into();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "c=1: N sends, X sends per fsync; server CPU …"
    let per_fsync = text
        .split([',', ';'])
        .find_map(|part| part.trim().strip_suffix(" sends per fsync"))
        .and_then(|n| n.parse::<f64>().ok());
    match per_fsync {
        Some(n) if n > 0.0 => format!("{:.2} ({text})", 1.0 / n, text = text.trim()),
        _ => format!("not counted: {}", String::from_utf8_lossy(&out.stderr).trim()),
    }
}

/// Only `listRooms` on Azurite (`-- listrooms`): the lister's rooms seeded, one server, the
/// same measurement as in the whole Azurite half.
async fn azurite_list_rooms_only(connection: String, sizes: &Sizes, summary: &mut Vec<String>) {
    let backend = Backend::azurite(connection);
    println!("\n## {} (listRooms only)\n", backend.name());
    let seeding = Instant::now();
    let chat = backend.chat().await;
    seed_member_of(&chat, "lister", sizes.rooms).await;
    drop(chat);
    eprintln!("azurite: seeded in {}", secs(seeding.elapsed()));
    let (_server, base) = backend.spawn(false);
    let http = reqwest::Client::new();
    azurite_list_rooms(&backend, &http, &base, sizes, summary).await;
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick") || std::env::var("TABLETALK_BENCH_QUICK").is_ok_and(|v| v == "1");
    let only = args.iter().find(|a| !a.starts_with("--")).cloned();
    let sizes = Sizes::from_env(quick);
    let dir = std::env::temp_dir().join(format!("tt-headroom-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "# tabletalk headroom benchmark ({} cores{})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick { ", quick sizes" } else { "" }
    );
    let mut summary = Vec::new();
    if only.as_deref().is_none_or(|o| o == "embedded") {
        embedded(&dir, &sizes, &mut summary).await;
    }
    if only.as_deref() == Some("listrooms") {
        let connection =
            std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".into());
        azurite_list_rooms_only(connection, &sizes, &mut summary).await;
    }
    if only.as_deref().is_none_or(|o| o == "azurite") {
        let connection =
            std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".into());
        azurite(connection, &sizes, &mut summary).await;
    }
    println!("\n## Against the targets (ratios within this run)\n");
    for line in summary {
        println!("- {line}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
