//! The reference web client (`functions/web/`): the binary serves its page and files, the
//! committed bundle of the Web PubSub client is what its pinned tools build, the development
//! sign-in opens only where it gives nothing away, and — in Debian's chromium, driven by
//! playwright-core from the scripts in `tests/web/` — the page does what a person does with it.
//!
//! `tests/run` installs playwright-core (`TABLETALK_TEST_PLAYWRIGHT`) and the web client's
//! build tools (`TABLETALK_TEST_WEB_TOOLS`) and chromium. Under CI a missing
//! one fails these tests; they never skip there. The browser tests run on the embedded store:
//! the page sees the same API on both, which the other end-to-end tests check on both.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use serde_json::{Value, json};
use tabletalk::config::DEVELOPMENT_JWT_SECRET;

use crate::helpers::{Backend, TestApp, provided, spawn_app, spawn_app_with, spawn_push_app};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The server with the development secret of `local.settings.json`, as `serve` runs locally.
fn spawn_dev_app() -> TestApp {
    spawn_app_with(
        &Backend::embedded(),
        &[("TABLETALK_JWT_SECRET", DEVELOPMENT_JWT_SECRET)],
    )
}

/// Chromium and playwright-core, or `None` outside CI when either is missing.
fn browser() -> Option<String> {
    let modules = provided("TABLETALK_TEST_PLAYWRIGHT")?;
    let chromium = std::env::var("TABLETALK_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if !Path::new(&chromium).exists() {
        if std::env::var_os("CI").is_some() {
            panic!("{chromium} is missing and CI is set: tests/run installs chromium");
        }
        eprintln!("skipping: {chromium} is missing");
        return None;
    }
    Some(modules)
}

/// Runs `tests/web/<script>` against `app` and fails with its output unless it exits 0 — also
/// when it does not finish in time, with what it printed until then (the steps it passed).
async fn run_browser_script(app: &TestApp, script: &str, modules: &str) -> String {
    use tokio::io::AsyncReadExt;
    let path = repo().join("tests/web").join(script);
    let mut child = tokio::process::Command::new("node")
        .arg(&path)
        .arg(&app.base)
        .env("TABLETALK_TEST_PLAYWRIGHT", modules)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let gather = |mut pipe: Box<dyn tokio::io::AsyncRead + Send + Unpin>| {
        tokio::spawn(async move {
            let mut said = Vec::new();
            let _ = pipe.read_to_end(&mut said).await;
            String::from_utf8_lossy(&said).into_owned()
        })
    };
    let stdout = gather(Box::new(child.stdout.take().expect("piped")));
    let stderr = gather(Box::new(child.stderr.take().expect("piped")));
    let status = tokio::time::timeout(Duration::from_secs(240), child.wait()).await;
    if status.is_err() {
        let _ = child.kill().await;
    }
    // A browser the script started and left running may hold the pipes open: read what came.
    let said =
        async |pipe: tokio::task::JoinHandle<String>| match tokio::time::timeout(Duration::from_secs(10), pipe).await {
            Ok(Ok(said)) => said,
            _ => "(its output did not close)".to_owned(),
        };
    let (stdout, stderr) = (said(stdout).await, said(stderr).await);
    let status = status.unwrap_or_else(|_| panic!("{script} did not finish within 240 s:\n{stdout}\n{stderr}"));
    let status = status.expect("node runs");
    assert!(status.success(), "{script} failed ({status}):\n{stdout}\n{stderr}");
    println!("{stdout}");
    stdout
}

