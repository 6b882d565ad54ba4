//! A room's own slash commands, Slack-compatible: a manager registers `/name` with a URL; a
//! member running it makes the server POST Slack's slash-command form to that URL, signed as
//! Slack signs it, and the handler's answer is shown as Slack shows it (`in_channel` posted in
//! the room as the command's bot, `ephemeral` only to the caller). The request and the signing
//! are `adapters/outgoing.rs`'s; running one is `service/commands.rs`'s.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::commands::MAX_NAME_CHARS;
use crate::commands::{COMMANDS, is_name};
use crate::error::{Error, Result};

/// A room's own commands at most.
pub const MAX_PER_ROOM: usize = 50;
/// Characters of a handler's URL at most.
pub const MAX_URL_CHARS: usize = 2000;
/// Characters of a description at most.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// Bytes of a handler's answer read at most (Slack's message text is at most 40,000
/// characters; blocks add their JSON around it).
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// `POST /api/rooms/{roomId}/slash-commands`: a command of the room's own.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSlashCommand {
    /// Without the `/`: 1-32 of `a-z`, `0-9`, `_`, `-`, and no built-in command's name.
    #[schema(min_length = 1, max_length = 32, pattern = "^[a-z0-9_-]+$")]
    pub name: String,
    /// Where it is POSTed: `https` (`http` to a private address only where the operator
    /// allowed private endpoints).
    #[schema(min_length = 1, max_length = 2000)]
    pub url: String,
    /// What it does, as the composer suggests it (at most 200 characters).
    #[serde(default)]
    #[schema(max_length = 200)]
    pub description: Option<String>,
}

impl NewSlashCommand {
    /// The name, URL and description checked (the URL's reach is the sender's to check).
    pub fn checked(&self) -> Result<(String, String, String)> {
        let name = self.name.as_str();
        if !is_name(name) {
            return Err(Error::validation(format!(
                "name must be 1-{MAX_NAME_CHARS} of a-z, 0-9, '_' or '-'"
            )));
        }
        if COMMANDS.iter().any(|(builtin, _)| *builtin == name) {
            return Err(Error::validation(format!("/{name} is a built-in command")));
        }
        let url = self.url.trim();
        if url.is_empty() || url.chars().count() > MAX_URL_CHARS {
            return Err(Error::validation(format!("url must be 1-{MAX_URL_CHARS} characters")));
        }
        let description = self.description.as_deref().unwrap_or("").trim();
        if description.chars().count() > MAX_DESCRIPTION_CHARS || description.chars().any(char::is_control) {
            return Err(Error::validation(format!(
                "description is at most {MAX_DESCRIPTION_CHARS} characters on one line"
            )));
        }
        Ok((name.to_owned(), url.to_owned(), description.to_owned()))
    }
}

/// A room's own command as listed (never its signing secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlashCommand {
    pub name: String,
    pub url: String,
    pub description: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// A command just registered, with the secret its handler verifies requests with: shown in
/// this answer only.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlashCommandCreated {
    #[serde(flatten)]
    pub command: SlashCommand,
    /// Slack's "signing secret": the key of `X-Slack-Signature`.
    pub signing_secret: String,
}

/// What a handler answered, as Slack reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// `response_type: in_channel`: posted in the room; else shown only to the caller.
    pub in_channel: bool,
    /// Slack markup (`text`, else the text of `blocks`); empty for a bare acknowledgement.
    pub text: String,
}

#[derive(Deserialize)]
struct AnswerBody {
    #[serde(default)]
    response_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    blocks: Option<Vec<serde_json::Value>>,
}

impl Answer {
    /// Reads a 2xx answer: JSON (`response_type`, `text`, `blocks`), plain text (ephemeral, as
    /// Slack shows it), or nothing (an acknowledgement).
    pub fn read(body: &[u8], json: bool) -> Result<Answer> {
        let text = std::str::from_utf8(body)
            .map_err(|_| Error::validation("the command's handler answered bytes that are not text"))?;
        if text.trim().is_empty() {
            return Ok(Answer {
                in_channel: false,
                text: String::new(),
            });
        }
        if !json && !text.trim_start().starts_with('{') {
            return Ok(Answer {
                in_channel: false,
                text: text.to_owned(),
            });
        }
        let body: AnswerBody = serde_json::from_str(text)
            .map_err(|e| Error::validation(format!("the command's handler answered JSON Slack would not read: {e}")))?;
        let text = match (body.text, body.blocks) {
            (Some(text), _) if !text.is_empty() => text,
            (_, Some(blocks)) => blocks_text(&blocks),
            _ => String::new(),
        };
        Ok(Answer {
            in_channel: body.response_type.as_deref() == Some("in_channel"),
            text,
        })
    }
}

/// The text of Slack blocks, reduced to Slack markup a block a line: a section's or header's
/// text and fields, a context's texts; images, buttons and the rest have no text to show.
fn blocks_text(blocks: &[serde_json::Value]) -> String {
    let text_of = |value: &serde_json::Value| value.get("text").and_then(|t| t.as_str()).map(str::to_owned);
    let mut lines = Vec::new();
    for block in blocks {
        if let Some(text) = block.get("text").and_then(text_of) {
            lines.push(text);
        }
        for list in ["fields", "elements"] {
            for item in block.get(list).and_then(|l| l.as_array()).into_iter().flatten() {
                if let Some(text) = text_of(item) {
                    lines.push(text);
                }
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(name: &str, url: &str) -> NewSlashCommand {
        NewSlashCommand {
            name: name.into(),
            url: url.into(),
            description: None,
        }
    }

    #[test]
    fn a_name_is_short_plain_and_not_built_in() {
        assert!(new("deploy", "https://ci.example.com/slack").checked().is_ok());
        for bad in ["", "Deploy", "de ploy", "me", "shrug", &"a".repeat(33)] {
            assert!(
                matches!(new(bad, "https://x.example").checked(), Err(Error::Validation(_))),
                "{bad}"
            );
        }
        assert!(new("deploy", "").checked().is_err());
    }

    #[test]
    fn an_answer_reads_as_slack_reads_it() {
        let read = |body: &str, json: bool| Answer::read(body.as_bytes(), json).unwrap();
        assert_eq!(
            read("", false),
            Answer {
                in_channel: false,
                text: String::new()
            }
        );
        assert_eq!(
            read("just text", false),
            Answer {
                in_channel: false,
                text: "just text".into()
            }
        );
        assert_eq!(
            read(r#"{"response_type":"in_channel","text":"*hi*"}"#, true),
            Answer {
                in_channel: true,
                text: "*hi*".into()
            }
        );
        let blocks = r#"{"blocks":[{"type":"header","text":{"type":"plain_text","text":"Deploy"}},
            {"type":"section","text":{"type":"mrkdwn","text":"*main* is out"},"fields":[{"type":"mrkdwn","text":"by ana"}]},
            {"type":"context","elements":[{"type":"mrkdwn","text":"2 min"}]},{"type":"divider"}]}"#;
        assert_eq!(
            read(blocks, true),
            Answer {
                in_channel: false,
                text: "Deploy\n*main* is out\nby ana\n2 min".into()
            }
        );
        assert!(Answer::read(b"{not json", true).is_err());
    }
}
