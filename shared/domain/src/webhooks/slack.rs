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

/// The longest `text` a webhook may send, in characters: Slack's own limit. A longer text is
/// refused before any conversion, so a request's conversion work is bounded by this.
pub const MAX_TEXT_CHARS: usize = 40_000;

/// Slack markup as HTML (not yet sanitized). One pass over the text and one over each line per
/// marker: linear in the text's length, whatever it holds.
pub fn to_html(text: &str) -> String {
    convert(text, &mut 0)
}

/// [`to_html`], counting in `steps` the characters each pass visits (what the tests bound).
fn convert(text: &str, steps: &mut usize) -> String {
    let text: String = text.chars().filter(|&c| c != OPEN && c != CLOSE).collect();
    let mut pieces: Vec<String> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(['<', '`']) {
        out.push_str(&plain(&rest[..start]));
        let tail = &rest[start..];
        // The scan for the construct's end stops at the next character that could start
        // another, so no stretch of text is scanned by two openers.
        let (marker, scanned, closes_at) = match tail.as_bytes()[0] {
            b'<' => ('>', tail[1..].find(['>', '<', '\n']), b'>'),
            _ => ('`', tail[1..].find(['`', '\n']), b'`'),
        };
        *steps += start + scanned.map_or(tail.len(), |i| i + 1);
        let end = scanned.filter(|&i| tail.as_bytes()[i + 1] == closes_at && (marker == '>' || i > 0));
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
    let html = out
        .split('\n')
        .map(|line| inline(line, steps))
        .collect::<Vec<_>>()
        .join("<br>");
    restore(&html, &pieces, steps)
}

/// `html` with each `OPEN i CLOSE` placeholder replaced by `pieces[i]`, in one pass.
fn restore(html: &str, pieces: &[String], steps: &mut usize) -> String {
    let mut out = String::with_capacity(html.len() + pieces.iter().map(String::len).sum::<usize>());
    let mut rest = html;
    while let Some(open) = rest.find(OPEN) {
        out.push_str(&rest[..open]);
        let after = &rest[open + OPEN.len_utf8()..];
        let close = after.find(CLOSE).expect("every placeholder is closed");
        let index: usize = after[..close].parse().expect("a placeholder holds its index");
        out.push_str(&pieces[index]);
        *steps += open + close;
        rest = &after[close + CLOSE.len_utf8()..];
    }
    out.push_str(rest);
    out
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
fn inline(line: &str, steps: &mut usize) -> String {
    let mut line = line.to_owned();
    for (marker, tag) in [('*', "b"), ('_', "i"), ('~', "s")] {
        line = wrap(&line, marker, tag, steps);
    }
    line
}

/// Each `marker…marker` span as `<tag>…</tag>`, Slack's way: the opening marker after a
/// non-word character (or at the start), the closing one before one (or at the end), with no
/// space just inside either.
///
/// Whether a marker can close a span does not depend on where the span opened, so the next
/// closing marker after each position is found once, from the end: an opener never scans ahead.
fn wrap(line: &str, marker: char, tag: &str, steps: &mut usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    let word = |c: char| c.is_alphanumeric();
    let closes = |j: usize| {
        j > 0 && chars[j] == marker && !chars[j - 1].is_whitespace() && chars.get(j + 1).is_none_or(|c| !word(*c))
    };
    let mut next_close = vec![None; chars.len() + 1];
    for j in (0..chars.len()).rev() {
        next_close[j] = if closes(j) { Some(j) } else { next_close[j + 1] };
    }
    *steps += 2 * chars.len();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let opens = chars[i] == marker
            && (i == 0 || !word(chars[i - 1]))
            && chars.get(i + 1).is_some_and(|c| !c.is_whitespace() && *c != marker);
        match opens.then(|| next_close.get(i + 2).copied().flatten()).flatten() {
            Some(j) => {
                out.push('<');
                out.push_str(tag);
                out.push('>');
                out.extend(&chars[i + 1..j]);
                out.push_str("</");
                out.push_str(tag);
                out.push('>');
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
            r#"see <a href="https://x.example/a_b_c" rel="noopener nofollow ugc">the *docs*</a>"#
        );
        assert_eq!(
            html("<https://x.example>"),
            r#"<a href="https://x.example" rel="noopener nofollow ugc">https://x.example</a>"#
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

    /// Text built to make a scanning converter quadratic: every `*` opens a span and no `*`
    /// closes one, and thousands of placeholders.
    #[test]
    fn pathological_text_converts_in_linear_steps() {
        for text in ["*a ".repeat(85_000), "<@u> ".repeat(50_000), "`x` _a ".repeat(35_000)] {
            let mut steps = 0;
            let html = convert(&text, &mut steps);
            assert!(!html.is_empty());
            assert!(steps <= 20 * text.len(), "{steps} steps for {} bytes", text.len());
        }
    }

    #[test]
    fn spans_still_pair_as_before() {
        assert_eq!(html("*a *b* c*"), "<b>a *b</b> c*");
        assert_eq!(html("_x_ and _y_"), "<i>x</i> and <i>y</i>");
        assert_eq!(
            html("<@a> <@b> `c`"),
            r#"<span data-type="mention" data-id="a">@a</span> <span data-type="mention" data-id="b">@b</span> <code>c</code>"#
        );
    }

    #[test]
    fn nothing_unsafe_survives() {
        let out = html(r#"<https://x.example/" onclick="alert(1)|x> <script>alert(1)</script>"#);
        assert!(!out.contains("\" onclick") && !out.contains("<script"), "{out}");
    }
}
