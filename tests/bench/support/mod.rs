//! What the benches share: the backends and the server processes they start, a driver that
//! keeps N calls in flight, percentiles, what a server process spent (CPU from
//! `/proc/<pid>/stat`, memory from `/proc/<pid>/status`) and an HTTP proxy in front of Azurite
//! that counts the store's requests. Each bench uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tabletalk::Chat;
use tabletalk::auth::mint_dev_token;
use tabletalk::storage::azure::AzureTables;
use tabletalk::storage::sqlite::{Durability, SqliteTables};
use tabletalk::storage::{Entity, TableName, Tables, Value};
use tabletalk::store::Schema;
use tokio::sync::Semaphore;

pub const SECRET: &str = "bench-secret";

/// A server process, killed when dropped.
pub struct Server(pub Child);

impl Server {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Clone)]
pub enum Backend {
    /// The data directory: the server's store is `tabletalk.sqlite` in it.
    Embedded(PathBuf),
    /// The connection string and the table prefix every server of this backend shares, so
    /// several processes serve one store.
    Azurite { connection: String, prefix: String },
}

impl Backend {
    pub fn azurite(connection: String) -> Backend {
        Backend::Azurite {
            connection,
            prefix: format!("b{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        }
    }

    pub fn key(&self) -> &'static str {
        match self {
            Backend::Embedded(_) => "embedded",
            Backend::Azurite { .. } => "azurite",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Embedded(_) => "embedded (SQLite, synchronous=FULL)",
            Backend::Azurite { .. } => "Azurite 3.37 (in-memory)",
        }
    }

    /// Raw tables beside the server's store (for the raw insert rate), not the store itself.
    pub fn tables(&self) -> Tables {
        match self {
            Backend::Embedded(dir) => {
                Tables::new(SqliteTables::open(dir.join("raw.sqlite"), Durability::Full).unwrap())
            }
            Backend::Azurite { connection, .. } => {
                Tables::new(AzureTables::from_connection_string(connection).unwrap())
            }
        }
    }

    /// The service in this process over the very store and tables the servers use, to seed
    /// large setups without HTTP. On the embedded store it runs with synchronous=NORMAL (a
    /// seed needs no durability); drop it before starting a server.
    pub async fn chat(&self) -> Chat {
        let (tables, prefix) = match self {
            Backend::Embedded(dir) => (
                Tables::new(SqliteTables::open(dir.join("tabletalk.sqlite"), Durability::Normal).unwrap()),
                "",
            ),
            Backend::Azurite { connection, prefix } => (
                Tables::new(AzureTables::from_connection_string(connection).unwrap()),
                prefix.as_str(),
            ),
        };
        Chat::open(tables, Schema::with_prefix(prefix).unwrap()).await.unwrap()
    }

    /// A server with the limits on or off; with them on, nobody is a newcomer (the senders
    /// have all just joined, and the newcomer rate is not what is measured).
    pub fn spawn(&self, limits: bool) -> (Server, String) {
        self.spawn_via(limits, None)
    }

    /// As [`Backend::spawn`], reaching Azurite through `connection` instead (a proxy).
    pub fn spawn_via(&self, limits: bool, connection: Option<&str>) -> (Server, String) {
        self.spawn_with(limits, connection, &[])
    }

    /// As [`Backend::spawn_via`], with `settings` in the server's environment besides.
    pub fn spawn_with(&self, limits: bool, connection: Option<&str>, settings: &[(&str, &str)]) -> (Server, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tabletalk"));
        command.envs(settings.iter().copied());
        command
            .args(["serve", "--port", "0", "--settings", "none"])
            .env("TABLETALK_WRITE_LIMITS", if limits { "on" } else { "off" })
            .env("TABLETALK_NEWCOMER_SECONDS", "0")
            .env("TABLETALK_JWT_SECRET", SECRET)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped());
        match self {
            Backend::Embedded(dir) => command
                .env("TABLETALK_DATA_DIR", dir)
                .env("TABLETALK_STORAGE_CONNECTION", ""),
            Backend::Azurite {
                connection: own,
                prefix,
            } => command
                .env("TABLETALK_STORAGE_CONNECTION", connection.unwrap_or(own))
                .env("TABLETALK_TABLE_PREFIX", prefix),
        };
        let mut child = command.spawn().expect("start tabletalk");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .trim_start_matches("listening on ")
            .replace("0.0.0.0", "127.0.0.1");
        (Server(child), format!("http://{addr}"))
    }
}

pub fn token(user: &str) -> String {
    mint_dev_token(SECRET, user, Some(user), Duration::from_secs(6 * 3600)).unwrap()
}

/// Runs `total` calls of `op` with at most `concurrency` in flight; returns per-call latencies
/// and the wall time.
pub async fn drive<F, Fut>(concurrency: usize, total: usize, op: F) -> (Vec<Duration>, Duration)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let permits = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let op = op.clone();
        tasks.spawn(async move {
            let t = Instant::now();
            op(i).await;
            drop(permit);
            t.elapsed()
        });
    }
    let latencies = tasks.join_all().await;
    (latencies, started.elapsed())
}

/// The `p` quantile of latencies sorted ascending.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// p50 and p99 in milliseconds, sorting `latencies`.
pub fn p50_p99(latencies: &mut [Duration]) -> (f64, f64) {
    latencies.sort();
    (
        percentile(latencies, 0.5).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
    )
}

