//! Markdown as a person types it, rendered once on the server into the HTML every reader gets:
//! CommonMark with GitHub's strikethrough, tables and bare-URL autolinks, a line break where
//! the text has one, and GitHub's emoji shortcodes (`:tada:`). What a composer's text cannot mean is not rendered: raw HTML shows as the
//! text it is, an image is a link to it (a reader's client fetches nothing it did not ask
//! for), and elements nested deeper than [`MAX_DEPTH`] keep their text but not their element,
//! so a hostile text costs time and output in proportion to its length. The rendering then
//! goes through the one sanitizer (`html::sanitize`), as any HTML a client sends does.

use std::collections::HashSet;

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd, TextMergeStream};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::messages::mentions::MAX_MENTIONS;

/// Elements open at once, at most; deeper ones are left out (their text stays).
pub const MAX_DEPTH: usize = 16;
/// The longest rendering kept, in UTF-16 units: a message row keeps it beside its source, and
/// an outgoing webhook's row keeps it as JSON (where a quote takes two) in one property of
/// 32 Ki.
pub const MAX_RENDERED_UNITS: usize = 15_000;
/// Events a rendering may take: a source of the longest text a message may have can ask for
/// far more (a table's missing cells are filled in), and is refused instead.
const MAX_EVENTS: usize = 50_000;

/// How a message's `text` is written: HTML (the default, what clients have always sent), or
/// Markdown the server renders and keeps beside its rendering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextFormat {
    #[default]
    Html,
    Markdown,
}

/// What of the room a Markdown text's names refer to: the room's members among the `@id` it
/// writes ([`named_users`]), and the room's own emoji (when it writes a `:name:` that is no
/// standard shortcode, [`names_custom_emoji`]).
#[derive(Debug, Clone, Default)]
pub struct RoomNames {
    pub members: HashSet<String>,
    pub emoji: HashSet<String>,
}

/// What a message stores for `text` written in `format`: sanitized HTML, and the Markdown
/// source it was rendered from, if it was; `@id` in Markdown mentions the user `id` and
/// `:name:` marks the room's own emoji when `names` has them. A source longer than a message
/// may be is refused before it is rendered.
pub fn body(text: &str, format: TextFormat, names: &RoomNames) -> Result<(String, Option<String>)> {
    match format {
        TextFormat::Html => Ok((crate::html::sanitize(text), None)),
        TextFormat::Markdown => {
            crate::messages::within_text_limit(text)?;
            let html = render(text, names)
                .ok_or_else(|| Error::validation("the message renders to more HTML than a message may hold"))?;
            Ok((html, Some(text.to_owned())))
        }
    }
}

/// The user ids Markdown `source` writes as `@id` (after a space or at the start of a line,
/// up to a space or one of `@<>&"'`, without trailing punctuation), each once, at most
/// [`MAX_MENTIONS`]: those a send looks up to know which are the room's members.
pub fn named_users(source: &str) -> Vec<String> {
    let mut named = Vec::new();
    for (_, id) in mentions_in(source) {
        if !named.iter().any(|n| n == id) {
            if named.len() == MAX_MENTIONS {
                break;
            }
            named.push(id.to_owned());
        }
    }
    named
}

/// Each `@id` in `text`: the byte range of `@id` and the id.
fn mentions_in(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut previous = ' ';
    for (at, c) in text.char_indices() {
        if c == '@' && previous.is_whitespace() {
            let rest = &text[at + 1..];
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, '@' | '<' | '>' | '&' | '"' | '\''))
                .unwrap_or(rest.len());
            let id = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
            if !id.is_empty() {
                found.push((at..at + 1 + id.len(), id));
            }
        }
        previous = c;
    }
    found
}

/// Whether Markdown `source` writes a `:name:` that may be one of the room's own emoji (no
/// standard shortcode): only then does a send read the room's emoji.
pub fn names_custom_emoji(source: &str) -> bool {
    shortcodes(source)
        .iter()
        .any(|(_, name)| emojis::get_by_shortcode(name).is_none())
}

