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
/// How long a run's `response_url` takes answers, as Slack's does.
pub const LATER_ANSWER_MINUTES: i64 = 30;
/// Answers a run's `response_url` takes at most, as Slack's does.
pub const MAX_LATER_ANSWERS: i64 = 5;

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

/// A handler's answer as Slack takes it, in a command's response or later at its
/// `response_url`. Slack's other fields (`replace_original`, `delete_original`, attachments)
/// are read and ignored: an answer here is never replaced.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct SlackAnswer {
    /// `in_channel`: posted in the room as the command's bot; anything else (the default):
    /// shown only to the member who ran it.
    #[serde(default)]
    pub response_type: Option<String>,
    /// Slack markup.
    #[serde(default)]
    pub text: Option<String>,
    /// Slack blocks, when there is no `text`: their text is shown, a block a line.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub blocks: Option<Vec<serde_json::Value>>,
}

/// What a run's `response_url` may still do: granted when the command runs (its token stored
/// hashed), for [`LATER_ANSWER_MINUTES`] and at most [`MAX_LATER_ANSWERS`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaterAnswers {
    /// The command's name, without the `/`.
    pub command: String,
    /// When the command was registered: one deleted and registered again under its name is
    /// another command, which its predecessor's runs may not answer for.
    pub command_created_at: DateTime<Utc>,
    /// Who ran it: an ephemeral answer goes to them alone.
    pub caller: String,
    pub granted_at: DateTime<Utc>,
    /// Answers taken so far.
    pub used: i64,
}

impl LaterAnswers {
    /// Whether one more answer may come at `now`: a lapsed URL is gone (404, as an unknown
    /// one is), a used-up one a 409.
    pub fn check(&self, now: DateTime<Utc>) -> Result<()> {
        if now - self.granted_at > chrono::Duration::minutes(LATER_ANSWER_MINUTES) {
            return Err(later_answer_url_unknown());
        }
        if self.used >= MAX_LATER_ANSWERS {
            return Err(Error::Conflict(format!(
                "a response_url takes at most {MAX_LATER_ANSWERS} answers"
            )));
        }
        Ok(())
    }
}

/// An unknown, lapsed or revoked `response_url`: all answer the same.
pub fn later_answer_url_unknown() -> Error {
    Error::not_found(format!(
        "no command run answers at this response_url (it takes answers for {LATER_ANSWER_MINUTES} minutes)"
    ))
}

/// What an answer to a `response_url` did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaterAnswered {
    /// The message posted in the room (`in_channel`).
    pub message: Option<crate::messages::Message>,
    /// True when the answer went to the member who ran the command alone.
    pub ephemeral: bool,
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
        let body: SlackAnswer = serde_json::from_str(text)
            .map_err(|e| Error::validation(format!("the command's handler answered JSON Slack would not read: {e}")))?;
        Ok(Answer::from(body))
    }
}

impl From<SlackAnswer> for Answer {
    fn from(body: SlackAnswer) -> Answer {
        let text = match (body.text, body.blocks) {
            (Some(text), _) if !text.is_empty() => text,
            (_, Some(blocks)) => blocks_text(&blocks),
            _ => String::new(),
        };
        Answer {
            in_channel: body.response_type.as_deref() == Some("in_channel"),
            text,
        }
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
    fn a_response_url_takes_five_answers_within_30_minutes() {
        let at = chrono::DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let grant = |used| LaterAnswers {
            command: "deploy".into(),
            command_created_at: at,
            caller: "ana".into(),
            granted_at: at,
            used,
        };
        let minutes = |m| at + chrono::Duration::minutes(m);
        assert!(grant(0).check(minutes(30)).is_ok());
        assert!(grant(4).check(at).is_ok());
        assert!(matches!(grant(5).check(at), Err(Error::Conflict(_))));
        assert!(matches!(grant(0).check(minutes(31)), Err(Error::NotFound(_))));
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