/// Single-entity inserts per second through the `Tables` layer, no HTTP.
pub async fn raw_write_rate(tables: &Tables, concurrency: usize, total: usize) -> f64 {
    let table = TableName::parse(format!("raw{}", &uuid::Uuid::new_v4().simple().to_string()[..8])).unwrap();
    tables.create_table(&table).await.unwrap();
    let (writer, t) = (tables.clone(), table.clone());
    let (_, wall) = drive(concurrency, total, move |i| {
        let (tables, t) = (writer.clone(), t.clone());
        async move {
            let entity = Entity::new("room", format!("{i:019}"))
                .with(
                    "message",
                    Value::String("<p>hello, this is a benchmark message</p>".into()),
                )
                .with("userId", Value::String("alice".into()));
            tables.insert(&t, &entity).await.unwrap();
        }
    })
    .await;
    let _ = tables.delete_table(&table).await;
    total as f64 / wall.as_secs_f64()
}

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: the fields that follow come after its last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    // Fields 14 and 15 of proc(5) (utime, stime); the 3rd field (state) is fields[0].
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / clock_ticks()
}

/// CPU seconds (user + system) the calling thread has used so far, to the nanosecond
/// (`CLOCK_THREAD_CPUTIME_ID`; `/proc` counts in 10 ms ticks, too coarse for a short run).
pub fn thread_cpu_seconds() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid `timespec` for the call to write into.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// Resident memory of process `pid`, in MB (`VmRSS`).
pub fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// CPU used by `pids` together while `work` runs, in seconds.
pub async fn cpu_during<T>(pids: &[u32], work: impl std::future::Future<Output = T>) -> (T, f64) {
    let before: f64 = pids.iter().map(|&p| cpu_seconds(p)).sum();
    let out = work.await;
    let after: f64 = pids.iter().map(|&p| cpu_seconds(p)).sum();
    (out, after - before)
}

/// The process of Azurite's table service, found by its command line (`table/main.js`), to
/// read what it spends beside the servers; `None` when it is not on this machine.
pub fn azurite_table_pid() -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        (cmdline.contains("azurite") && cmdline.contains("table/main.js")).then_some(pid)
    })
}

/// An HTTP proxy in front of Azurite's table service that counts the requests passing
/// through it: a server reaching its store through it shows how many store calls a request
/// costs, counted from outside the server (GETs are reads).
pub struct CountingProxy {
    pub reads: Arc<AtomicUsize>,
    /// Reads per table (the path's first segment after the account, up to `(` or `?`).
    pub tables: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
    pub writes: Arc<AtomicUsize>,
    /// A connection string naming the proxy as the table endpoint, with Azurite's account.
    pub connection: String,
}

/// Azurite's well-known development account (public, the same for every install).
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

impl CountingProxy {
    /// A proxy forwarding to `upstream` (`http://127.0.0.1:10002`), on a free local port.
    pub async fn start(upstream: &str) -> CountingProxy {
        let reads = Arc::new(AtomicUsize::new(0));
        let writes = Arc::new(AtomicUsize::new(0));
        let tables = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
        // Node (Azurite) closes an idle connection after 5 s; a pooled one reused just then fails,
        // so idle connections are dropped sooner and a failed read is sent again.
        let client = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let upstream = upstream.trim_end_matches('/').to_owned();
        let (r, w, per_table) = (reads.clone(), writes.clone(), tables.clone());
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let (client, upstream, r, w) = (client.clone(), upstream.clone(), r.clone(), w.clone());
            let per_table = per_table.clone();
            async move {
                let (parts, body) = request.into_parts();
                if parts.method == axum::http::Method::GET {
                    r.fetch_add(1, Ordering::Relaxed);
                    let table = parts
                        .uri
                        .path()
                        .split('/')
                        .nth(2)
                        .unwrap_or("")
                        .split('(')
                        .next()
                        .unwrap_or("");
                    *per_table.lock().unwrap().entry(table.to_owned()).or_insert(0) += 1;
                } else {
                    w.fetch_add(1, Ordering::Relaxed);
                }
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
                let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                let mut headers = parts.headers.clone();
                headers.remove(axum::http::header::HOST);
                let attempts = if parts.method == axum::http::Method::GET { 3 } else { 1 };
                let mut reply = None;
                for _ in 0..attempts {
                    let sent = client
                        .request(parts.method.clone(), format!("{upstream}{path}"))
                        .headers(headers.clone())
                        .body(body.clone())
                        .send()
                        .await;
                    let failed = sent.is_err();
                    reply = Some(sent);
                    if !failed {
                        break;
                    }
                }
                let reply = reply.unwrap();
                let mut response = axum::http::Response::builder();
                match reply {
                    Ok(reply) => {
                        response = response.status(reply.status());
                        for (name, value) in reply.headers() {
                            if name != axum::http::header::TRANSFER_ENCODING
                                && name != axum::http::header::CONTENT_LENGTH
                            {
                                response = response.header(name, value);
                            }
                        }
                        let bytes = reply.bytes().await.unwrap_or_default();
                        response.body(axum::body::Body::from(bytes)).unwrap()
                    }
                    Err(_) => response.status(502).body(axum::body::Body::empty()).unwrap(),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        CountingProxy {
            reads,
            tables,
            writes,
            connection: format!(
                "DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};\
                 TableEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
            ),
        }
    }

    /// Reads and writes since the last call, and the reads per table.
    pub fn take(&self) -> (usize, usize, String) {
        let tables = std::mem::take(&mut *self.tables.lock().unwrap());
        let tables: Vec<String> = tables.iter().map(|(t, n)| format!("{t} {n}")).collect();
        (
            self.reads.swap(0, Ordering::Relaxed),
            self.writes.swap(0, Ordering::Relaxed),
            tables.join(", "),
        )
    }
}

/// Creates a room over HTTP; answers its id.
pub async fn create_room(http: &reqwest::Client, base: &str, token: &str, name: &str) -> String {
    let room: serde_json::Value = http
        .post(format!("{base}/api/rooms"))
        .bearer_auth(token)
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    room["id"].as_str().unwrap().to_owned()
}