#[tokio::test]
async fn the_page_and_its_files_are_served_with_their_types_and_validators() {
    let app = spawn_app(&Backend::embedded());
    let page = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(page.headers()[CACHE_CONTROL], "no-cache");
    let etag = page.headers()[ETAG].clone();
    assert!(page.text().await.unwrap().contains(r#"src="/web/js/main.js""#));

    // An unchanged file costs a 304.
    let again = app
        .http
        .get(format!("{}/", app.base))
        .header(IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

    for (path, kind) in [
        ("/web/js/main.js", "text/javascript; charset=utf-8"),
        ("/web/vendor/web-pubsub-client.js", "text/javascript; charset=utf-8"),
        ("/web/app.css", "text/css; charset=utf-8"),
    ] {
        let file = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(file.status(), StatusCode::OK, "{path}");
        assert_eq!(file.headers()[CONTENT_TYPE], kind, "{path}");
        assert_eq!(file.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    // A missing file, and the build tooling beside the page, are not there.
    for path in [
        "/web/js/missing.js",
        "/web/package.json",
        "/web/tools/bundle.mjs",
        "/web/README.md",
        "/web/",
    ] {
        let missing = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(missing.status(), StatusCode::NOT_FOUND, "{path}");
        let body: Value = missing.json().await.unwrap();
        assert_eq!(body["code"], "NOT_FOUND", "{path}");
    }
}

#[tokio::test]
async fn the_committed_web_pubsub_bundle_is_what_the_pinned_tools_build() {
    let Some(modules) = provided("TABLETALK_TEST_WEB_TOOLS") else {
        return;
    };
    let output = tokio::process::Command::new("node")
        .arg(repo().join("functions/web/tools/bundle.mjs"))
        .arg(&modules)
        .arg("--check")
        .output()
        .await
        .expect("node runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn dev_sign_in(app: &TestApp, body: Value, headers: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut request = app.http.post(format!("{}/api/dev/signin", app.base)).json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_development_sign_in_gives_a_token_on_loopback_with_the_development_secret() {
    let app = spawn_dev_app();
    let (status, body) = dev_sign_in(&app, json!({"userId": "alice", "name": "Alice"}), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["token"].as_str().unwrap();
    let rooms = app
        .http
        .post(format!("{}/api/rooms", app.base))
        .bearer_auth(token)
        .json(&json!({"name": "general"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rooms.status(), StatusCode::CREATED);
    let room: Value = rooms.json().await.unwrap();
    assert_eq!(room["ownerId"], "alice", "{room}");

    // Bad input is a 4xx with the API's error body.
    for bad in [
        json!({"userId": ""}),
        json!({"name": "x"}),
        json!({"userId": "a", "extra": 1}),
        json!("alice"),
    ] {
        let (status, body) = dev_sign_in(&app, bad.clone(), &[]).await;
        assert!(status.is_client_error(), "{bad}: {status}");
        assert!(body["code"].is_string(), "{bad}: {body}");
    }
}

#[tokio::test]
async fn the_development_sign_in_is_missing_with_any_other_secret() {
    let app = spawn_app(&Backend::embedded());
    let (status, body) = dev_sign_in(&app, json!({"userId": "alice"}), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "NOT_FOUND");
    // Even a malformed body says only that there is no such route.
    let (status, _) = dev_sign_in(&app, json!(7), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A non-loopback peer cannot reach a server holding the development secret (`serve` refuses
/// such an address; tests/api/serve.rs), except through a proxy on the same machine: a request
/// a proxy forwarded is refused as missing. (The router's own tests show a non-loopback peer
/// and a host without peer addresses — Lambda, the Functions app — refused too.)
#[tokio::test]
async fn the_development_sign_in_is_missing_to_a_request_forwarded_by_a_proxy() {
    let app = spawn_dev_app();
    for header in ["forwarded", "x-forwarded-for", "x-real-ip"] {
        let (status, body) = dev_sign_in(&app, json!({"userId": "alice"}), &[(header, "203.0.113.7")]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{header}");
        assert_eq!(body["code"], "NOT_FOUND", "{header}");
    }
}

/// The sign-in screen and the signed-in page render without console errors; how long each
/// first render took is printed (docs/BENCHMARKS.md), not asserted.
#[tokio::test]
async fn the_page_renders_signed_in_without_console_errors() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "first_render.mjs", &modules).await;
}

/// In two browser contexts: a message typed by one appears live for
/// the other after their typing shows; the reader's seen-tick, a reply, a reaction, an edit and
/// a delete appear live; mention autocomplete picks by keyboard with the focus kept in the box;
/// unread and mention badges of rooms not shown update live, and the room list is ordered by
/// activity (tests/web/two_people.mjs).
#[tokio::test]
async fn two_people_see_messages_typing_seen_ticks_reactions_edits_and_deletes_live() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "two_people.mjs", &modules).await;
}

/// The live view is attached before a room is read (a message committed between the two is
/// shown), and nothing in a message loads from elsewhere: the page's content policy and the
/// client keep a remote image out (tests/web/what_a_room_shows.mjs).
#[tokio::test]
async fn a_room_shows_what_landed_before_its_read_and_nothing_from_elsewhere() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "what_a_room_shows.mjs", &modules).await;
}

/// A room of 10,000 messages: it opens at the newest; scrolling back loads cursor pages as the
/// top comes into view, each message once and in order, with at most a window of them in the
/// DOM; a permalink opens at its message and reads on at the bottom; "Jump to first unread"
/// brings the first unread message into view (tests/web/long_room.mjs).
#[tokio::test]
async fn a_long_room_scrolls_back_windowed_and_opens_at_permalinks_and_the_first_unread() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "long_room.mjs", &modules).await;
}

/// Search: the keyboard shortcut, results labelled by room with the matched words marked as
/// text, a filter without syntax, and a click that lands on the message in its room
/// (tests/web/search.mjs).
#[tokio::test]
async fn search_finds_a_word_marks_it_and_a_click_lands_on_the_message() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "search.mjs", &modules).await;
}

/// Sending safely: a failed send goes again with the same clientId; one whose
/// answer was lost shows and is stored once; one made offline waits and is delivered once
/// back online; a refused one says why and can be discarded (tests/web/sending.mjs).
#[tokio::test]
async fn a_send_is_retried_with_its_client_id_and_shown_once_even_offline() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "sending.mjs", &modules).await;
}

/// Keyboard only at a phone's width: sign in, open the sidebar, create a room, send and edit
/// a message, each focused control with a visible focus ring (tests/web/keyboard.mjs).
#[tokio::test]
async fn the_page_works_by_keyboard_alone_at_a_phones_width() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "keyboard.mjs", &modules).await;
}

