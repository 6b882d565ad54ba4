//! The deployment's sources of truth agree with the code, and the Bicep templates pass the
//! offline checks.
//!
//! - Consistency: every table the code uses is created by `infra/main.bicep` and no other;
//!   every app setting the code reads is in `local.settings.json` and (unless it only matters
//!   to the self-hosted server) set by the template, and neither names a setting the code never
//!   reads; the template's Event Grid subscription targets the one Event Grid triggered
//!   function folder.
//! - `infra/validate.py`: the syntax gate (pycep and tree-sitter-bicep) and checkov with its
//!   waivers, run with the Python `tests/run` prepares (`TABLETALK_INFRA_PYTHON`); a broken copy
//!   of the template must fail it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Settings that matter only to the self-hosted server (or to development), so the Azure
/// template does not set them.
const LOCAL_ONLY: &[&str] = &[
    "TABLETALK_DATA_DIR",                     // the embedded store
    "TABLETALK_PUBLIC_URL",                   // the embedded object store's links
    "TABLETALK_SQLITE_SYNC",                  // the embedded store
    "TABLETALK_JWT_SECRET",                   // HS256 development tokens; Azure uses the JWKS
    "TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", // development push services on loopback
    "TABLETALK_HOUSEKEEPING_SECONDS",         // the local timer loop; Azure has timer functions
    "TABLETALK_PUSH_CLAIM_LEASE_SECONDS",     // the default serves Azure; tests shorten it
    "TABLETALK_ERASURE_BATCH",                // the defaults serve Azure; tests shorten them
    "TABLETALK_ERASURE_PAUSE_MS",
    "TABLETALK_ERASURE_LEASE_SECONDS",
    "TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK", // development pages on loopback
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every `"TABLETALK_…"` string literal in the Rust sources under `dir` (tests' own excluded).
fn settings_in_code(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            settings_in_code(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("\"TABLETALK_") {
                let rest = &text[at + 1..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                // A prefix alone ("TABLETALK_") names no setting.
                if name.len() > "TABLETALK_".len() && !name.starts_with("TABLETALK_TEST_") {
                    found.insert(name.to_owned());
                }
            }
        }
    }
}

/// The `'…'` values of lines in `text` that start (after spaces) with `prefix`.
fn quoted_after(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix(prefix))
        .filter_map(|rest| rest.split('\'').nth(1))
        .map(str::to_owned)
        .collect()
}

/// What the deployment is made of, read from the repository (tests alter copies).
struct Sources {
    code_settings: BTreeSet<String>,
    /// `docs/CONFIGURATION.md`, where every setting is described.
    configuration: String,
    code_tables: BTreeSet<String>,
    bicep: String,
    local_settings: Value,
    event_grid_functions: BTreeSet<String>,
}

impl Sources {
    fn read() -> Sources {
        let root = root();
        let mut code_settings = BTreeSet::new();
        settings_in_code(&root.join("shared"), &mut code_settings);
        settings_in_code(&root.join("functions/src"), &mut code_settings);
        let schema = tabletalk::store::schema::Schema::with_prefix("").unwrap();
        let code_tables = schema.all().iter().map(|t| t.as_str().to_owned()).collect();
        let mut event_grid_functions = BTreeSet::new();
        for entry in std::fs::read_dir(root.join("functions")).unwrap() {
            let definition = entry.unwrap().path().join("function.json");
            if let Ok(text) = std::fs::read_to_string(&definition) {
                let doc: Value = serde_json::from_str(&text).unwrap();
                if doc["bindings"][0]["type"] == "eventGridTrigger" {
                    let name = definition.parent().unwrap().file_name().unwrap();
                    event_grid_functions.insert(name.to_str().unwrap().to_owned());
                }
            }
        }
        Sources {
            code_settings,
            configuration: std::fs::read_to_string(root.join("docs/CONFIGURATION.md")).unwrap(),
            code_tables,
            bicep: std::fs::read_to_string(root.join("infra/main.bicep")).unwrap(),
            local_settings: serde_json::from_str(&std::fs::read_to_string(root.join("local.settings.json")).unwrap())
                .unwrap(),
            event_grid_functions,
        }
    }

    /// Every disagreement, described.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let local: BTreeSet<String> = self.local_settings["Values"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("TABLETALK_"))
            .cloned()
            .collect();
        let infra: BTreeSet<String> = self
            .bicep
            .lines()
            .filter_map(|line| line.trim().strip_prefix("name: '"))
            .filter_map(|rest| rest.split('\'').next())
            .filter(|name| name.starts_with("TABLETALK_"))
            .map(str::to_owned)
            .collect();
        for setting in &self.code_settings {
            if !local.contains(setting) {
                problems.push(format!(
                    "{setting} is read by the code but missing from local.settings.json"
                ));
            }
            if !LOCAL_ONLY.contains(&setting.as_str()) && !infra.contains(setting) {
                problems.push(format!("{setting} is read by the code but not set by infra/main.bicep"));
            }
        }
        let documented: BTreeSet<String> = self
            .configuration
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|name| name.starts_with("TABLETALK_") && !name.starts_with("TABLETALK_TEST_"))
            .filter(|name| {
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            })
            .map(str::to_owned)
            .collect();
        for setting in self.code_settings.difference(&documented) {
            problems.push(format!(
                "{setting} is read by the code but not described in docs/CONFIGURATION.md"
            ));
        }
        for setting in documented.difference(&self.code_settings) {
            problems.push(format!(
                "docs/CONFIGURATION.md describes {setting}, which the code never reads"
            ));
        }
        for setting in local.difference(&self.code_settings) {
            problems.push(format!(
                "local.settings.json sets {setting}, which the code never reads"
            ));
        }
        for setting in &infra {
            if !self.code_settings.contains(setting) || LOCAL_ONLY.contains(&setting.as_str()) {
                problems.push(format!(
                    "infra/main.bicep sets {setting}, which the app on Azure never reads"
                ));
            }
        }
        let tables: BTreeSet<String> = self
            .bicep
            .split_once("var tables = [")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| {
                list.lines()
                    .filter_map(|l| l.split('\'').nth(1))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for table in self.code_tables.difference(&tables) {
            problems.push(format!(
                "table {table} is used by the code but not created by infra/main.bicep"
            ));
        }
        for table in tables.difference(&self.code_tables) {
            problems.push(format!(
                "infra/main.bicep creates table {table}, which the code never uses"
            ));
        }
        let event_type = quoted_after(&self.bicep, "var messageEventType = ");
        if event_type != BTreeSet::from([tabletalk::events::MESSAGE_CREATED.to_owned()]) {
            problems.push(format!(
                "infra/main.bicep filters events of type {event_type:?}; the app publishes {:?}",
                tabletalk::events::MESSAGE_CREATED
            ));
        }
        let delivers_to_the_function = self.bicep.contains("endpointType: 'AzureFunction'")
            && self
                .bicep
                .contains("resourceId: '${site.id}/functions/${notifyFunction}'");
        if !delivers_to_the_function {
            problems.push("infra/main.bicep's subscription does not deliver to the notifyFunction".into());
        }
        let subscribed = quoted_after(&self.bicep, "var notifyFunction = ");
        if subscribed != self.event_grid_functions {
            problems.push(format!(
                "infra/main.bicep subscribes {subscribed:?} to Event Grid; the Event Grid triggered functions are {:?}",
                self.event_grid_functions
            ));
        }
        problems
    }
}

