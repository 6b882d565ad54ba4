//! The reaction model: one emoji's count on a message and whether the reader is among it,
//! and what an emoji may be. Reacting is `crate::service::reactions`.

use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{Error, Result};

pub const MAX_EMOJI_CHARS: usize = 32;
/// Distinct emoji one message can carry.
pub const MAX_EMOJI_PER_MESSAGE: usize = 20;
/// Companion rows read for one page; past this, counts are what was read.
pub const MAX_ROWS_PER_PAGE: usize = 20_000;

/// How many members reacted with one emoji, and whether the reader is among them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionCount {
    pub emoji: String,
    pub count: u32,
    pub me: bool,
}

crate::text_field!(
    /// A reaction's emoji in the document: what [`checked_emoji`] accepts.
    ReactionEmoji, 1, MAX_EMOJI_CHARS, crate::text::NO_SPACES
);

/// An emoji as a reaction: a Unicode emoji or a `:shortcode:`, 1..=32 characters, no spaces.
pub fn checked_emoji(emoji: &str) -> Result<&str> {
    let valid = !emoji.is_empty()
        && emoji.chars().count() <= MAX_EMOJI_CHARS
        && !emoji.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(emoji)
    } else {
        Err(Error::validation(format!(
            "an emoji is 1..={MAX_EMOJI_CHARS} characters without spaces"
        )))
    }
}
