//! Emoji by shortcode, from GitHub's gemoji set (the `emojis` crate): what `:name:` renders
//! as (`markdown.rs`) and what the composer suggests after a `:`. And a room's own emoji: an
//! image a manager uploads as an attachment and names, which `:name:` in the room's Markdown
//! marks (`<span data-type="emoji" data-id="name">:name:</span>`, its text the name, so a
//! client without the image — or after the emoji is deleted — shows the name).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{Error, Result};

/// Longest shortcode prefix looked up (the longest shortcode is shorter).
pub const MAX_QUERY_CHARS: usize = 40;
/// Suggestions a request gets at most.
pub const MAX_LIMIT: usize = 20;
const DEFAULT_LIMIT: usize = 8;

/// `GET /api/emoji`: shortcodes beginning with `q`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct EmojiQuery {
    /// The beginning of a shortcode, without colons: letters, digits, `_`, `+` or `-`.
    #[param(min_length = 1, max_length = 40, pattern = "^[A-Za-z0-9_+-]+$")]
    pub q: String,
    /// Suggestions, 1..=20 (default 8).
    #[param(minimum = 1, maximum = 20)]
    pub limit: Option<usize>,
}

/// An emoji a shortcode names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmojiSuggestion {
    /// Without colons: `tada`.
    pub shortcode: String,
    /// The emoji itself: 🎉.
    pub emoji: String,
    /// Its Unicode name: "party popper".
    pub name: String,
}

/// A room's own emoji at most.
pub const MAX_CUSTOM_PER_ROOM: usize = 100;
/// Characters of a custom emoji's name at most.
pub const MAX_CUSTOM_NAME_CHARS: usize = 32;
/// Bytes of a custom emoji's image at most.
pub const MAX_CUSTOM_BYTES: u64 = 256 * 1024;

/// `POST /api/rooms/{roomId}/emoji`: a room's own emoji, from an image the caller uploaded to
/// the room (`createUpload`) and has not sent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewCustomEmoji {
    /// Without colons: 1-32 of `a-z`, `0-9`, `_` or `-`, and no standard shortcode.
    #[schema(min_length = 1, max_length = 32, pattern = "^[a-z0-9_-]+$")]
    pub name: String,
    /// The uploaded image: PNG, JPEG, GIF or WebP, at most 256 KiB.
    #[schema(min_length = 1, max_length = 64)]
    pub attachment_id: String,
}

impl NewCustomEmoji {
    /// The name, checked.
    pub fn checked_name(&self) -> Result<&str> {
        let name = self.name.as_str();
        if !is_custom_name(name) {
            return Err(Error::validation(format!(
                "name must be 1-{MAX_CUSTOM_NAME_CHARS} of a-z, 0-9, '_' or '-'"
            )));
        }
        if emojis::get_by_shortcode(name).is_some() {
            return Err(Error::validation(format!(":{name}: is a standard emoji")));
        }
        Ok(name)
    }
}

/// Whether `name` may name a room's own emoji (the characters and length; standard shortcodes
/// are refused when one is made).
pub fn is_custom_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CUSTOM_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
}

/// Whether an attachment of type `mime` and `size` bytes may be a room's own emoji.
pub fn check_custom_image(mime: &str, size: u64) -> Result<()> {
    if !matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
        return Err(Error::validation(format!(
            "an emoji is a PNG, JPEG, GIF or WebP image, not {mime}"
        )));
    }
    if size > MAX_CUSTOM_BYTES {
        return Err(Error::validation(format!(
            "an emoji's image is at most {MAX_CUSTOM_BYTES} bytes; this one is {size}"
        )));
    }
    Ok(())
}

/// A room's own emoji.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomEmoji {
    pub name: String,
    /// Its image's stable URL (a member's, as an attachment's).
    pub url: String,
    pub attachment_id: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// The emoji whose shortcodes begin with `query.q`, shortest shortcode first.
pub fn suggestions(query: &EmojiQuery) -> Result<Vec<EmojiSuggestion>> {
    let q = query.q.as_str();
    let valid = !q.is_empty()
        && q.chars().count() <= MAX_QUERY_CHARS
        && q.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-'));
    if !valid {
        return Err(Error::validation(format!(
            "q must be 1-{MAX_QUERY_CHARS} letters, digits, '_', '+' or '-'"
        )));
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::validation(format!("limit must be 1..={MAX_LIMIT}")));
    }
    let q = q.to_ascii_lowercase();
    let mut found: Vec<EmojiSuggestion> = emojis::iter()
        .flat_map(|emoji| {
            emoji
                .shortcodes()
                .filter(|code| code.starts_with(&q))
                .map(move |code| EmojiSuggestion {
                    shortcode: code.to_owned(),
                    emoji: emoji.as_str().to_owned(),
                    name: emoji.name().to_owned(),
                })
        })
        .collect();
    found.sort_by(|a, b| (a.shortcode.len(), &a.shortcode).cmp(&(b.shortcode.len(), &b.shortcode)));
    found.truncate(limit);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(q: &str, limit: Option<usize>) -> EmojiQuery {
        EmojiQuery { q: q.into(), limit }
    }

    #[test]
    fn a_prefix_finds_its_shortcodes_shortest_first() {
        let found = suggestions(&query("tad", None)).unwrap();
        assert_eq!(
            found[0],
            EmojiSuggestion {
                shortcode: "tada".into(),
                emoji: "🎉".into(),
                name: "party popper".into()
            }
        );
        let thumbs = suggestions(&query("THUMBS", Some(20))).unwrap();
        assert!(thumbs.iter().any(|s| s.emoji == "👍"), "{thumbs:?}");
        assert!(thumbs.windows(2).all(|w| w[0].shortcode.len() <= w[1].shortcode.len()));
        assert_eq!(suggestions(&query("s", Some(3))).unwrap().len(), 3);
        assert!(suggestions(&query("zzzzqqq", None)).unwrap().is_empty());
    }

    #[test]
    fn a_bad_query_says_what_is_wrong() {
        for bad in [
            query("", None),
            query("a b", None),
            query(":tada:", None),
            query(&"a".repeat(41), None),
            query("a", Some(0)),
            query("a", Some(21)),
        ] {
            assert!(matches!(suggestions(&bad), Err(Error::Validation(_))), "{bad:?}");
        }
    }
}
