//! What search costs, in one run: sends per second at concurrency 32 to a server that writes
//! the word index and to one that does not (`TABLETALK_SEARCH_INDEX=off`), what SQLite alone
//! pays for the index rows (and for an FTS5 document instead), and the latency of
//! two-word queries over a corpus of messages in 50 rooms (100,000 on the embedded store;
//! 10,000 on Azurite, whose single Node process stores a few hundred sends a second).
//! Not a test: run it with
//!
//! ```text
//! cargo bench -p tabletalk-functions --bench search            # both backends
//! cargo bench -p tabletalk-functions --bench search -- embedded # one backend
//! cargo bench -p tabletalk-functions --bench search -- sends    # the send costs alone
//! ```
//!
//! `TABLETALK_BENCH_SEARCH_MESSAGES` overrides the corpus size. Azurite is found through
//! `TABLETALK_TEST_AZURITE` (default `UseDevelopmentStorage=true`).

mod support;

use std::time::Duration;

use futures::StreamExt as _;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{Backend, create_room, drive, p50_p99, token};
use tabletalk::ids::RoomId;
use tabletalk::messages::send::NewMessage;

const ROOMS: usize = 50;
/// Words in the corpus's vocabulary, drawn by a Zipf law (the word of rank r with weight
/// 1/r), as words in text are.
const VOCABULARY: usize = 5000;
const WORDS_A_MESSAGE: usize = 12;
/// Queries timed a word band: on Azurite, whose one Node process answers each of a page's
/// range reads in turn, fewer.
const QUERIES: [usize; 2] = [200, 20];
/// Sends per rate measurement at concurrency 32, each server measured twice, in turns.
const SENDS: usize = 30000;

fn principal(user: &str) -> tabletalk::auth::Principal {
    tabletalk::auth::Principal {
        user_id: tabletalk::ids::UserId::parse(user).unwrap(),
        name: user.to_owned(),
    }
}

/// Pseudo-words of 4 to 9 letters, the same every run.
fn vocabulary() -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(7);
    (0..VOCABULARY)
        .map(|_| {
            let len = rng.random_range(4..10);
            (0..len).map(|_| char::from(b'a' + rng.random_range(0..26u8))).collect()
        })
        .collect()
}

/// Draws words by the Zipf law over `words`.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        Zipf { cumulative }
    }

    fn draw(&self, rng: &mut StdRng) -> usize {
        let x = rng.random::<f64>() * self.cumulative.last().unwrap();
        self.cumulative.partition_point(|c| *c < x)
    }
}

