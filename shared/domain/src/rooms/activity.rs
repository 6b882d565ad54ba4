//! A room's last activity as its members' room list shows it: the newest message's preview.
//!
//! The preview is plain text, whatever the message's type: a member's or a webhook's message
//! is sanitized HTML, so its text content is taken (tags removed, entities decoded); the
//! server's own lines are plain text already. A client renders it as text, never as markup.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::html;
use crate::messages::{Message, MessageType};

/// Characters of a message a preview keeps.
pub const MAX_PREVIEW_CHARS: usize = 140;

/// The newest message of a room, shortened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagePreview {
    pub message_id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// Absent once the message is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author_name: Option<String>,
    /// Plain text, at most 140 characters (a shortened one ends with `…`); absent once the
    /// message is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deleted: bool,
}

impl MessagePreview {
    /// The preview of `message` as it is now: a deleted one keeps only its id, type and time.
    pub fn of(message: &Message) -> MessagePreview {
        let live = message.is_live();
        let text = match message.kind {
            MessageType::Message | MessageType::Webhook => html::text_content(&message.text),
            _ => message.text.clone(),
        };
        let text = match (&message.poll, text.trim()) {
            (Some(poll), "") => poll.question.clone(),
            (_, text) => text.to_owned(),
        };
        MessagePreview {
            message_id: message.id.clone(),
            kind: message.kind,
            author_id: live.then(|| message.author_id.clone()),
            author_name: live.then(|| message.author_name.clone()),
            text: live.then(|| shorten(&text)),
            created_at: message.created_at,
            deleted: !live,
        }
    }

    /// The preview without what a retention period has expired: only the time stays.
    pub fn expired(self) -> MessagePreview {
        MessagePreview {
            author_id: None,
            author_name: None,
            text: None,
            ..self
        }
    }
}

/// `text` on one line, cut to [`MAX_PREVIEW_CHARS`].
fn shorten(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_PREVIEW_CHARS) {
        None => line,
        Some((end, _)) => {
            let mut cut: String = line[..end].chars().take(MAX_PREVIEW_CHARS - 1).collect();
            cut.push('…');
            cut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_preview_is_cut_on_one_line() {
        let short = shorten("a\n  b");
        assert_eq!(short, "a b");
        let long = shorten(&"é".repeat(500));
        assert_eq!(long.chars().count(), MAX_PREVIEW_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(
            shorten(&"x".repeat(MAX_PREVIEW_CHARS)).chars().count(),
            MAX_PREVIEW_CHARS
        );
    }
}
