//! The one tabletalk binary.
//!
//! - `tabletalk serve [--host IP] [--port P] [--data-dir DIR] [--settings FILE|none]`: the HTTP
//!   server (the default command). With `FUNCTIONS_CUSTOMHANDLER_PORT` set it is an Azure
//!   Functions custom handler listening on that port on loopback; with `AWS_LAMBDA_RUNTIME_API`
//!   set, an AWS Lambda function (the same router through `lambda_http`); otherwise the
//!   self-hosted server on 127.0.0.1:7071. Another `--host` (`0.0.0.0`: every interface) needs
//!   a `TABLETALK_JWT_SECRET` other than the published one of `local.settings.json`.
//! - `tabletalk --help`: prints the usage.
//! - `tabletalk token <user-id> [--name NAME] [--hours H] [--settings FILE]`: prints a development
//!   token signed with the configured HS256 secret.
//! - `tabletalk vapid-key`: prints a new VAPID key pair for Web Push.
//! - `tabletalk package [--out FILE] [--app-dir DIR]`: writes the deployable Functions app zip
//!   of this very binary (`cargo package-app` builds the release binary and runs this).

mod compose;
mod http;
mod listen;
mod package;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tabletalk::auth::{Authenticator, mint_dev_token};
use tabletalk::config::{self, Settings};
use tabletalk::{Chat, Error};

/// The allocator of the server's own (Rust) allocations. A send allocates and frees a few
/// hundred small blocks (entities, JSON, futures), many freed on another thread than the one
/// that allocated them; glibc's malloc spent about a fifth of the server's instructions per send
/// on that (`_int_free`, `malloc_consolidate`, arena locks). SQLite keeps its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_PORT: u16 = 7071;
/// How long a stopping server waits for its background work (publishing events, delivery
/// runs) once its last request is answered: well inside the 30 s most service managers and
/// the Functions host give a process between SIGTERM and SIGKILL.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);
/// Loopback: the self-hosted server is reachable from other machines only when asked to be.
const DEFAULT_HOST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const USAGE: &str = "usage:
  tabletalk [serve] [--host IP] [--port P] [--data-dir DIR] [--settings FILE|none]
  tabletalk token <user-id> [--name NAME] [--hours H] [--settings FILE]
  tabletalk vapid-key
  tabletalk package [--out FILE] [--app-dir DIR]
  tabletalk --help

serve listens on 127.0.0.1 unless --host says otherwise (0.0.0.0: every interface); it
refuses a non-loopback host while TABLETALK_JWT_SECRET is the development secret of
local.settings.json.";

/// Parsed command line: the command, its positional arguments and its `--flag value` pairs.
struct Args {
    command: String,
    positional: Vec<String>,
    flags: HashMap<String, String>,
}

/// `--help` or `-h` anywhere (or the command `help`) asks for the usage: the one flag without a
/// value.
fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1).peekable();
    let command = match args.peek() {
        Some(first) if !first.starts_with('-') => args.next().unwrap_or_default(),
        _ => "serve".to_owned(),
    };
    let (mut positional, mut flags) = (Vec::new(), HashMap::new());
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(Args {
                command: "help".to_owned(),
                positional,
                flags,
            });
        }
        match arg.strip_prefix("--") {
            Some(flag) => {
                let value = args.next().ok_or(format!("--{flag} needs a value"))?;
                flags.insert(flag.to_owned(), value);
            }
            None => positional.push(arg),
        }
    }
    Ok(Args {
        command,
        positional,
        flags,
    })
}

/// Settings from `local.settings.json` (explicit, or in the working directory), the environment
/// over them, and command-line flags over both.
fn settings(args: &Args) -> Result<Settings, Error> {
    let file = match args.flags.get("settings").map(String::as_str) {
        Some("none") => None,
        Some(path) => Some(PathBuf::from(path)),
        None => Some(PathBuf::from("local.settings.json")).filter(|default| default.exists()),
    };
    let mut values = match &file {
        Some(path) => config::read_local_settings(path)?,
        None => HashMap::new(),
    };
    values.extend(std::env::vars());
    if let Some(dir) = args.flags.get("data-dir") {
        values.insert(config::DATA_DIR.into(), dir.clone());
    }
    Settings::from_values(&values)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("{problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime starts");
    let result = match args.command.as_str() {
        "help" => {
            println!("{USAGE}");
            Ok(())
        }
        "serve" => runtime.block_on(serve(&args)),
        "token" => token(&args),
        "vapid-key" => vapid_key(),
        "package" => package(&args),
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("tabletalk: {problem}");
            ExitCode::FAILURE
        }
    }
}

