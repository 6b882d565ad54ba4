//! `spawn_app()`: the real binary on a random port with isolated storage (a temporary data
//! directory, or a random table prefix on Azurite), plus a small HTTP client for the API.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

pub mod messages;
pub mod web_pubsub;

pub const SECRET: &str = "end-to-end-test-secret";

/// Which store a test app runs on.
#[derive(Debug, Clone)]
pub enum Backend {
    Embedded {
        data_dir: PathBuf,
    },
    /// `blob`: the blob service's connection string; the app's attachments go in a container
    /// named after `prefix`, so listing it shows this test's objects alone.
    Azurite {
        connection: String,
        prefix: String,
        blob: String,
    },
}

impl Backend {
    pub fn embedded() -> Backend {
        Backend::Embedded {
            data_dir: std::env::temp_dir().join(format!("tt-e2e-{}", uuid::Uuid::new_v4().simple())),
        }
    }

    /// Azurite, when the backend matrix's rule runs it (`storage::matrix::azurite_account`:
    /// always under `CI`, where an unreachable Azurite fails the test).
    pub fn azurite() -> Option<Backend> {
        let connection = tabletalk::storage::matrix::azurite_account()?;
        let prefix = format!("e{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        // The blob service: `tests/run` starts it and names it; under CI it must be named.
        let blob = match std::env::var("TABLETALK_TEST_AZURITE_BLOB") {
            Ok(blob) if !blob.is_empty() => blob,
            _ if std::env::var_os("CI").is_some() => {
                panic!("TABLETALK_TEST_AZURITE_BLOB is not set and CI is set: run the tests through tests/run")
            }
            _ => "UseDevelopmentStorage=true".to_owned(),
        };
        Some(Backend::Azurite {
            connection,
            prefix,
            blob,
        })
    }
}

/// Runs each named `async fn(Backend)` of the calling module once per backend, through the
/// one backend matrix (`storage::backend_matrix!`), as `embedded::<name>` and
/// `azurite::<name>`.
macro_rules! backend_tests {
    ($($name:ident),+ $(,)?) => {
        tabletalk::storage::backend_matrix!(
            embedded: $crate::helpers::Backend::embedded(),
            azurite: $crate::helpers::Backend::azurite();
            $($name),+
        );
    };
}
pub(crate) use backend_tests;

impl Backend {
    /// The service over the same store a test app uses, for what HTTP cannot do: reading the
    /// raw tables, or writing the lines only the server and webhooks write.
    pub async fn chat(&self) -> tabletalk::Chat {
        use tabletalk::storage::Tables;
        use tabletalk::store::schema::Schema;
        let (tables, prefix) = match self {
            Backend::Embedded { data_dir } => {
                let store = tabletalk::storage::sqlite::SqliteTables::open(
                    data_dir.join("tabletalk.sqlite"),
                    tabletalk::storage::sqlite::Durability::Normal,
                )
                .expect("open the embedded store");
                (Tables::new(store), "")
            }
            Backend::Azurite { connection, prefix, .. } => {
                let store = tabletalk::storage::azure::AzureTables::from_connection_string(connection)
                    .expect("connect to Azurite");
                (Tables::new(store), prefix.as_str())
            }
        };
        let attachments = tabletalk::service::attachments::AttachmentSettings {
            objects: self.objects().await,
            embedded: None,
            rules: tabletalk::attachments::AttachmentRules::default(),
            clock: std::sync::Arc::new(tabletalk::adapters::clock::SystemClock),
        };
        tabletalk::Chat::open(tables, Schema::with_prefix(prefix).unwrap())
            .await
            .expect("open the service")
            .with_attachments(attachments)
    }
}

impl Backend {
    /// The object store a test app on this backend keeps attachments in, to list what is
    /// stored (its links are not the app's: the embedded store's base URL is a placeholder).
    pub async fn objects(&self) -> tabletalk::adapters::objects::Objects {
        use tabletalk::adapters::objects::Objects;
        let objects = match self {
            Backend::Embedded { data_dir } => Objects::new(
                tabletalk::adapters::objects::embedded::EmbeddedObjects::open(data_dir, "http://unused")
                    .expect("open the embedded object store"),
            ),
            Backend::Azurite { prefix, blob, .. } => Objects::new(
                tabletalk::adapters::objects::azure_blob::AzureBlobObjects::from_connection_string(blob, prefix)
                    .expect("connect to Azurite's blob service"),
            ),
        };
        objects.prepare().await.expect("prepare the object store");
        objects
    }
}

/// The principal a test token for `user` authenticates as.
pub fn principal(user: &str) -> tabletalk::auth::Principal {
    tabletalk::auth::Principal {
        user_id: tabletalk::ids::UserId::parse(user).unwrap(),
        name: format!("{user} (test)"),
    }
}

/// A value `tests/run` provides through the environment (a tool it installed, a service it
/// started): `None`, with a note, outside CI when it is missing; under CI a missing one fails
/// the test, which never skips there.
pub fn provided(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Some(value),
        _ if std::env::var_os("CI").is_some() => panic!("{name} is not set: run the tests through tests/run"),
        _ => {
            eprintln!("skipping: {name} is not set (tests/run sets it)");
            None
        }
    }
}

