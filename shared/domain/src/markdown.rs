//! Markdown as a person types it, rendered once on the server into the HTML every reader gets:
//! CommonMark with GitHub's strikethrough, tables and bare-URL autolinks, a line break where
//! the text has one. What a composer's text cannot mean is not rendered: raw HTML shows as the
//! text it is, an image is a link to it (a reader's client fetches nothing it did not ask
//! for), and elements nested deeper than [`MAX_DEPTH`] keep their text but not their element,
//! so a hostile text costs time and output in proportion to its length. The rendering then
//! goes through the one sanitizer (`html::sanitize`), as any HTML a client sends does.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

/// Elements open at once, at most; deeper ones are left out (their text stays).
pub const MAX_DEPTH: usize = 16;
/// The longest rendering kept, in UTF-16 units: within one property of a row (32 Ki), which a
/// source of the longest text a message may have (10,000 characters) can outgrow.
pub const MAX_RENDERED_UNITS: usize = 30_000;

/// How a message's `text` is written: HTML (the default, what clients have always sent), or
/// Markdown the server renders and keeps beside its rendering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextFormat {
    #[default]
    Html,
    Markdown,
}

/// What a message stores for `text` written in `format`: sanitized HTML, and the Markdown
/// source it was rendered from, if it was.
pub fn body(text: &str, format: TextFormat) -> (String, Option<String>) {
    match format {
        TextFormat::Html => (crate::html::sanitize(text), None),
        TextFormat::Markdown => (render(text), Some(text.to_owned())),
    }
}

/// Sanitized HTML for the Markdown `source`.
pub fn render(source: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let mut events: Vec<Event> = Vec::new();
    // For each open element, whether it was written (not past MAX_DEPTH).
    let mut open: Vec<bool> = Vec::new();
    let (mut in_link, mut in_code) = (0usize, 0usize);
    for event in Parser::new_ext(source, options) {
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
                let written = open.iter().filter(|w| **w).count() < MAX_DEPTH;
                open.push(written);
                if written {
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
                    events.push(Event::End(end));
                }
            }
            Event::Html(text) | Event::InlineHtml(text) => events.push(Event::Text(text)),
            Event::SoftBreak => events.push(Event::HardBreak),
            Event::Text(text) if in_link == 0 && in_code == 0 => autolinked(text, &mut events),
            other => events.push(other),
        }
    }
    let mut html = String::with_capacity(source.len() * 2);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    crate::html::sanitize(&html)
}

/// `text` with each `http(s)` URL written out in it made a link, as GitHub does.
fn autolinked<'a>(text: CowStr<'a>, events: &mut Vec<Event<'a>>) {
    let mut finder = linkify::LinkFinder::new();
    finder.kinds(&[linkify::LinkKind::Url]);
    let mut rest = 0;
    for link in finder.links(&text) {
        let url = link.as_str();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            continue;
        }
        if link.start() > rest {
            events.push(Event::Text(CowStr::from(text[rest..link.start()].to_owned())));
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
    match rest {
        0 => events.push(Event::Text(text)),
        _ if rest < text.len() => events.push(Event::Text(CowStr::from(text[rest..].to_owned()))),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_links_and_code_render_as_github_does() {
        assert_eq!(
            render("Who owns the **launch email**?"),
            "<p>Who owns the <strong>launch email</strong>?</p>\n"
        );
        assert_eq!(
            render("agenda: https://example.com/agenda"),
            "<p>agenda: <a href=\"https://example.com/agenda\" rel=\"noopener nofollow ugc\">https://example.com/agenda</a></p>\n"
        );
        assert_eq!(render("~~old~~ *new*"), "<p><del>old</del> <em>new</em></p>\n");
        assert_eq!(render("one\ntwo"), "<p>one<br>\ntwo</p>\n");
        assert_eq!(
            render("`https://x.example` and\n\n```\nhttps://y.example <b>\n```"),
            "<p><code>https://x.example</code> and</p>\n<pre><code>https://y.example &lt;b&gt;\n</code></pre>\n"
        );
    }

    #[test]
    fn what_a_composer_cannot_mean_is_not_rendered() {
        assert_eq!(
            render("<script>alert(1)</script>"),
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
        );
        assert_eq!(
            render("a <b onclick=x>b</b>"),
            "<p>a &lt;b onclick=x&gt;b&lt;/b&gt;</p>\n"
        );
        let link = render("[x](javascript:alert(1))");
        assert!(!link.contains("javascript"), "{link}");
        assert_eq!(
            render("![a cat](https://cats.example/c.png)"),
            "<p><a href=\"https://cats.example/c.png\" rel=\"noopener nofollow ugc\">a cat</a></p>\n"
        );
    }

    #[test]
    fn deep_nesting_is_bounded_in_time_and_output() {
        for source in [
            format!("{}x{}", "*".repeat(10_000), "*".repeat(10_000)),
            format!("{}x", "> ".repeat(10_000)),
            format!("{}x", "- ".repeat(5_000)),
            format!("{}x{}", "[".repeat(10_000), "](u)".repeat(10_000)),
        ] {
            let html = render(&source);
            assert!(html.len() < 4 * source.len() + 1000, "{} bytes", html.len());
        }
    }
}
