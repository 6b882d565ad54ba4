//! Slack's message markup ("mrkdwn") as our HTML, for webhook bodies written for Slack:
//! `<url|label>` and `<url>` links, `<@user>` mentions, `*bold*`, `_italic_`, `~strike~`,
//! `` `code` `` and line breaks. The result still goes through the sanitizer like any body
//! (`crate::html::sanitize`), so nothing here has to be safe on its own; it only has to mean
//! what Slack means.
//!
//! Written by hand: the markup is small, and no maintained crate converts Slack's dialect
//! (it is not Markdown: single `*` is bold, links are angle-bracketed).
//!
//! `<!here>`, `<!channel>` and `<!everyone>` become the plain words `@here`, `@channel` and
//! `@everyone`, not mentions: a webhook holds no MentionEveryone, and a Slack integration that
//! pings the channel should still post. `<#C…|name>` becomes `#name`.

use crate::html::escape;

/// Private-use characters marking an already converted piece while the inline formatting
/// runs, so a URL's `_` or a code span's `*` is never read as markup. Removed from the input.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// Slack markup as HTML (not yet sanitized).
pub fn to_html(text: &str) -> String {
    let text: String = text.chars().filter(|&c| c != OPEN && c != CLOSE).collect();
    let mut pieces: Vec<String> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(['<', '`']) {
        out.push_str(&plain(&rest[..start]));
        let tail = &rest[start..];
        let (marker, end) = match tail.as_bytes()[0] {
            b'<' => (
                '>',
                tail[1..]
                    .find(['>', '<', '\n'])
                    .filter(|&i| tail.as_bytes()[i + 1] == b'>'),
            ),
            _ => (
                '`',
                tail[1..]
                    .find(['`', '\n'])
                    .filter(|&i| i > 0 && tail.as_bytes()[i + 1] == b'`'),
            ),
        };
        match end {
            Some(end) => {
                let inner = &tail[1..end + 1];
                let html = match marker {
                    '>' => angle(inner),
                    _ => format!("<code>{}</code>", plain(inner)),
                };
                out.push(OPEN);
                out.push_str(&pieces.len().to_string());
                out.push(CLOSE);
                pieces.push(html);
                rest = &tail[end + 2..];
            }
            None => {
                out.push_str(&plain(&tail[..1]));
                rest = &tail[1..];
            }
        }
    }
    out.push_str(&plain(rest));
    let mut html = out.split('\n').map(inline).collect::<Vec<_>>().join("<br>");
    for (i, piece) in pieces.iter().enumerate().rev() {
        html = html.replace(&format!("{OPEN}{i}{CLOSE}"), piece);
    }
    html
}

/// Text outside any markup: Slack's three escapes read, then escaped as HTML.
fn plain(text: &str) -> String {
    escape(&text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
}

/// One `<…>` construct.
fn angle(inner: &str) -> String {
    let (target, label) = match inner.split_once('|') {
        Some((target, label)) => (target, Some(label)),
        None => (inner, None),
    };
    let shown = |fallback: &str| plain(label.unwrap_or(fallback));
    if let Some(user) = target.strip_prefix('@') {
        return format!(
            r#"<span data-type="mention" data-id="{}">@{}</span>"#,
            attribute(user),
            shown(user)
        );
    }
    if let Some(channel) = target.strip_prefix('#') {
        return format!("#{}", shown(channel));
    }
    if let Some(special) = target.strip_prefix('!') {
        return match special {
            "here" | "channel" | "everyone" => format!("@{special}"),
            _ => label.map(plain).unwrap_or_default(),
        };
    }
    let lower = target.to_ascii_lowercase();
    if ["http://", "https://", "mailto:"].iter().any(|s| lower.starts_with(s)) {
        let href = target.replace("&amp;", "&");
        return format!(r#"<a href="{}">{}</a>"#, attribute(&href), shown(target));
    }
    plain(&format!("<{inner}>"))
}

fn attribute(value: &str) -> String {
    escape(value).replace('"', "&quot;")
}

/// `*bold*`, `_italic_` and `~strike~` within one line.
fn inline(line: &str) -> String {
    let mut line = line.to_owned();
    for (marker, tag) in [('*', "b"), ('_', "i"), ('~', "s")] {
        line = wrap(&line, marker, tag);
    }
    line
}

/// Each `marker…marker` span as `<tag>…</tag>`, Slack's way: the opening marker after a
/// non-word character (or at the start), the closing one before one (or at the end), with no
/// space just inside either.
fn wrap(line: &str, marker: char, tag: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let word = |c: char| c.is_alphanumeric();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let opens = chars[i] == marker
            && (i == 0 || !word(chars[i - 1]))
            && chars.get(i + 1).is_some_and(|c| !c.is_whitespace() && *c != marker);
        let close = opens
            .then(|| {
                (i + 2..chars.len()).find(|&j| {
                    chars[j] == marker && !chars[j - 1].is_whitespace() && chars.get(j + 1).is_none_or(|c| !word(*c))
                })
            })
            .flatten();
        match close {
            Some(j) => {
                let inner: String = chars[i + 1..j].iter().collect();
                out.push_str(&format!("<{tag}>{inner}</{tag}>"));
                i = j + 1;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::sanitize;

    fn html(text: &str) -> String {
        sanitize(&to_html(text))
    }

    #[test]
    fn links_mentions_and_formatting_become_html() {
        assert_eq!(
            html("see <https://x.example/a_b_c|the *docs*>"),
            r#"see <a href="https://x.example/a_b_c" rel="noopener noreferrer nofollow">the *docs*</a>"#
        );
        assert_eq!(
            html("<https://x.example>"),
            r#"<a href="https://x.example" rel="noopener noreferrer nofollow">https://x.example</a>"#
        );
        assert_eq!(
            html("hi <@bob>"),
            r#"hi <span data-type="mention" data-id="bob">@bob</span>"#
        );
        assert_eq!(html("*bold* _it_ ~gone~"), "<b>bold</b> <i>it</i> <s>gone</s>");
        assert_eq!(html("a\nb"), "a<br>b");
        assert_eq!(html("`*x*`"), "<code>*x*</code>");
    }

    #[test]
    fn what_is_not_markup_stays_text() {
        assert_eq!(html("2*3*4"), "2*3*4");
        assert_eq!(html("snake_case_name"), "snake_case_name");
        assert_eq!(html("a < b &amp; c &lt;d&gt;"), "a &lt; b &amp; c &lt;d&gt;");
        assert_eq!(html("<javascript:alert(1)|x>"), "&lt;javascript:alert(1)|x&gt;");
        assert_eq!(html("<!here> and <!channel>"), "@here and @channel");
        assert_eq!(html("<#C1|general>"), "#general");
        assert_eq!(html("\u{E000}0\u{E001}"), "0");
    }

    #[test]
    fn nothing_unsafe_survives() {
        let out = html(r#"<https://x.example/" onclick="alert(1)|x> <script>alert(1)</script>"#);
        assert!(!out.contains("\" onclick") && !out.contains("<script"), "{out}");
    }
}