/// A running server process; killed on drop.
pub struct TestApp {
    pub base: String,
    child: Child,
    pub http: reqwest::Client,
    /// The secret `call` signs its tokens with: the app's `TABLETALK_JWT_SECRET`.
    pub secret: String,
}

impl TestApp {
    /// The server's peak resident memory so far, in KiB (`VmHWM` of `/proc/<pid>/status`).
    pub fn peak_memory_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("the server runs");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status")
    }
}

impl TestApp {
    /// One invocation of the timer function `function` as the Functions host makes it; its
    /// log line.
    pub async fn run_timer(&self, function: &str) -> String {
        let invocation = json!({
            "Data": { "timer": { "Schedule": { "AdjustForDST": true }, "IsPastDue": false } },
            "Metadata": { "sys": { "MethodName": function, "UtcNow": chrono::Utc::now(), "RandGuid": "x" } }
        });
        let reply = self
            .http
            .post(format!("{}/{function}", self.base))
            .json(&invocation)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::OK, "{function}");
        let body: Value = reply.json().await.unwrap();
        body["Logs"][0].as_str().unwrap_or_default().to_owned()
    }
}

impl TestApp {
    /// Sends the server SIGTERM, as a service manager stopping it does, and waits (up to a
    /// minute) for it to exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM was not sent");
        for _ in 0..600 {
            if let Some(status) = self.child.try_wait().expect("the server's status") {
                return status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the server did not exit within a minute of SIGTERM");
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary on `backend` and waits until it listens.
pub fn spawn_app(backend: &Backend) -> TestApp {
    spawn_app_with(backend, &[])
}

/// `spawn_app` with extra settings. The limits against abuse are off unless a test turns them
/// on (`TABLETALK_WRITE_LIMITS=on`, as tests/api/limits.rs does): the other tests send the same
/// text many times and hundreds of messages a second, which is not what they test.
pub fn spawn_app_with(backend: &Backend, settings: &[(&str, &str)]) -> TestApp {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tabletalk"));
    command
        .args(["serve", "--port", "0", "--settings", "none"])
        .env_remove("FUNCTIONS_CUSTOMHANDLER_PORT")
        .env("TABLETALK_JWT_SECRET", SECRET)
        .env("TABLETALK_WRITE_LIMITS", "off")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    match backend {
        Backend::Embedded { data_dir } => {
            command
                .env("TABLETALK_DATA_DIR", data_dir)
                .env("TABLETALK_STORAGE_CONNECTION", "")
                .env("TABLETALK_SQLITE_SYNC", "normal");
        }
        Backend::Azurite {
            connection,
            prefix,
            blob,
        } => {
            command
                .env("TABLETALK_STORAGE_CONNECTION", connection)
                .env("TABLETALK_TABLE_PREFIX", prefix)
                .env("TABLETALK_BLOB_CONNECTION", blob)
                .env("TABLETALK_ATTACHMENTS_CONTAINER", prefix);
        }
    }
    // Last, so a test's settings win (`FUNCTIONS_CUSTOMHANDLER_PORT=0` makes a custom handler).
    command.envs(settings.iter().copied());
    let mut child = command.spawn().expect("start tabletalk");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("tabletalk did not start: {line:?}"))
        .replace("0.0.0.0", "127.0.0.1");
    let secret = settings
        .iter()
        .find(|(name, _)| *name == "TABLETALK_JWT_SECRET")
        .map_or(SECRET, |(_, secret)| *secret);
    TestApp {
        base: format!("http://{addr}"),
        child,
        http: reqwest::Client::new(),
        secret: secret.to_owned(),
    }
}

/// The test clock: a file of Unix milliseconds that the test and the servers it starts read
/// (`TABLETALK_TEST_CLOCK_FILE`), so a test moves time instead of sleeping. A server reads it
/// only with the published development secret ([`TestClock::settings`] sets both).
pub struct TestClock {
    pub path: std::path::PathBuf,
    now_ms: i64,
}

impl TestClock {
    /// A clock at the system's time now.
    pub fn new() -> TestClock {
        let path = std::env::temp_dir().join(format!("tt-clock-{}", uuid::Uuid::new_v4().simple()));
        let clock = TestClock {
            path,
            now_ms: chrono::Utc::now().timestamp_millis(),
        };
        clock.write();
        clock
    }

    fn write(&self) {
        std::fs::write(&self.path, self.now_ms.to_string()).expect("write the test clock");
    }

    pub fn advance_ms(&mut self, ms: i64) {
        self.now_ms += ms;
        self.write();
    }

    pub fn advance_s(&mut self, seconds: i64) {
        self.advance_ms(seconds * 1000);
    }

    /// `seconds` from the clock's now, as RFC 3339.
    pub fn at(&self, seconds: i64) -> String {
        let at = chrono::DateTime::from_timestamp_millis(self.now_ms + seconds * 1000).unwrap();
        at.to_rfc3339()
    }

    /// A server reading this clock, with `extra` settings.
    pub fn spawn(&self, backend: &Backend, extra: &[(&str, &str)]) -> TestApp {
        let mut settings = self.settings().to_vec();
        settings.extend_from_slice(extra);
        spawn_app_with(backend, &settings)
    }

    /// The settings that make a server read this clock.
    pub fn settings(&self) -> [(&'static str, &str); 2] {
        [
            ("TABLETALK_JWT_SECRET", tabletalk::config::DEVELOPMENT_JWT_SECRET),
            (
                "TABLETALK_TEST_CLOCK_FILE",
                self.path.to_str().expect("a UTF-8 temporary path"),
            ),
        ]
    }
}

impl Drop for TestClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fresh VAPID private key, as `TABLETALK_VAPID_PRIVATE_KEY` takes it (base64url).
pub fn vapid_key() -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    B64.encode(p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng).to_bytes())
}

/// `spawn_app_with` sending Web Push: a fresh VAPID key, and push services on loopback (the
/// tests' stand-ins) allowed.
pub fn spawn_push_app(backend: &Backend, settings: &[(&str, &str)]) -> TestApp {
    let vapid = vapid_key();
    let mut all = vec![
        ("TABLETALK_VAPID_PRIVATE_KEY", vapid.as_str()),
        ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "true"),
    ];
    all.extend_from_slice(settings);
    spawn_app_with(backend, &all)
}

