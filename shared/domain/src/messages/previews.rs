//! Link previews: what a member's message shows of the first page it links to (title,
//! description, site name, image), and the rules about them that need no I/O — which link a
//! message is previewed by, and how long and what shape each field may be. Fetching and
//! parsing the page is the adapter's (`adapters::link_preview`); storing it, the store's.
//!
//! Only the first link is previewed: one fetch per message bounds what a message can make the
//! server do, and it is the link clients show a card for.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Message, MessageType};
use crate::error::{Error, Result};
use crate::ids::UserId;

/// The longest URL that is previewed (longer ones are not fetched).
pub const MAX_URL_CHARS: usize = 2048;
/// The longest title kept; a longer one is cut at a character boundary with an ellipsis.
pub const MAX_TITLE_CHARS: usize = 200;
/// The longest description kept.
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// The longest site name kept.
pub const MAX_SITE_NAME_CHARS: usize = 100;

/// What a message shows of the page it links to. Every field is plain text (never markup),
/// trimmed, single-spaced and cut to its limit; `imageUrl` is an absolute `http(s)` URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkPreview {
    /// The link as the message has it (before any redirect).
    pub url: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub site_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub image_url: Option<String>,
}

/// What a page says of itself, as read from its HTML, before the limits apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageMeta {
    pub og_title: Option<String>,
    pub title: Option<String>,
    pub og_description: Option<String>,
    pub description: Option<String>,
    pub og_site_name: Option<String>,
    pub og_image: Option<String>,
}

impl LinkPreview {
    /// The preview of `url` from what its page said: OpenGraph first, then `<title>` and the
    /// `description` meta tag. `None` when the page names no title at all (a card without
    /// one says nothing). `image` is the page's image resolved to an absolute URL by the
    /// caller (`None` when it is not `http(s)`).
    pub fn from_meta(url: &str, meta: PageMeta, image: Option<String>) -> Option<LinkPreview> {
        let field = |value: Option<String>, max: usize| value.map(|v| clean(&v, max)).filter(|v| !v.is_empty());
        let title = field(meta.og_title, MAX_TITLE_CHARS).or_else(|| field(meta.title, MAX_TITLE_CHARS))?;
        Some(LinkPreview {
            url: url.to_owned(),
            title,
            description: field(meta.og_description, MAX_DESCRIPTION_CHARS)
                .or_else(|| field(meta.description, MAX_DESCRIPTION_CHARS)),
            site_name: field(meta.og_site_name, MAX_SITE_NAME_CHARS),
            image_url: image.filter(|i| i.chars().count() <= MAX_URL_CHARS && is_http(i)),
        })
    }
}

/// Whether a message is previewed at all: a member's `Message` (a webhook's, an automation's
/// or the server's own lines are not — links from people get a preview).
pub fn is_previewed(message: &Message) -> bool {
    message.kind == MessageType::Message && message.deleted_at.is_none()
}

/// The first `http(s)` link of a message's sanitized HTML text: an anchor's `href` or a bare
/// URL, whichever comes first; `None` when there is none or it is too long.
pub fn first_link(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = [lower.find("http://"), lower.find("https://")]
        .into_iter()
        .flatten()
        .min()?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '\'' | '`'))
        .unwrap_or(rest.len());
    // The sanitizer escapes `&` as `&amp;` (in an attribute as in text).
    let link = rest[..end].replace("&amp;", "&");
    let link = link.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
    (link.len() > "https://".len() && link.chars().count() <= MAX_URL_CHARS).then(|| link.to_owned())
}

/// Whether `user` may remove `message`'s preview: its author alone. The preview is the
/// author's choice of how their own message looks; a moderator who objects to a page removes
/// the message.
pub fn may_remove(message: &Message, user: &UserId) -> Result<()> {
    match message.author_id == user.as_str() {
        true => Ok(()),
        false => Err(Error::Forbidden(
            "only its author may remove a message's preview".into(),
        )),
    }
}

fn is_http(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// `value` as one line of plain text: control characters dropped, whitespace runs made one
/// space, trimmed, and cut to `max` characters (with an ellipsis when cut).
pub fn clean(value: &str, max: usize) -> String {
    let words: Vec<&str> = value
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let line = words.join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_link_of_a_message_is_its_first_http_url() {
        assert_eq!(
            first_link(r#"see <a href="https://a.example/x?y=1&amp;z=2">this</a> and http://b.example"#),
            Some("https://a.example/x?y=1&z=2".into())
        );
        assert_eq!(
            first_link("look: http://b.example/page."),
            Some("http://b.example/page".into())
        );
        assert_eq!(first_link("ftp://c.example and https:// nothing"), None);
        assert_eq!(first_link("no link"), None);
        let long = format!("https://a.example/{}", "x".repeat(MAX_URL_CHARS));
        assert_eq!(first_link(&long), None);
    }

    #[test]
    fn a_preview_prefers_open_graph_and_keeps_its_fields_short_and_plain() {
        let meta = PageMeta {
            og_title: Some("  OG\n\ttitle ".into()),
            title: Some("Tag title".into()),
            og_description: None,
            description: Some("d".repeat(MAX_DESCRIPTION_CHARS + 10)),
            og_site_name: Some("Site\u{0}".into()),
            og_image: None,
        };
        let preview = LinkPreview::from_meta("https://a.example", meta, Some("javascript:alert(1)".into())).unwrap();
        assert_eq!(preview.title, "OG title");
        assert_eq!(preview.site_name.as_deref(), Some("Site"));
        assert_eq!(
            preview.description.as_ref().unwrap().chars().count(),
            MAX_DESCRIPTION_CHARS
        );
        assert!(preview.description.unwrap().ends_with('…'));
        assert_eq!(preview.image_url, None, "only http(s) images");

        let fallback = PageMeta {
            title: Some("Tag title".into()),
            ..PageMeta::default()
        };
        assert_eq!(
            LinkPreview::from_meta("https://a.example", fallback, None)
                .unwrap()
                .title,
            "Tag title"
        );
        assert_eq!(
            LinkPreview::from_meta("https://a.example", PageMeta::default(), None),
            None
        );
    }
}