/// A dropped connection (tests/web/offline.mjs): one person goes
/// offline (context offline and the live WebSocket cut) while the other edits, deletes, reacts
/// and sends 30 messages; back online, without a reload, the first page shows exactly the
/// room's current state as the API answers it, its send made offline is stored once (its first
/// answer lost, sent again with the same clientId), and scroll position, draft and focus are
/// kept. Then the IndexedDB history cache: it equals the room at its versions, a reload shows
/// it before the network answers, RESET drops a stale copy and NO_ACCESS drops a lost room's.
#[tokio::test]
async fn an_offline_page_catches_up_to_the_rooms_exact_state_and_delivers_its_send_once() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "offline.mjs", &modules).await;
}

/// The push service worker is served from the root, so its scope covers the page at `/`, as
/// JavaScript and revalidated on every load (a stale worker would keep old behaviour).
#[tokio::test]
async fn the_service_worker_is_served_from_the_root_as_javascript() {
    let app = spawn_app(&Backend::embedded());
    let worker = app.http.get(format!("{}/sw.js", app.base)).send().await.unwrap();
    assert_eq!(worker.status(), StatusCode::OK);
    assert_eq!(worker.headers()[CONTENT_TYPE], "text/javascript; charset=utf-8");
    assert_eq!(worker.headers()[CACHE_CONTROL], "no-cache");
    let text = worker.text().await.unwrap();
    assert!(text.contains(r#"addEventListener("push""#), "{text}");
    assert!(text.contains(r#"addEventListener("notificationclick""#), "{text}");
}

/// Issue 18's push must-show, up to the service worker (tests/web/push.mjs): "Enable
/// notifications" registers /sw.js and, with the browser's own push service (unreachable
/// here), says so and stays off; with a stand-in push service the subscription reaches the
/// server, the server's push (VAPID-signed, RFC 8291-encrypted) dispatched to the worker with
/// no window open shows the notification, a visible window shows none, and its click opens the
/// room.
#[tokio::test]
async fn enabling_notifications_subscribes_and_a_push_shows_a_notification_that_opens_the_room() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_push_app(
        &Backend::embedded(),
        &[("TABLETALK_JWT_SECRET", DEVELOPMENT_JWT_SECRET)],
    );
    run_browser_script(&app, "push.mjs", &modules).await;
}

/// Quality (tests/web/accessibility.mjs): axe-core finds no serious or critical violation on
/// the sign-in screen, a room with the room list, the phone's room list and a dialog, at
/// 1280×800 and 390×844; nothing scrolls sideways and the phone's room list toggles; the views'
/// screenshots are saved (target/web-screenshots/); and a person signs in, makes a room, sends
/// and reacts with the keyboard only, the focus visible at every stop.
#[tokio::test]
async fn the_main_views_pass_axe_at_desktop_and_phone_widths_and_work_by_keyboard_alone() {
    let Some(modules) = browser() else {
        return;
    };
    if provided("TABLETALK_TEST_AXE").is_none() {
        return;
    }
    let app = spawn_dev_app();
    run_browser_script(&app, "accessibility.mjs", &modules).await;
}

/// Threads, pins, polls, attachments and presence in two browser contexts (tests/web/features.mjs):
/// a reply in a thread appears live in the other's open thread panel; a pin shows live in the
/// other's pins list; a vote moves the other's tally live, and a refused one (a timed-out member)
/// shows at once and is taken back; a refused thread reply stays in the panel as not sent; a file
/// uploaded by one (its progress bar reaching 100 %) appears for the other, inline as an image, and
/// downloads with the same bytes; the other's presence shows online with their custom status, then
/// away once their page closes. The embedded store keeps the files itself.
#[tokio::test]
async fn two_people_use_threads_pins_polls_attachments_and_presence_live() {
    let Some(modules) = browser() else {
        return;
    };
    let app = spawn_dev_app();
    run_browser_script(&app, "features.mjs", &modules).await;
}