/// `spawn_push_app` as a Functions custom handler, the app the Event Grid tests invoke: its
/// notifications run in the `notify` function and the webhook, and its timers on invocation.
pub fn spawn_push_handler(backend: &Backend, settings: &[(&str, &str)]) -> TestApp {
    let mut all = vec![("FUNCTIONS_CUSTOMHANDLER_PORT", "0")];
    all.extend_from_slice(settings);
    spawn_push_app(backend, &all)
}

/// A development token for `user`, valid for an hour.
pub fn token(user: &str) -> String {
    token_with(user, SECRET, 3600)
}

pub fn token_with(user: &str, secret: &str, ttl_secs: i64) -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let exp = chrono::Utc::now().timestamp() + ttl_secs;
    let claims = B64.encode(json!({ "sub": user, "name": format!("{user} (test)"), "exp": exp }).to_string());
    let signing_input = format!("{header}.{claims}");
    let signature = hmac_sha256(secret.as_bytes(), signing_input.as_bytes());
    format!("{signing_input}.{}", B64.encode(signature))
}

/// HMAC-SHA256 through the binary's own dependency tree would couple the test to it; this
/// uses the `hmac`/`sha2` crates directly.
fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// A response: status and JSON body (`Null` when there is none).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl TestApp {
    pub async fn call(&self, method: Method, path: &str, user: Option<&str>, body: Option<Value>) -> Reply {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(user) = user {
            request = request.bearer_auth(token_with(user, &self.secret, 3600));
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        Reply::from(request.send().await.expect("request")).await
    }

    pub async fn create_room(&self, owner: &str) -> String {
        let reply = self
            .call(
                Method::POST,
                "/api/rooms",
                Some(owner),
                Some(json!({ "name": "general", "visibility": "public" })),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    /// `owner` kicks `user` out of `room`; the kick must succeed.
    pub async fn kick(&self, owner: &str, room: &str, user: &str) {
        let path = format!("/rooms/{room}/members/{user}/kick");
        let kicked = self.act(Method::POST, owner, &path, json!({})).await;
        assert!(kicked.status.is_success(), "{}", kicked.body);
    }

    pub async fn join(&self, user: &str, room: &str) {
        let reply = self
            .call(Method::POST, &format!("/api/rooms/{room}/join"), Some(user), None)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }

    /// A request to `/api{path}` as `user` with a JSON body.
    pub async fn act(&self, method: Method, user: &str, path: &str, body: Value) -> Reply {
        self.call(method, &format!("/api{path}"), Some(user), Some(body)).await
    }

    /// `user` runs the command line `text` in `room` (`runCommand`), with `client_id` if given.
    pub async fn command(&self, user: &str, room: &str, text: &str, client_id: Option<&str>) -> Reply {
        let mut body = json!({ "text": text });
        if let Some(id) = client_id {
            body["clientId"] = json!(id);
        }
        self.act(Method::POST, user, &format!("/rooms/{room}/commands"), body)
            .await
    }

    /// The room's moderation log as `user` reads it (`readModerationLog`).
    pub async fn moderation_log(&self, user: &str, room: &str) -> Reply {
        self.call(
            Method::GET,
            &format!("/api/rooms/{room}/moderation-log"),
            Some(user),
            None,
        )
        .await
    }

    /// Gives `user` a new role with `permissions` at `position`, as the room's owner.
    pub async fn grant(&self, owner: &str, room: &str, user: &str, permissions: &[&str], position: u32) -> String {
        let role = self
            .act(
                Method::POST,
                owner,
                &format!("/rooms/{room}/roles"),
                json!({ "name": format!("{user}-role"), "permissions": permissions, "position": position }),
            )
            .await;
        assert_eq!(role.status, StatusCode::CREATED, "{}", role.body);
        let id = role.body["id"].as_str().unwrap().to_owned();
        let assigned = self
            .act(
                Method::PUT,
                owner,
                &format!("/rooms/{room}/members/{user}/roles"),
                json!({ "roleIds": [id] }),
            )
            .await;
        assert_eq!(assigned.status, StatusCode::OK, "{}", assigned.body);
        id
    }

    /// `user`'s entry in the member listing of `room`, as `viewer` sees it.
    pub async fn member(&self, viewer: &str, room: &str, user: &str) -> Option<Value> {
        let members = self
            .call(Method::GET, &format!("/api/rooms/{room}/members"), Some(viewer), None)
            .await;
        assert_eq!(members.status, StatusCode::OK, "{}", members.body);
        members.body.as_array()?.iter().find(|m| m["userId"] == user).cloned()
    }

    /// One `messageChanges` call: `conversations` is a list of `[roomId, after]` pairs.
    pub async fn changes(&self, user: &str, conversations: &[(&str, Option<&str>)], limit: Option<i64>) -> Reply {
        let conversations: Vec<Value> = conversations
            .iter()
            .map(|(id, after)| json!({ "conversationId": id, "after": after }))
            .collect();
        let mut input = json!({ "serverId": "default", "conversations": conversations });
        if let Some(limit) = limit {
            input["limit"] = json!(limit);
        }
        self.act(Method::POST, user, "/messageChanges", json!({ "input": input }))
            .await
    }

    /// Sends `text` and returns the stored message's id (the send must succeed).
    pub async fn post(&self, user: &str, room: &str, text: &str) -> String {
        let reply = self.send(user, room, text, None).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    pub async fn send(&self, user: &str, room: &str, text: &str, client_id: Option<&str>) -> Reply {
        let mut body = json!({ "text": text });
        if let Some(id) = client_id {
            body["clientId"] = json!(id);
        }
        self.call(
            Method::POST,
            &format!("/api/rooms/{room}/messages"),
            Some(user),
            Some(body),
        )
        .await
    }

    /// Every message of a room, following `nextCursor` while `hasMore`, in `order`.
    pub async fn read_all(&self, user: &str, room: &str, order: &str, limit: usize) -> Vec<Value> {
        let mut messages = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut path = format!("/api/rooms/{room}/messages?order={order}&limit={limit}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let reply = self.call(Method::GET, &path, Some(user), None).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            let page = reply.body["messages"].as_array().unwrap().clone();
            assert!(page.len() <= limit);
            messages.extend(page);
            if !reply.body["hasMore"].as_bool().unwrap() {
                return messages;
            }
            cursor = Some(
                reply.body["nextCursor"]
                    .as_str()
                    .expect("a cursor while hasMore")
                    .to_owned(),
            );
        }
        panic!("paging did not end");
    }
}

/// The members' own messages of a listing, without the server's lines (joins and the like).
pub fn posts(messages: Vec<Value>) -> Vec<Value> {
    messages.into_iter().filter(|m| m["type"] == "Message").collect()
}

impl Reply {
    pub async fn from(response: reqwest::Response) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
        };
        Reply { status, headers, body }
    }

    /// Asserts an error reply with the given status and code.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert_eq!(self.body["code"], code, "{}", self.body);
        assert!(self.body["message"].is_string(), "{}", self.body);
    }
}