#[test]
fn tables_settings_and_functions_agree_everywhere() {
    let sources = Sources::read();
    assert!(sources.code_settings.len() >= 15, "{:?}", sources.code_settings);
    assert_eq!(sources.problems(), Vec::<String>::new());
}

/// The check fails for each kind of drift.
#[test]
fn the_consistency_check_catches_drift() {
    let mut missing_local = Sources::read();
    missing_local.local_settings["Values"]
        .as_object_mut()
        .unwrap()
        .remove("TABLETALK_VAPID_SUBJECT");
    assert_eq!(
        missing_local.problems(),
        ["TABLETALK_VAPID_SUBJECT is read by the code but missing from local.settings.json"]
    );

    let mut undocumented = Sources::read();
    undocumented.configuration = undocumented.configuration.replace("`TABLETALK_DATA_DIR`", "");
    assert_eq!(
        undocumented.problems(),
        ["TABLETALK_DATA_DIR is read by the code but not described in docs/CONFIGURATION.md"]
    );

    let mut missing_infra = Sources::read();
    missing_infra.bicep = missing_infra
        .bicep
        .replace("name: 'TABLETALK_EVENTGRID_KEY'", "name: 'SOMETHING_ELSE'");
    assert_eq!(
        missing_infra.problems(),
        ["TABLETALK_EVENTGRID_KEY is read by the code but not set by infra/main.bicep"]
    );

    let mut unused = Sources::read();
    unused.local_settings["Values"]["TABLETALK_NOT_A_SETTING"] = "x".into();
    unused.bicep = unused
        .bicep
        .replace("  'PushSubscriptions'\n", "  'PushSubscriptions'\n  'Forgotten'\n");
    assert_eq!(
        unused.problems(),
        [
            "local.settings.json sets TABLETALK_NOT_A_SETTING, which the code never reads",
            "infra/main.bicep creates table Forgotten, which the code never uses"
        ]
    );

    let mut wrong_type = Sources::read();
    wrong_type.bicep = wrong_type.bicep.replace(
        "var messageEventType = 'tabletalk.message.created'",
        "var messageEventType = 'tabletalk.message.sent'",
    );
    assert_eq!(wrong_type.problems().len(), 1, "{:?}", wrong_type.problems());

    let mut elsewhere = Sources::read();
    elsewhere.bicep = elsewhere.bicep.replace(
        "'${site.id}/functions/${notifyFunction}'",
        "'${site.id}/functions/other'",
    );
    assert_eq!(elsewhere.problems().len(), 1, "{:?}", elsewhere.problems());

    let mut wrong_function = Sources::read();
    wrong_function.bicep = wrong_function
        .bicep
        .replace("var notifyFunction = 'notify'", "var notifyFunction = 'notifier'");
    assert_eq!(wrong_function.problems().len(), 1);
}

