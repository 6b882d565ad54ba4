//! Starting the server: `--help`, the address it listens on, and the development secret of
//! `local.settings.json` (published in this repository, so anyone can sign tokens with it)
//! refused on an address other machines can reach.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tabletalk::config::DEVELOPMENT_JWT_SECRET;

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
    command_with(args, secret, &[])
}

fn command_with(args: &[&str], secret: Option<&str>, env: &[(&str, &str)]) -> Command {
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
    command.envs(env.iter().copied());
    command
}

/// Starts `serve` and reads its first line: the address it listens on, or `None` when it
/// exits without listening (then with its exit status and what it said).
fn serve(args: &[&str], secret: Option<&str>) -> (Serve, Option<String>) {
    serve_with(args, secret, &[])
}

fn serve_with(args: &[&str], secret: Option<&str>, env: &[(&str, &str)]) -> (Serve, Option<String>) {
    let mut child = command_with(args, secret, env)
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

    // The same address with a secret of one's own is served once the settings file's other
    // development-only settings are off too.
    let quiet = [
        ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "false"),
        ("TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK", "false"),
    ];
    let (_app, listening) = serve_with(&args, Some(SECRET), &quiet);
    assert!(
        listening.as_deref().is_some_and(|addr| addr.starts_with("0.0.0.0:")),
        "{listening:?}"
    );
    // And the development secret is fine on loopback.
    let loopback = ["serve", "--host", "127.0.0.1", "--port", "0", "--settings", settings];
    let (_app, listening) = serve(&loopback, None);
    assert!(listening.is_some());
}

/// Private push and webhook endpoints (which `local.settings.json` allows) would let any user
/// make a reachable server connect to the metadata service or scan its network: refused on a
/// non-loopback address, whatever the secret, as is every development-only setting.
#[test]
fn serve_refuses_development_only_settings_on_a_non_loopback_address() {
    let settings = local_settings();
    let settings = settings.to_str().unwrap();
    let args = ["serve", "--host", "0.0.0.0", "--port", "0", "--settings", settings];
    for (setting, other) in [
        (
            "TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS",
            "TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK",
        ),
        (
            "TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK",
            "TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS",
        ),
    ] {
        let (mut app, listening) = serve_with(&args, Some(SECRET), &[(setting, "true"), (other, "false")]);
        assert_eq!(listening, None, "it listened with {setting}");
        assert!(!app.0.wait().unwrap().success());
        let mut said = String::new();
        std::io::Read::read_to_string(&mut app.0.stderr.take().unwrap(), &mut said).unwrap();
        assert!(said.contains(setting), "{said}");
        // A Functions app on Azure binds loopback, but the platform forwards the internet to it.
        let handler = ["serve", "--settings", settings];
        let hosted = [
            (setting, "true"),
            (other, "false"),
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "0"),
            ("WEBSITE_INSTANCE_ID", "abc123"),
        ];
        let (mut app, listening) = serve_with(&handler, Some(SECRET), &hosted);
        assert_eq!(listening, None, "a Functions app on Azure listened with {setting}");
        assert!(!app.0.wait().unwrap().success());
        // On loopback it is a development setting like any other.
        let loopback = ["serve", "--host", "127.0.0.1", "--port", "0", "--settings", settings];
        let (_app, listening) = serve_with(&loopback, Some(SECRET), &[(setting, "true")]);
        assert!(listening.is_some(), "{setting} on loopback");
    }
}

/// `request` (a whole HTTP/1.1 request) sent to `addr` on a fresh connection; the status line
/// of the answer.
fn status_line(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A client that opens a connection and never finishes its headers (slowloris) is dropped:
/// the connection is closed within the header-read bound, not held for as long as the client
/// likes.
#[test]
fn a_request_whose_headers_never_finish_is_dropped() {
    use std::io::{Read, Write};
    let (_app, listening) = serve(&["serve", "--port", "0", "--settings", "none"], Some(SECRET));
    let addr = listening.expect("it listens");
    // Half a request's headers, and nothing at all (a server that first reads bytes to tell
    // HTTP/1 from HTTP/2, with no deadline, would hold that one forever).
    for sent in [&b"GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n"[..], b""] {
        let mut stream = TcpStream::connect(&addr).unwrap();
        stream.write_all(sent).unwrap();
        // Far past the bound (10 s), so only a server that never drops it reaches this.
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) => assert!(
                !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                "the connection was held open for a minute after {} bytes",
                sent.len()
            ),
        }
    }
    // The server still answers a whole request.
    let ok = status_line(
        &addr,
        "GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(ok.contains(" 200 "), "{ok}");
}

/// With the published development secret, a request naming another host is refused: a page
/// elsewhere could otherwise reach the server through a name resolving to 127.0.0.1 (DNS
/// rebinding) and sign in as anyone. With a secret of one's own, any host name is served.
#[test]
fn the_development_secret_answers_only_to_loopback_host_names() {
    let request = |host: &str| format!("GET /api/openapi.json HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let (_app, listening) = serve(
        &["serve", "--port", "0", "--settings", "none"],
        Some(DEVELOPMENT_JWT_SECRET),
    );
    let addr = listening.expect("it listens");
    let port = addr.rsplit(':').next().unwrap();
    for host in [
        format!("rebind.example:{port}"),
        "rebind.example".into(),
        format!("10.0.0.1:{port}"),
    ] {
        let answer = status_line(&addr, &request(&host));
        assert!(answer.contains(" 403 "), "{host}: {answer}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("app.localhost:{port}"),
    ] {
        let answer = status_line(&addr, &request(&host));
        assert!(answer.contains(" 200 "), "{host}: {answer}");
    }
    let (_app, listening) = serve(&["serve", "--port", "0", "--settings", "none"], Some(SECRET));
    let answer = status_line(&listening.expect("it listens"), &request("chat.example.com"));
    assert!(answer.contains(" 200 "), "{answer}");
}
