//! The API reference is the served OpenAPI document: `docs/openapi.json` is that document as
//! committed, so a change to the API shows in review, and `docs/API.md` is rendered from it.
//! Both are compared here with what the binary serves; after a deliberate change to the API,
//! write them again with
//! `TABLETALK_WRITE_API_DOCS=1 cargo test -p tabletalk-functions --test api api_reference`.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

use crate::helpers::{Backend, spawn_app};

const WRITE: &str = "TABLETALK_WRITE_API_DOCS";

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

#[tokio::test]
async fn the_committed_reference_is_the_served_document() {
    let app = spawn_app(&Backend::embedded());
    let served: Value = app
        .http
        .get(format!("{}/api/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (json_path, markdown_path) = (docs().join("openapi.json"), docs().join("API.md"));
    let markdown = render(&served);
    if std::env::var_os(WRITE).is_some() {
        std::fs::write(&json_path, serde_json::to_string_pretty(&served).unwrap() + "\n").unwrap();
        std::fs::write(&markdown_path, &markdown).unwrap();
    }
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert!(
        committed == served,
        "the served OpenAPI document differs from docs/openapi.json; if the change is meant, run {WRITE}=1 (see this file's doc)"
    );
    assert!(
        std::fs::read_to_string(&markdown_path).unwrap() == markdown,
        "docs/API.md is not the rendering of the served document; run {WRITE}=1 (see this file's doc)"
    );
}

/// The document as Markdown: each operation under its tag (method, path, what it does, its
/// parameters, body and answers), then each schema with its fields.
fn render(doc: &Value) -> String {
    let mut out = String::new();
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let _ = writeln!(out, "# {title} reference\n");
    let _ = writeln!(
        out,
        "Rendered from the OpenAPI document the server serves at `/api/openapi.json` (committed as \
         [`openapi.json`](openapi.json)); `tests/api/api_reference.rs` keeps both current. Errors are \
         `ErrorBody` (`code`, `message`) with the status the operation lists.\n"
    );
    let mut by_tag: std::collections::BTreeMap<String, Vec<(String, String, &Value)>> = Default::default();
    for (path, operations) in doc["paths"].as_object().into_iter().flatten() {
        for (method, operation) in operations.as_object().into_iter().flatten() {
            let tag = operation["tags"][0].as_str().unwrap_or("other").to_owned();
            by_tag
                .entry(tag)
                .or_default()
                .push((method.to_uppercase(), path.clone(), operation));
        }
    }
    for (tag, operations) in &by_tag {
        let _ = writeln!(out, "## {tag}\n");
        for (method, path, operation) in operations {
            let id = operation["operationId"].as_str().unwrap_or("");
            let _ = writeln!(out, "### `{method} {path}` ({id})\n");
            for text in [&operation["summary"], &operation["description"]] {
                if let Some(text) = text.as_str().filter(|t| !t.is_empty()) {
                    let _ = writeln!(out, "{}\n", one_paragraph(text));
                }
            }
            let parameters = operation["parameters"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            if !parameters.is_empty() {
                let _ = writeln!(out, "| parameter | in | type | required |\n|---|---|---|---|");
                for p in parameters {
                    let _ = writeln!(
                        out,
                        "| `{}` | {} | {} | {} |",
                        p["name"].as_str().unwrap_or(""),
                        p["in"].as_str().unwrap_or(""),
                        type_of(&p["schema"]),
                        if p["required"].as_bool() == Some(true) {
                            "yes"
                        } else {
                            "no"
                        }
                    );
                }
                out.push('\n');
            }
            if let Some(body) = operation["requestBody"]["content"].as_object() {
                for (media, content) in body {
                    let _ = writeln!(out, "Body (`{media}`): {}\n", type_of(&content["schema"]));
                }
            }
            let _ = writeln!(out, "| status | answer |\n|---|---|");
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                let body = response["content"]
                    .as_object()
                    .and_then(|c| c.values().next())
                    .map(|c| type_of(&c["schema"]))
                    .unwrap_or_default();
                let description = one_paragraph(response["description"].as_str().unwrap_or(""));
                let answer = [body, description]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                let _ = writeln!(out, "| {status} | {answer} |");
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "## Schemas\n");
    for (name, schema) in doc["components"]["schemas"].as_object().into_iter().flatten() {
        let _ = writeln!(out, "### {name}\n");
        if let Some(text) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_paragraph(text));
        }
        match schema["properties"].as_object() {
            Some(properties) => {
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let _ = writeln!(out, "| field | type | required | meaning |\n|---|---|---|---|");
                for (field, property) in properties {
                    let _ = writeln!(
                        out,
                        "| `{field}` | {} | {} | {} |",
                        type_of(property),
                        if required.contains(&field.as_str()) {
                            "yes"
                        } else {
                            "no"
                        },
                        one_paragraph(property["description"].as_str().unwrap_or(""))
                    );
                }
            }
            None => {
                let _ = writeln!(out, "{}", type_of(schema));
            }
        }
        out.push('\n');
    }
    out
}

/// A schema in a few words: a link to a named schema, an enum's values, or its type.
fn type_of(schema: &Value) -> String {
    if let Some(target) = schema["$ref"].as_str() {
        let name = target.rsplit('/').next().unwrap_or(target);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.as_str().unwrap_or("?")))
            .collect();
        return format!("one of {}", values.join(", "));
    }
    for combined in ["oneOf", "anyOf", "allOf"] {
        if let Some(parts) = schema[combined].as_array() {
            let parts: Vec<String> = parts.iter().map(type_of).filter(|p| !p.is_empty()).collect();
            return parts.join(" or ");
        }
    }
    match &schema["type"] {
        Value::String(kind) if kind == "array" => format!("array of {}", type_of(&schema["items"])),
        Value::String(kind) => match schema["format"].as_str() {
            Some(format) => format!("{kind} ({format})"),
            None => kind.clone(),
        },
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => String::new(),
    }
}

/// Text on one line, safe inside a table cell.
fn one_paragraph(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
