//! The API against its own OpenAPI document: schemathesis (pinned; `tests/run` installs it)
//! drives the real binary with every check it has (`--checks all`: no 5xx, every answer as the
//! document describes it, everything the document allows accepted and everything it refuses
//! refused, deleted things gone, other users' things out of reach), signed in, with path
//! parameters that name real things where a test can make them. What the document cannot say
//! is listed, with its reason, in `tests/api/schemathesis.toml`; anything else fails.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{Backend, provided, spawn_app, token};

#[tokio::test]
async fn the_api_does_what_its_document_says() {
    let Some(schemathesis) = provided("TABLETALK_TEST_SCHEMATHESIS") else {
        return;
    };
    let app = spawn_app(&Backend::embedded());
    let created = |reply: crate::helpers::Reply| {
        assert!(reply.status.is_success(), "{}", reply.body);
        reply.body
    };
    // Real things for the path parameters: alice's room with bob in it, a message, a role, a
    // webhook, an upload, a scheduled message and an invitation; another room to delete.
    let room = app.create_room("alice").await;
    let doomed = app.create_room("alice").await;
    app.join("bob", &room).await;
    let message = app.post("alice", &room, "hello").await;
    let role = app.grant("alice", &room, "bob", &["ManageMessages"], 10).await;
    let hook = created(
        app.act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/webhooks"),
            json!({ "name": "CI" }),
        )
        .await,
    );
    let upload = created(
        app.act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/uploads"),
            json!({ "name": "a.txt", "mime": "text/plain", "size": 3 }),
        )
        .await,
    );
    let send_at = (chrono::Utc::now() + chrono::Duration::days(2)).to_rfc3339();
    let scheduled = created(
        app.act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/scheduled"),
            json!({ "text": "later", "sendAt": send_at }),
        )
        .await,
    );
    let invitation = created(
        app.act(
            Method::POST,
            "alice",
            &format!("/rooms/{room}/invites"),
            json!({ "userId": "carol" }),
        )
        .await,
    );
    let token_of_hook = hook["url"].as_str().unwrap().rsplit('/').next().unwrap().to_owned();

    let fixed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/api/schemathesis.toml"))
        .expect("tests/api/schemathesis.toml");
    let parameters = format!(
        r#"
[parameters]
roomId = "{room}"
messageId = "{message}"
userId = "bob"
roleId = "{role}"
webhookId = "{hook_id}"
token = "{token_of_hook}"
attachmentId = "{attachment}"
scheduledId = "{scheduled_id}"
inviteId = "{invite_id}"
emoji = "👍"

[[operations]]
include-operation-id = "deleteRoom"
parameters = {{ roomId = "{doomed}" }}
"#,
        hook_id = hook["id"].as_str().unwrap(),
        attachment = upload["attachment"]["id"].as_str().unwrap(),
        scheduled_id = scheduled["id"].as_str().unwrap(),
        invite_id = invitation["id"].as_str().unwrap(),
    );
    let dir = std::env::temp_dir().join(format!("tt-schemathesis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    // Single requests name the real things above; sequences (the stateful phase) name what
    // their own earlier requests made, so they run without them: a real message id beside a
    // room a sequence just made would read as that room's message gone missing.
    let single = dir.join("single.toml");
    std::fs::write(&single, format!("{fixed}{parameters}")).unwrap();
    let sequences = dir.join("sequences.toml");
    std::fs::write(&sequences, &fixed).unwrap();
    for (config, phases) in [(&single, "examples,coverage,fuzzing"), (&sequences, "stateful")] {
        let run = tokio::process::Command::new(&schemathesis)
            .current_dir(&dir)
            .args(["--config-file", config.to_str().unwrap(), "run"])
            .arg(format!("{}/api/openapi.json", app.base))
            .args(["--checks", "all", "--phases", phases, "--max-examples", "50"])
            .args(["--workers", "2", "--seed", "1", "--no-color"])
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", token("alice")))
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(900), run)
            .await
            .expect("schemathesis finished within 15 minutes")
            .expect("schemathesis runs");
        let said = String::from_utf8_lossy(&output.stdout);
        println!("{said}");
        assert!(
            output.status.success(),
            "schemathesis ({phases}) found failures ({}):\n{said}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
