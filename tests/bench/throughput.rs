//! Send throughput and latency through HTTP, against the raw store's own write rate, for the
//! embedded store and for Azurite, measured in one run so the ratios are comparable on a noisy
//! machine; then the cost of the limits against abuse: the same sends, spread over 100 users
//! (so none reaches a limit), to a server with the limits off and to one with them on, in one
//! run. Not a test: run it with
//!
//! ```text
//! cargo bench -p tabletalk-functions --bench throughput            # both backends
//! cargo bench -p tabletalk-functions --bench throughput -- embedded # one backend
//! ```
//!
//! Azurite is found through `TABLETALK_TEST_AZURITE` (default `UseDevelopmentStorage=true`).

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{Backend, SECRET, drive, percentile, raw_write_rate};
use tabletalk::auth::mint_dev_token;

/// Sends per measurement at concurrency 1 and 32.
const SENDS: [(usize, usize); 2] = [(1, 300), (32, 2000)];
/// Senders the limits comparison spreads its sends over: 2000 sends are 20 each, within one
/// burst of the per-user bucket, so the limits are paid for but never refuse.
const SENDERS: usize = 100;

async fn bench(backend: Backend) {
    println!("\n## {}\n", backend.name());
    println!("| concurrency | sends | sends/s | p50 ms | p99 ms | raw inserts/s | sends/s ÷ raw inserts/s |");
    println!("|---|---|---|---|---|---|---|");
    let tables = backend.tables();
    // One user sends everything: with the limits on, the bucket would refuse after 40.
    let (_server, base) = backend.spawn(false);
    let http = reqwest::Client::new();
    let token = mint_dev_token(SECRET, "alice", Some("Alice"), Duration::from_secs(3600)).unwrap();
    let room: serde_json::Value = http
        .post(format!("{base}/api/rooms"))
        .bearer_auth(&token)
        .json(&json!({ "name": "bench" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = format!("{base}/api/rooms/{}/messages", room["id"].as_str().unwrap());
    for (concurrency, total) in SENDS {
        let raw = raw_write_rate(&tables, concurrency, total).await;
        let (http, url, token) = (http.clone(), url.clone(), token.clone());
        let (mut latencies, wall) = drive(concurrency, total, move |i| {
            let request = http
                .post(&url)
                .bearer_auth(&token)
                .json(&json!({ "text": format!("<p>hello, this is benchmark message {i}</p>") }));
            async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.status().as_u16(), 201);
            }
        })
        .await;
        latencies.sort();
        let rate = total as f64 / wall.as_secs_f64();
        println!(
            "| {concurrency} | {total} | {rate:.0} | {:.2} | {:.2} | {raw:.0} | {:.2} |",
            percentile(&latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            rate / raw
        );
    }
    catch_up(&http, &base, &token, room["id"].as_str().unwrap()).await;
    limits_cost(&backend).await;
}

/// Sends/s with the limits off and on, each server with its own room of `SENDERS` members,
/// measured one after the other at each concurrency.
async fn limits_cost(backend: &Backend) {
    println!("\nlimits off vs on ({SENDERS} senders, distinct texts):\n");
    println!("| concurrency | sends | off sends/s | on sends/s | on ÷ off |");
    println!("|---|---|---|---|---|");
    let http = reqwest::Client::new();
    let tokens: Vec<String> = (0..SENDERS)
        .map(|i| mint_dev_token(SECRET, &format!("sender{i}"), None, Duration::from_secs(3600)).unwrap())
        .collect();
    let mut servers = Vec::new();
    for limits in [false, true] {
        let (server, base) = backend.spawn(limits);
        let room: serde_json::Value = http
            .post(format!("{base}/api/rooms"))
            .bearer_auth(&tokens[0])
            .json(&json!({ "name": "limits", "visibility": "public" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let room = room["id"].as_str().unwrap().to_owned();
        for token in &tokens[1..] {
            let joined = http
                .post(format!("{base}/api/rooms/{room}/join"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(joined.status().as_u16(), 200);
        }
        servers.push((server, format!("{base}/api/rooms/{room}/messages")));
    }
    for (concurrency, total) in SENDS {
        let mut rates = Vec::new();
        for (run, (_, url)) in servers.iter().enumerate() {
            let (http, url, tokens) = (http.clone(), url.clone(), tokens.clone());
            let (_, wall) = drive(concurrency, total, move |i| {
                let request = http
                    .post(&url)
                    .bearer_auth(&tokens[i % SENDERS])
                    .json(&json!({ "text": format!("<p>run {run} at {concurrency}: message {i}</p>") }));
                async move {
                    let response = request.send().await.unwrap();
                    assert_eq!(response.status().as_u16(), 201);
                }
            })
            .await;
            rates.push(total as f64 / wall.as_secs_f64());
        }
        println!(
            "| {concurrency} | {total} | {:.0} | {:.0} | {:.2} |",
            rates[0],
            rates[1],
            rates[1] / rates[0]
        );
    }
}

/// A client catching up on the whole room from a null cursor through `messageChanges`
/// (limit 200, following `hasMore`): changes per second and requests needed.
async fn catch_up(http: &reqwest::Client, base: &str, token: &str, room: &str) {
    let started = Instant::now();
    let (mut cursor, mut changes, mut requests) = (serde_json::Value::Null, 0usize, 0usize);
    loop {
        let input = json!({ "serverId": "default", "limit": 200,
            "conversations": [{ "conversationId": room, "after": cursor }] });
        let reply: serde_json::Value = http
            .post(format!("{base}/api/messageChanges"))
            .bearer_auth(token)
            .json(&json!({ "input": input }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let entry = &reply["messageChanges"][0];
        requests += 1;
        changes += entry["changes"].as_array().unwrap().len();
        cursor = entry["cursor"].clone();
        if entry["hasMore"] != true {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "\ncatch-up from a null cursor: {changes} changes in {requests} requests, {:.0} changes/s, {:.1} ms per request",
        changes as f64 / seconds,
        seconds * 1e3 / requests as f64
    );
}

#[tokio::main]
async fn main() {
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let dir = std::env::temp_dir().join(format!("tt-bench-{}", uuid::Uuid::new_v4().simple()));
    let azurite = std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".into());
    println!(
        "# tabletalk send benchmark ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for backend in [Backend::Embedded(dir.clone()), Backend::azurite(azurite)] {
        if only.as_deref().is_none_or(|o| o == backend.key()) {
            bench(backend).await;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
