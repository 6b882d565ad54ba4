//! Starting the server: `--help`, the address it listens on, and the development secret of
//! `local.settings.json` (published in this repository, so anyone can sign tokens with it)
//! refused on an address other machines can reach.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::helpers::SECRET;

/// The binary with `args`, on a fresh embedded store, with `secret` (or, for `None`, the one
/// its settings file gives); killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(args: &[&str], secret: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tabletalk"));
    let data_dir = std::env::temp_dir().join(format!("tt-serve-{}", uuid::Uuid::new_v4().simple()));
    command
        .args(args)
        .env_remove("FUNCTIONS_CUSTOMHANDLER_PORT")
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .env_remove("TABLETALK_JWT_SECRET")
        .env("TABLETALK_STORAGE_CONNECTION", "")
        .env("TABLETALK_DATA_DIR", data_dir)
        .env("RUST_LOG", "warn");
    if let Some(secret) = secret {
        command.env("TABLETALK_JWT_SECRET", secret);
    }
    command
}

/// Starts `serve` and reads its first line: the address it listens on, or `None` when it
/// exits without listening (then with its exit status and what it said).
fn serve(args: &[&str], secret: Option<&str>) -> (Serve, Option<String>) {
    let mut child = command(args, secret)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tabletalk");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read stdout");
    let listening = line.trim().strip_prefix("listening on ").map(str::to_owned);
    (Serve(child), listening)
}

fn local_settings() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../local.settings.json")
}

#[test]
fn help_prints_the_usage() {
    for flag in ["--help", "-h"] {
        let output = command(&[flag], None).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{flag}: {:?} {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.starts_with("usage:") && stdout.contains("--host"),
            "{flag}: {stdout}"
        );
    }
}

#[test]
fn serve_listens_on_loopback_only_by_default() {
    let (_app, listening) = serve(&["serve", "--port", "0", "--settings", "none"], Some(SECRET));
    let addr: std::net::SocketAddr = listening.expect("it listens").parse().unwrap();
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert!(TcpStream::connect(addr).is_ok());
    // Another loopback address reaches a socket bound to every interface, but not this one.
    let elsewhere = std::net::SocketAddr::from(([127, 0, 0, 2], addr.port()));
    assert!(TcpStream::connect(elsewhere).is_err(), "{elsewhere} is served too");
}

#[test]
fn serve_refuses_the_development_secret_on_a_non_loopback_address() {
    let settings = local_settings();
    let settings = settings.to_str().unwrap();
    let args = ["serve", "--host", "0.0.0.0", "--port", "0", "--settings", settings];
    let (mut app, listening) = serve(&args, None);
    assert_eq!(listening, None, "it listened with the development secret");
    let status = app.0.wait().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(&mut app.0.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success(), "{status:?}");
    assert!(
        said.contains("development") && said.contains("TABLETALK_JWT_SECRET"),
        "{said}"
    );

    // The same address with a secret of one's own is served.
    let (_app, listening) = serve(&args, Some(SECRET));
    assert!(
        listening.as_deref().is_some_and(|addr| addr.starts_with("0.0.0.0:")),
        "{listening:?}"
    );
    // And the development secret is fine on loopback.
    let loopback = ["serve", "--host", "127.0.0.1", "--port", "0", "--settings", settings];
    let (_app, listening) = serve(&loopback, None);
    assert!(listening.is_some());
}