fn token(args: &Args) -> Result<(), String> {
    let user = args
        .positional
        .first()
        .ok_or(format!("token needs a user id\n{USAGE}"))?;
    let settings = settings(args).map_err(|e| e.to_string())?;
    let secret = settings
        .auth
        .hs256_secret
        .ok_or(format!("{} is not set", config::JWT_SECRET))?;
    let hours: u64 = args
        .flags
        .get("hours")
        .map_or(Ok(24), |h| h.parse())
        .map_err(|_| "--hours must be a number")?;
    let name = args.flags.get("name").map(String::as_str);
    let token = mint_dev_token(&secret, user, name, Duration::from_secs(hours * 3600)).map_err(|e| e.to_string())?;
    println!("{token}");
    Ok(())
}

/// Prints a new VAPID key pair: the private key for `TABLETALK_VAPID_PRIVATE_KEY` and the
/// public key browsers subscribe with.
fn vapid_key() -> Result<(), String> {
    let (private, public) = tabletalk::adapters::push::generate_vapid_key().map_err(|e| e.to_string())?;
    println!("TABLETALK_VAPID_PRIVATE_KEY={private}");
    println!("public key: {public}");
    Ok(())
}

/// Writes the Functions app zip of the running binary.
fn package(args: &Args) -> Result<(), String> {
    let binary = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let app_dir = PathBuf::from(args.flags.get("app-dir").map_or("functions", String::as_str));
    let out = PathBuf::from(
        args.flags
            .get("out")
            .map_or("target/tabletalk-functions.zip", String::as_str),
    );
    package::package(&binary, &app_dir, &out)?;
    println!("wrote {}", out.display());
    Ok(())
}

async fn serve(args: &Args) -> Result<(), String> {
    let settings = settings(args).map_err(|e| e.to_string())?;
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        return serve_lambda(&settings).await;
    }
    let custom_handler = std::env::var_os("FUNCTIONS_CUSTOMHANDLER_PORT").is_some();
    let addr = match std::env::var("FUNCTIONS_CUSTOMHANDLER_PORT") {
        Ok(port) => {
            let port: u16 = port.parse().map_err(|_| "FUNCTIONS_CUSTOMHANDLER_PORT is not a port")?;
            SocketAddr::from(([127, 0, 0, 1], port))
        }
        Err(_) => {
            let port = match args.flags.get("port") {
                Some(port) => port.parse().map_err(|_| "--port must be a port number")?,
                None => DEFAULT_PORT,
            };
            let host = match args.flags.get("host") {
                Some(host) => host
                    .parse()
                    .map_err(|_| format!("--host must be an IP address (127.0.0.1, 0.0.0.0, ::1…), not {host:?}"))?,
                None => DEFAULT_HOST,
            };
            SocketAddr::new(host, port)
        }
    };
    // A Functions app on Azure is the internet's, whatever address its handler binds.
    let exposed = match custom_handler && std::env::var_os("WEBSITE_INSTANCE_ID").is_some() {
        true => IpAddr::from([0, 0, 0, 0]),
        false => addr.ip(),
    };
    settings.check_listen_address(exposed).map_err(|e| e.to_string())?;
    // Bound before the service is assembled: the embedded object store's links name the
    // address this server answers at.
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let mut settings = settings;
    if settings.attachments.public_url.is_none() {
        settings.attachments.public_url = Some(format!("http://{local}"));
    }
    let mut chat = compose::chat(&settings)
        .await
        .map_err(|e| format!("cannot open storage: {e}"))?;
    if !custom_handler {
        // Self-hosted: live connections come to this process unless Web PubSub is configured.
        chat = chat.with_local_hub(&settings.web_pubsub_hub);
        // Presence from the hub's connections (none when Web PubSub is the live channel).
        chat.presence_keeper.watch_local_hub();
    }
    // An erasure a stopped process left is taken over now if its lease lapsed (else by the
    // next housekeeping run, on every host).
    let tasks = chat.supervisor().clone();
    let resuming = chat.clone();
    tasks.spawn(async move {
        if let Err(e) = resuming.eraser.resume_erasures(resuming.now()).await {
            tracing::warn!(error = %e, "resuming erasures at startup failed; housekeeping tries again");
        }
    });
    // On Azure the housekeeping timer function does this; the self-hosted server does it itself.
    if let (false, Some(interval)) = (custom_handler, settings.housekeeping_interval) {
        tasks.spawn_until_stopped(housekeeping(chat.clone(), interval));
    }
    let state = http::AppState {
        chat,
        auth: Arc::new(Authenticator::new(settings.auth.clone())),
    };
    tracing::info!(%local, storage = ?storage_kind(&settings), "tabletalk listening");
    // Tests and scripts read this line to learn the port when started with --port 0.
    println!("listening on {local}");
    // The peer address goes to the handlers: the development sign-in opens to loopback only.
    let policy = http::web::PagePolicy::new(&compose::page_origins(&settings)?);
    let mut app = http::router(state, custom_handler).layer(axum::Extension(policy));
    if !custom_handler && settings.auth.hs256_secret.as_deref() == Some(config::DEVELOPMENT_JWT_SECRET) {
        app = app.layer(axum::middleware::from_fn(http::loopback_hosts_only));
    }
    listen::serve(listener, app, shutdown_signal()).await;
    // Every request has been answered; what they started in the background finishes now.
    if !tasks.shut_down(SHUTDOWN_GRACE).await {
        tracing::warn!(
            running = tasks.running(),
            "background work outlasted the shutdown grace; the outbox and the leases take it up"
        );
    }
    tracing::info!("tabletalk stopped");
    Ok(())
}