/// The template parameters that must be given a non-empty value: the JWKS URL, and with it the
/// issuer and audience the app refuses to start without (`a_jwks_url_needs_an_issuer_and_an_audience`).
const REQUIRED_AUTH_PARAMS: [&str; 3] = ["jwksUrl", "jwtIssuer", "jwtAudience"];

/// How `bicep` lets a required parameter be left empty, or `parameters` leaves it so.
fn optional_auth_params(bicep: &str, parameters: &Value) -> Vec<String> {
    let lines: Vec<&str> = bicep.lines().map(str::trim).collect();
    let mut problems = Vec::new();
    for name in REQUIRED_AUTH_PARAMS {
        let declaration = format!("param {name} ");
        let Some(at) = lines.iter().position(|line| line.starts_with(&declaration)) else {
            problems.push(format!("infra/main.bicep does not declare {name}"));
            continue;
        };
        if lines[at] != format!("param {name} string") {
            problems.push(format!("infra/main.bicep gives {name} a default: `{}`", lines[at]));
        }
        let decorators = lines[..at].iter().rev().take_while(|line| line.starts_with('@'));
        if !decorators.into_iter().any(|line| *line == "@minLength(1)") {
            problems.push(format!("infra/main.bicep accepts an empty {name} (no @minLength(1))"));
        }
        if parameters["parameters"][name]["value"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            problems.push(format!("infra/main.parameters.json gives no {name}"));
        }
    }
    problems
}

#[test]
fn the_template_requires_an_issuer_and_an_audience_with_its_jwks_url() {
    let bicep = std::fs::read_to_string(root().join("infra/main.bicep")).unwrap();
    let parameters: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("infra/main.parameters.json")).unwrap()).unwrap();
    assert_eq!(optional_auth_params(&bicep, &parameters), Vec::<String>::new());
    // And the check can fail: an audience that may be left empty.
    let optional = bicep.replacen("param jwtAudience string", "param jwtAudience string = ''", 1);
    assert_eq!(
        optional_auth_params(&optional, &parameters),
        ["infra/main.bicep gives jwtAudience a default: `param jwtAudience string = ''`"]
    );
}

fn validate(python: &str, folder: &Path) -> (bool, String) {
    let output = Command::new(python)
        .arg(root().join("infra/validate.py"))
        .arg(folder)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn the_templates_pass_the_syntax_gate_and_checkov_and_broken_ones_do_not() {
    let Some(python) = crate::helpers::provided("TABLETALK_INFRA_PYTHON") else {
        return;
    };
    let (passed, report) = validate(&python, &root().join("infra"));
    assert!(passed, "{report}");
    assert!(report.contains("syntax gate: 1 templates parse"), "{report}");

    let template = std::fs::read_to_string(root().join("infra/main.bicep")).unwrap();
    let scratch = std::env::temp_dir().join(format!("tt-infra-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&scratch).unwrap();
    // A syntax error: an unclosed object.
    let broken = template.replacen(
        "resource hub 'Microsoft.SignalRService/webPubSub/hubs@2024-03-01' = {\n  parent: webPubSub",
        "resource hub 'Microsoft.SignalRService/webPubSub/hubs@2024-03-01' = {\n  parent: webPubSub {",
        1,
    );
    assert_ne!(broken, template);
    std::fs::write(scratch.join("main.bicep"), &broken).unwrap();
    let (passed, report) = validate(&python, &scratch);
    assert!(!passed, "a template that does not parse passed:\n{report}");
    assert!(report.contains("syntax gate: FAILED"), "{report}");

    // Valid syntax, but a finding nobody waived: storage accepting TLS 1.0.
    let weak = template.replacen("minimumTlsVersion: 'TLS1_2'", "minimumTlsVersion: 'TLS1_0'", 1);
    assert_ne!(weak, template);
    std::fs::write(scratch.join("main.bicep"), &weak).unwrap();
    let (passed, report) = validate(&python, &scratch);
    assert!(!passed, "an unwaived finding passed:\n{report}");
    assert!(report.contains("checkov: FAILED"), "{report}");
    let _ = std::fs::remove_dir_all(scratch);
}
