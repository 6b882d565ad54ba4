//! What an operator deploys: the package command's zip, and the binary answering the Functions
//! host's invocations of its timer functions (the notification function's are in `events`).

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app_with};

fn functions_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// `tabletalk package` writes a zip that, unpacked, is exactly the app: the binary (runnable),
/// host.json and the repository's function folders.
#[test]
fn the_package_unpacks_into_a_runnable_app() {
    let dir = std::env::temp_dir().join(format!("tt-deploy-{}", uuid::Uuid::new_v4()));
    let out = dir.join("app.zip");
    let status = Command::new(env!("CARGO_BIN_EXE_tabletalk"))
        .args(["package", "--app-dir"])
        .arg(functions_dir())
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    let unpacked = dir.join("app");
    zip::ZipArchive::new(File::open(&out).unwrap())
        .unwrap()
        .extract(&unpacked)
        .unwrap();
    let mut entries = BTreeSet::new();
    for entry in std::fs::read_dir(&unpacked).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            let inside: Vec<String> = std::fs::read_dir(entry.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(inside, ["function.json"], "{name}");
        }
        entries.insert(name);
    }
    let mut expected: BTreeSet<String> = std::fs::read_dir(functions_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.join("function.json").exists())
        .map(|path| path.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    expected.extend(["tabletalk".to_owned(), "host.json".to_owned()]);
    assert_eq!(entries, expected);

    let binary = unpacked.join("tabletalk");
    assert_eq!(
        binary.metadata().unwrap().permissions().mode() & 0o111,
        0o111,
        "the run bit"
    );
    assert_eq!(
        std::fs::read(&binary).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_tabletalk")).unwrap()
    );
    let output = Command::new(&binary).arg("vapid-key").output().unwrap();
    assert!(output.status.success(), "the unpacked binary runs");
    let _ = std::fs::remove_dir_all(dir);
}

/// The timer functions, posted as the Functions host posts them, run and
/// answer the invocation response.
#[tokio::test]
async fn timer_invocations_run_their_work() {
    let app = spawn_app_with(&Backend::embedded(), &[("FUNCTIONS_CUSTOMHANDLER_PORT", "0")]);
    let room = app.create_room("alice").await;
    app.post("alice", &room, "<p>kept</p>").await;
    let timer = json!({
        "Data": { "timer": {
            "Schedule": { "AdjustForDST": true },
            "ScheduleStatus": { "Last": "2026-11-30T00:00:00Z", "Next": "2026-11-30T00:05:00Z", "LastUpdated": "2026-11-30T00:00:00Z" },
            "IsPastDue": false
        } },
        "Metadata": { "sys": { "MethodName": "housekeeping", "UtcNow": "2026-11-30T00:05:00Z", "RandGuid": "0f8fad5b-d9cb-469f-a165-70867728950e" } }
    });
    for function in ["housekeeping", "republishEvents"] {
        let response = app
            .http
            .post(format!("{}/{function}", app.base))
            .header("x-azure-functions-invocationid", "0f8fad5b-d9cb-469f-a165-70867728950e")
            .json(&timer)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{function}");
        let body: Value = response.json().await.unwrap();
        assert!(body["Outputs"].is_object(), "{body}");
        assert!(body["Logs"][0].is_string(), "{body}");
    }
    // The self-hosted server does not expose the invocation routes.
    let local = spawn_app_with(&Backend::embedded(), &[]);
    let response = local
        .http
        .post(format!("{}/housekeeping", local.base))
        .json(&timer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