/// Sanitized HTML for the Markdown `source`, `@id` of the room's members as mentions and
/// `:name:` of its own emoji marked; none when it takes more than [`MAX_EVENTS`].
pub fn render(source: &str, names: &RoomNames) -> Option<String> {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let mut events: Vec<Event> = Vec::new();
    // For each open element, whether it was written (not past MAX_DEPTH); how many were.
    let mut open: Vec<bool> = Vec::new();
    let mut written = 0usize;
    let (mut in_link, mut in_code) = (0usize, 0usize);
    // Neighbouring texts as one, so a URL or an `@id` is seen whole.
    for event in TextMergeStream::new(Parser::new_ext(source, options)) {
        if events.len() > MAX_EVENTS {
            return None;
        }
        match event {
            Event::Start(tag) => {
                let tag = match tag {
                    Tag::Image {
                        link_type,
                        dest_url,
                        title,
                        id,
                    } => Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    },
                    Tag::HtmlBlock => Tag::Paragraph,
                    other => other,
                };
                match &tag {
                    Tag::Link { .. } => in_link += 1,
                    Tag::CodeBlock(_) => in_code += 1,
                    _ => {}
                }
                let write = written < MAX_DEPTH;
                open.push(write);
                if write {
                    written += 1;
                    events.push(Event::Start(tag));
                }
            }
            Event::End(end) => {
                let end = match end {
                    TagEnd::Image => TagEnd::Link,
                    TagEnd::HtmlBlock => TagEnd::Paragraph,
                    other => other,
                };
                match end {
                    TagEnd::Link => in_link = in_link.saturating_sub(1),
                    TagEnd::CodeBlock => in_code = in_code.saturating_sub(1),
                    _ => {}
                }
                if open.pop().unwrap_or(false) {
                    written -= 1;
                    events.push(Event::End(end));
                }
            }
            Event::Html(text) | Event::InlineHtml(text) => events.push(Event::Text(text)),
            Event::SoftBreak => events.push(Event::HardBreak),
            Event::Text(text) if in_link == 0 && in_code == 0 => autolinked(text, names, &mut events),
            other => events.push(other),
        }
    }
    let mut html = String::with_capacity(source.len() * 2);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    // The line end after the last block is no part of the message (and would be in its text).
    Some(crate::html::sanitize(html.trim_end()))
}

/// `text` with each `http(s)` URL written out in it made a link, as GitHub does, and each
/// `@id` of the room's members a mention.
fn autolinked<'a>(text: CowStr<'a>, names: &RoomNames, events: &mut Vec<Event<'a>>) {
    let mut finder = linkify::LinkFinder::new();
    finder.kinds(&[linkify::LinkKind::Url]);
    let mut rest = 0;
    for link in finder.links(&text) {
        let url = link.as_str();
        let scheme = url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            continue;
        }
        if link.start() > rest {
            mentioned(&text[rest..link.start()], names, events);
        }
        events.push(Event::Start(Tag::Link {
            link_type: LinkType::Autolink,
            dest_url: CowStr::from(url.to_owned()),
            title: CowStr::Borrowed(""),
            id: CowStr::Borrowed(""),
        }));
        events.push(Event::Text(CowStr::from(url.to_owned())));
        events.push(Event::End(TagEnd::Link));
        rest = link.end();
    }
    if rest < text.len() {
        mentioned(&text[rest..], names, events);
    }
}

/// `text` with each `@id` of the room's members a mention span (what `Mentions::parse` reads).
fn mentioned<'a>(text: &str, names: &RoomNames, events: &mut Vec<Event<'a>>) {
    let mut rest = 0;
    for (range, id) in mentions_in(text) {
        if !names.members.contains(id) {
            continue;
        }
        if range.start > rest {
            emojied(&text[rest..range.start], &names.emoji, events);
        }
        let id = crate::html::escape(id);
        events.push(Event::InlineHtml(CowStr::from(format!(
            r#"<span data-type="mention" data-id="{id}">@{id}</span>"#
        ))));
        rest = range.end;
    }
    if rest < text.len() {
        emojied(&text[rest..], &names.emoji, events);
    }
}