fn sentence(words: &[String], zipf: &Zipf, rng: &mut StdRng) -> String {
    (0..WORDS_A_MESSAGE)
        .map(|_| words[zipf.draw(rng)].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends/s at concurrency 32 to a server writing the index and one that does not.
async fn send_cost(dir: &std::path::Path) {
    println!(
        "\nsends at concurrency 32, realistic text ({WORDS_A_MESSAGE} words), index off and on, each measured twice in turns:\n"
    );
    println!("| index | sends | sends/s (1st) | sends/s (2nd) | p50 ms | p99 ms | server CPU ms a send |");
    println!("|---|---|---|---|---|---|---|");
    let http = reqwest::Client::new();
    let alice = token("alice");
    let words = vocabulary();
    let zipf = std::sync::Arc::new(Zipf::new(VOCABULARY));
    let mut servers = Vec::new();
    for (label, setting) in [("off", "off"), ("on", "on")] {
        let backend = Backend::Embedded(dir.join(format!("sends-{label}")));
        std::fs::create_dir_all(dir.join(format!("sends-{label}"))).unwrap();
        let (server, base) = backend.spawn_with(false, None, &[("TABLETALK_SEARCH_INDEX", setting)]);
        let room = create_room(&http, &base, &alice, "sends").await;
        servers.push((label, server, format!("{base}/api/rooms/{room}/messages")));
    }
    let mut results: Vec<(Vec<f64>, Vec<Duration>)> = vec![(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    let mut cpu = [0.0f64; 2];
    for round in 0..2 {
        for (k, (_, server, url)) in servers.iter().enumerate() {
            let cpu_before = support::cpu_seconds(server.pid());
            let texts: Vec<String> = {
                let mut rng = StdRng::seed_from_u64(100 + round);
                (0..SENDS).map(|_| sentence(&words, &zipf, &mut rng)).collect()
            };
            let texts = std::sync::Arc::new(texts);
            let (http, url, alice) = (http.clone(), url.clone(), alice.clone());
            let (latencies, wall) = drive(32, SENDS, move |i| {
                let request = http.post(&url).bearer_auth(&alice).json(&json!({ "text": texts[i] }));
                async move {
                    let response = request.send().await.unwrap();
                    assert_eq!(response.status().as_u16(), 201);
                }
            })
            .await;
            cpu[k] += support::cpu_seconds(server.pid()) - cpu_before;
            results[k].0.push(SENDS as f64 / wall.as_secs_f64());
            results[k].1.extend(latencies);
        }
    }
    for (k, (label, _, _)) in servers.iter().enumerate() {
        let (p50, p99) = p50_p99(&mut results[k].1);
        println!(
            "| {label} | {SENDS} ×2 | {:.0} | {:.0} | {p50:.2} | {p99:.2} | {:.3} |",
            results[k].0[0],
            results[k].0[1],
            cpu[k] * 1e3 / (2 * SENDS) as f64
        );
    }
    let best = |k: usize| results[k].0.iter().cloned().fold(0.0, f64::max);
    println!("\nindex on ÷ off (best of each): {:.2}", best(1) / best(0));
}

/// What SQLite alone pays for the index, without the server around it: 30,000 messages in
/// transactions of 32 into a table shaped as the embedded store's (`shared/tables/src/sqlite`),
/// with no index, with a row per bucket as the word index writes, and with an FTS5 document
/// per message instead — the alternative `docs/decisions/0015-search.md` weighs.
fn sqlite_cost(dir: &std::path::Path) {
    const MESSAGES: usize = 30_000;
    let words = vocabulary();
    let zipf = Zipf::new(VOCABULARY);
    let mut rng = StdRng::seed_from_u64(3);
    let texts: Vec<String> = (0..MESSAGES).map(|_| sentence(&words, &zipf, &mut rng)).collect();
    println!(
        "
SQLite alone, {MESSAGES} messages of {WORDS_A_MESSAGE} words, transactions of 32 (synchronous=OFF):
"
    );
    println!("| index | µs a message | rows a message |");
    println!("|---|---|---|");
    let mut none = 0.0;
    for index in ["none", "a row per bucket", "FTS5 document"] {
        let path = dir.join(format!("sqlite-{}.db", index.replace(' ', "-")));
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;
             CREATE TABLE entities (tbl TEXT NOT NULL, pk TEXT NOT NULL, rk TEXT NOT NULL,
                 etag TEXT NOT NULL, ts TEXT NOT NULL, props TEXT NOT NULL,
                 PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID;
             CREATE VIRTUAL TABLE words USING fts5(terms, detail = none);",
        )
        .unwrap();
        let etag = "W/\"datetime'2026-12-05T00:00:00.0000000Z'00000000\"";
        let ts = "2026-12-05T00:00:00.0000000Z";
        let room = "6a6ddb24-ae7c-4901-a57f-50f52d603ab5";
        let mut rows = 0usize;
        let started = std::time::Instant::now();
        for (group, chunk) in texts.chunks(32).enumerate() {
            let tx = conn.unchecked_transaction().unwrap();
            let mut insert = tx
                .prepare_cached("INSERT INTO entities VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .unwrap();
            for (i, text) in chunk.iter().enumerate() {
                let key = format!("{:019}", 1_000_000_000_000_000_000u64 - (group * 32 + i) as u64);
                let props =
                    json!({ "text": format!("<p>{text}</p>"), "authorId": "alice", "padding": "x".repeat(500) });
                insert
                    .execute(rusqlite::params!["messages", room, key, etag, ts, props.to_string()])
                    .unwrap();
                rows += 1;
                match index {
                    "a row per bucket" => {
                        let buckets: std::collections::BTreeSet<String> =
                            text.split(' ').map(|w| w.chars().take(3).collect()).collect();
                        for bucket in buckets {
                            let terms = json!({ "terms": bucket }).to_string();
                            insert
                                .execute(rusqlite::params![
                                    "messages",
                                    room,
                                    format!("w:{bucket} {key}"),
                                    etag,
                                    ts,
                                    terms
                                ])
                                .unwrap();
                            rows += 1;
                        }
                    }
                    "FTS5 document" => {
                        tx.prepare_cached("INSERT INTO words (rowid, terms) VALUES (?1, ?2)")
                            .unwrap()
                            .execute(rusqlite::params![(group * 32 + i) as i64, text])
                            .unwrap();
                    }
                    _ => {}
                }
            }
            drop(insert);
            tx.commit().unwrap();
        }
        let micros = started.elapsed().as_secs_f64() * 1e6 / MESSAGES as f64;
        if index == "none" {
            none = micros;
        }
        println!(
            "| {index} | {micros:.1} ({:.1}× none) | {:.1} |",
            micros / none,
            rows as f64 / MESSAGES as f64
        );
    }
}

/// Seeds `messages` over `ROOMS` rooms in this process, then times two-word queries over HTTP.
async fn query_latency(backend: &Backend, messages: usize) {
    let queries = QUERIES[usize::from(backend.key() == "azurite")];
    let words = vocabulary();
    let zipf = Zipf::new(VOCABULARY);
    let chat = backend.chat().await;
    let alice = principal("alice");
    let mut rooms = Vec::new();
    for i in 0..ROOMS {
        let room = chat
            .rooms
            .create_room(
                &alice,
                tabletalk::rooms::NewRoom {
                    name: format!("room {i}"),
                    description: None,
                    visibility: tabletalk::rooms::Visibility::Public,
                },
            )
            .await
            .unwrap();
        rooms.push(RoomId::parse(&room.id).unwrap());
    }
    let mut rng = StdRng::seed_from_u64(1);
    let texts: Vec<String> = (0..messages).map(|_| sentence(&words, &zipf, &mut rng)).collect();
    let started = std::time::Instant::now();
    futures::stream::iter(texts.into_iter().enumerate())
        .map(|(i, text)| {
            let (chat, alice, room) = (&chat, &alice, &rooms[i % ROOMS]);
            async move {
                chat.sending
                    .send_message(alice, room, NewMessage::text(text))
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    println!(
        "\nseeded {messages} messages of {WORDS_A_MESSAGE} words in {ROOMS} rooms in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    // What one read of the index costs this store, the unit a query is made of.
    let mut reads = Vec::new();
    for i in 0..40 {
        let bucket: String = words[10 + i].chars().take(3).collect();
        let t = std::time::Instant::now();
        let (rows, _) = chat
            .store()
            .words
            .postings(&rooms[i % ROOMS], &bucket, std::ops::Bound::Unbounded, 25)
            .await
            .unwrap();
        reads.push(t.elapsed());
        assert!(!rows.is_empty());
    }
    let (read_p50, _) = p50_p99(&mut reads);
    println!("one range read of 25 index rows: p50 {read_p50:.2} ms");
    drop(chat);

    let (_server, base) = backend.spawn(false);
    let http = reqwest::Client::new();
    let alice = token("alice");
    println!("\ntwo-word queries (one page of 20, concurrency 1), {queries} each:\n");
    println!("| words drawn from ranks | p50 ms | p99 ms | results a page (mean) |");
    println!("|---|---|---|---|");
    for (low, high) in [(10, 100), (100, 1000), (1000, VOCABULARY)] {
        let mut rng = StdRng::seed_from_u64(low as u64);
        let mut latencies = Vec::new();
        let mut results = 0;
        for _ in 0..queries {
            let q = format!(
                "{} {}",
                words[rng.random_range(low..high)],
                words[rng.random_range(low..high)]
            );
            let t = std::time::Instant::now();
            let page: Value = http
                .get(format!("{base}/api/search"))
                .query(&[("q", q.as_str())])
                .bearer_auth(&alice)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            latencies.push(t.elapsed());
            results += page["results"].as_array().map_or(0, Vec::len);
        }
        let (p50, p99) = p50_p99(&mut latencies);
        println!(
            "| {low}–{high} | {p50:.1} | {p99:.1} | {:.1} |",
            results as f64 / queries as f64
        );
    }
}

#[tokio::main]
async fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let size = |default: usize| {
        std::env::var("TABLETALK_BENCH_SEARCH_MESSAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    if only.as_deref().is_none_or(|o| o == "embedded" || o == "sends") {
        println!("## embedded (SQLite, synchronous=FULL)");
        let dir = std::env::temp_dir().join(format!("tt-search-bench-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        send_cost(&dir).await;
        sqlite_cost(&dir);
        if only.as_deref() == Some("sends") {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        let corpus = Backend::Embedded(dir.join("corpus"));
        std::fs::create_dir_all(dir.join("corpus")).unwrap();
        query_latency(&corpus, size(100_000)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
    if only.as_deref().is_none_or(|o| o == "azurite") {
        println!("\n## Azurite 3.37 (in-memory)");
        let connection =
            std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".to_owned());
        query_latency(&Backend::azurite(connection), size(10_000)).await;
    }
}