/// AWS Lambda: the same router behind the Lambda Runtime API (API Gateway HTTP API events).
/// No timers run here and there is no live hub (no WebSockets through an HTTP API); events are
/// published before a send answers, since Lambda freezes the process after each response.
async fn serve_lambda(settings: &Settings) -> Result<(), String> {
    // Behind an API Gateway: the internet's, so no development-only setting.
    settings
        .check_listen_address(IpAddr::from([0, 0, 0, 0]))
        .map_err(|e| e.to_string())?;
    let chat = compose::chat(settings)
        .await
        .map_err(|e| format!("cannot open storage: {e}"))?
        .with_inline_events();
    let state = http::AppState {
        chat,
        auth: Arc::new(Authenticator::new(settings.auth.clone())),
    };
    tracing::info!(storage = ?storage_kind(settings), "tabletalk on AWS Lambda");
    let policy = http::web::PagePolicy::new(&compose::page_origins(settings)?);
    lambda_http::run(http::router(state, false).layer(axum::Extension(policy)))
        .await
        .map_err(|e| e.to_string())
}

/// Runs the timers' work every `interval`: republishing pending events, sending the scheduled
/// messages due, then housekeeping (retention purge, expired idempotency records).
async fn housekeeping(chat: Chat, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(e) = chat.outbox.republish(chat.now()).await {
            tracing::warn!(error = %e, "republishing events failed; trying again next time");
        }
        match chat.scheduler.send_due_messages().await {
            Ok(report) if report != Default::default() => tracing::info!(?report, "scheduled messages"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sending scheduled messages failed; trying again next time"),
        }
        match chat.sending.deliver_webhooks().await {
            Ok(report) if report != Default::default() => tracing::info!(?report, "outgoing webhooks"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "delivering outgoing webhooks failed; trying again next time"),
        }
        match chat.housekeeping(chat.now()).await {
            Ok(report) if report.messages_purged > 0 || report.rooms_failed > 0 => {
                tracing::info!(?report, "housekeeping")
            }
            Ok(report) => tracing::debug!(?report, "housekeeping"),
            Err(e) => tracing::warn!(error = %e, "housekeeping failed; trying again next time"),
        }
    }
}

fn storage_kind(settings: &Settings) -> &'static str {
    match settings.storage {
        config::StorageSettings::Azure { .. } => "azure-tables",
        config::StorageSettings::Embedded { .. } => "embedded",
    }
}

/// Ctrl-C or SIGTERM (what the Functions host and service managers send).
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