/// `text` with each `:shortcode:` GitHub knows (`:tada:`, `:+1:`) as its emoji and each
/// `:name:` of the room's own `emoji` marked as one (its text the name); any other `:word:`
/// stays as written.
fn emojied<'a>(text: &str, emoji: &HashSet<String>, events: &mut Vec<Event<'a>>) {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (range, name) in shortcodes(text) {
        out.push_str(&text[rest..range.start]);
        rest = range.end;
        if let Some(standard) = emojis::get_by_shortcode(name) {
            out.push_str(standard.as_str());
        } else if emoji.contains(name) {
            if !out.is_empty() {
                events.push(Event::Text(CowStr::from(std::mem::take(&mut out))));
            }
            events.push(Event::InlineHtml(CowStr::from(format!(
                r#"<span data-type="emoji" data-id="{name}">:{name}:</span>"#
            ))));
        } else {
            out.push_str(&text[range]);
        }
    }
    out.push_str(&text[rest..]);
    if !out.is_empty() {
        events.push(Event::Text(CowStr::from(out)));
    }
}

/// Each `:name:` in `text` (letters, digits, `_`, `+`, `-`) standing apart — not inside
/// `fe80::100:1` or `10:30` — with the byte range of `:name:`.
fn shortcodes(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let apart = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != ':');
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find(':').map(|i| at + i) {
        let after = &text[open + 1..];
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-')))
            .unwrap_or(after.len());
        let closed = after[name_end..].starts_with(':');
        let before = text[..open].chars().last();
        if name_end > 0 && closed && apart(before) && apart(after[name_end + 1..].chars().next()) {
            let end = open + 1 + name_end + 1;
            found.push((open..end, &after[..name_end]));
            at = end;
        } else {
            at = open + 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::MAX_TEXT_CHARS;

    fn render(source: &str) -> String {
        let names = RoomNames {
            members: HashSet::from(["bob".to_owned()]),
            emoji: HashSet::from(["partyparrot".to_owned()]),
        };
        super::render(source, &names).expect("within the budget")
    }

    #[test]
    fn the_rooms_own_emoji_are_marked_and_other_names_stay_text() {
        assert_eq!(
            render("ship it :partyparrot: :nope: :tada:"),
            "<p>ship it <span data-type=\"emoji\" data-id=\"partyparrot\">:partyparrot:</span> :nope: 🎉</p>"
        );
        assert_eq!(render("`:partyparrot:`"), "<p><code>:partyparrot:</code></p>");
        assert_eq!(
            render("@bob :partyparrot:"),
            "<p><span data-type=\"mention\" data-id=\"bob\">@bob</span> <span data-type=\"emoji\" data-id=\"partyparrot\">:partyparrot:</span></p>"
        );
        assert!(names_custom_emoji("so :partyparrot:"));
        assert!(!names_custom_emoji("so :tada: at 10:30"));
    }

    #[test]
    fn formatting_links_and_code_render_as_github_does() {
        assert_eq!(
            render("Who owns the **launch email**?"),
            "<p>Who owns the <strong>launch email</strong>?</p>"
        );
        assert_eq!(
            render("agenda: https://example.com/agenda"),
            "<p>agenda: <a href=\"https://example.com/agenda\" rel=\"noopener nofollow ugc\">https://example.com/agenda</a></p>"
        );
        assert_eq!(render("~~old~~ *new*"), "<p><del>old</del> <em>new</em></p>");
        assert_eq!(render("one\ntwo"), "<p>one<br>\ntwo</p>");
        assert_eq!(
            render("`https://x.example` and\n\n```\nhttps://y.example <b>\n```"),
            "<p><code>https://x.example</code> and</p>\n<pre><code>https://y.example &lt;b&gt;\n</code></pre>"
        );
    }

    #[test]
    fn shortcodes_are_emoji_outside_code() {
        assert_eq!(
            render(":tada: shipped :+1: at 10:30 :nope:"),
            "<p>🎉 shipped 👍 at 10:30 :nope:</p>"
        );
        assert_eq!(render("`:tada:`"), "<p><code>:tada:</code></p>");
        assert_eq!(
            render("fe80::100:1 and 00:de:ad:be:ef"),
            "<p>fe80::100:1 and 00:de:ad:be:ef</p>"
        );
        assert_eq!(render("(:tada:)"), "<p>(🎉)</p>");
    }

    #[test]
    fn members_named_are_mentioned_and_others_stay_text() {
        assert_eq!(
            render("@bob and @carol, not in `@bob`"),
            "<p><span data-type=\"mention\" data-id=\"bob\">@bob</span> and @carol, not in <code>@bob</code></p>"
        );
        assert_eq!(render("mail@bob.example"), "<p>mail@bob.example</p>");
        assert_eq!(named_users("@bob, @carol! @bob x@dave"), ["bob", "carol"]);
    }

    #[test]
    fn what_a_composer_cannot_mean_is_not_rendered() {
        assert_eq!(
            render("<script>alert(1)</script>"),
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
        );
        assert_eq!(
            render("a <b onclick=x>b</b>"),
            "<p>a &lt;b onclick=x&gt;b&lt;/b&gt;</p>"
        );
        let link = render("[x](javascript:alert(1))");
        assert!(!link.contains("javascript"), "{link}");
        assert_eq!(
            render("![a cat](https://cats.example/c.png)"),
            "<p><a href=\"https://cats.example/c.png\" rel=\"noopener nofollow ugc\">a cat</a></p>"
        );
    }

    #[test]
    fn deep_nesting_is_bounded_in_time_and_output() {
        for source in [
            format!("{}x{}", "*".repeat(10_000), "*".repeat(10_000)),
            format!("{}x", "> ".repeat(10_000)),
            format!("{}x", ">".repeat(262_000)),
            format!("{}x", "- ".repeat(5_000)),
            format!("{}x{}", "[".repeat(10_000), "](u)".repeat(10_000)),
        ] {
            if let Some(html) = super::render(&source, &RoomNames::default()) {
                assert!(html.len() < 4 * source.len() + 1000, "{} bytes", html.len());
            }
        }
    }

    #[test]
    fn a_table_whose_missing_cells_would_outgrow_the_budget_is_refused() {
        let header = format!("{}|\n{}|\n", "|a".repeat(257), "|-".repeat(257));
        let table = format!("{header}{}", "x\n".repeat(1_024));
        assert!(table.chars().count() < MAX_TEXT_CHARS);
        assert_eq!(super::render(&table, &RoomNames::default()), None);
        assert!(body(&table, TextFormat::Markdown, &RoomNames::default()).is_err());
        assert!(
            body(
                &"x".repeat(MAX_TEXT_CHARS + 1),
                TextFormat::Markdown,
                &RoomNames::default()
            )
            .is_err()
        );
    }

    #[test]
    fn a_url_is_linked_whole_whatever_markdown_characters_it_has() {
        assert_eq!(
            render("see https://en.wikipedia.org/wiki/Rust_(programming_language) and HTTPS://example.com/~alice"),
            "<p>see <a href=\"https://en.wikipedia.org/wiki/Rust_(programming_language)\" rel=\"noopener nofollow ugc\">https://en.wikipedia.org/wiki/Rust_(programming_language)</a> and <a href=\"HTTPS://example.com/~alice\" rel=\"noopener nofollow ugc\">HTTPS://example.com/~alice</a></p>"
        );
    }
}
