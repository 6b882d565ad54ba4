//! Message HTML is sanitized once, at the boundary, by ammonia: no scripts, no `on*`
//! attributes, no `javascript:` URLs. Mention spans (`<span data-type="mention" data-id=…>`)
//! survive, because notifications and mention counts are computed from them.

use std::sync::LazyLock;

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .add_tag_attributes("span", ["data-type", "data-id", "data-mention-type", "data-label"])
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener nofollow ugc"));
    builder
});

static TEXT_ONLY: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::empty();
    builder.clean_content_tags(["script", "style"].into_iter().collect());
    builder
});

/// Sanitized HTML, safe to render. Most messages are plain text, or plain paragraphs
/// (`<p>…</p>`, what an editor sends), with nothing to sanitize: they are returned as they
/// are, without parsing them.
pub fn sanitize(html: &str) -> String {
    if simple_runs(html).is_some() {
        return html.to_owned();
    }
    SANITIZER.clean(html).to_string()
}

/// The texts of HTML that is plain text, or one or more `<p>` elements of plain text and
/// nothing else: such HTML sanitizes to itself and shows its texts run together. `None` for
/// anything else, which is left to the parser. A send reads its body's text several times
/// (the emptiness check, the link and repeat rules, the room's activity line, the event), and
/// a parse of even a short body costs more than the rest of those checks together.
fn simple_runs(html: &str) -> Option<Vec<&str>> {
    if is_already_sanitized(html) {
        return Some(vec![html]);
    }
    let mut runs = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        let inner = rest.strip_prefix("<p>")?;
        let (text, after) = inner.split_once("</p>")?;
        if !is_already_sanitized(text) {
            return None;
        }
        runs.push(text);
        rest = after;
    }
    Some(runs)
}

/// True when sanitizing `text` gives `text` back: no markup and no entity (`<`, `>`, `&`),
/// and no character the HTML parser or serializer rewrites (carriage returns, NUL and the
/// other control characters, the no-break space it spells `&nbsp;`, a byte-order mark).
fn is_already_sanitized(text: &str) -> bool {
    text.chars().all(|c| match c {
        '<' | '>' | '&' | '\u{a0}' | '\u{feff}' => false,
        '\n' | '\t' => true,
        c => !c.is_control(),
    })
}

/// True when the HTML shows no text at all (only tags and whitespace).
pub fn is_blank(html: &str) -> bool {
    text_content(html).trim().is_empty()
}

/// The text the HTML shows, tags removed and entities decoded.
pub fn text_content(html: &str) -> String {
    match simple_runs(html) {
        Some(runs) => runs.concat(),
        None => parsed_text_content(html),
    }
}

fn parsed_text_content(html: &str) -> String {
    decode_entities(&TEXT_ONLY.clean(html).to_string())
}

/// Plain text as HTML text: `&`, `<` and `>` escaped.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Decodes the entities html5ever's serializer writes (it spells every other character out).
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{A0}")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives exactly what the sanitizer gives, for text it takes, and leaves
    /// everything else to the sanitizer.
    #[test]
    fn plain_text_skips_the_sanitizer_and_comes_out_the_same() {
        let plain = [
            "hello",
            "",
            " leading and trailing ",
            "\nfirst line\n\tsecond line\n",
            "quotes \" and ' and `ticks`",
            "emoji 👋🏽 and ZWJ 👩‍👩‍👧, CJK 你好, RTL שלום, combining é",
            "line\u{2028}separator, noncharacter \u{fdd0} \u{fffe}, replacement \u{fffd}",
            "math 1 + 1 = 2; a/b; 100% #tag @name https://example.com/?q=1",
        ];
        for text in plain {
            assert!(is_already_sanitized(text), "{text:?}");
            assert_eq!(SANITIZER.clean(text).to_string(), text, "{text:?}");
            assert_eq!(sanitize(text), text);
        }
        let rewritten = [
            "a < b",
            "a & b",
            "<b>x</b>",
            "cr\r\nlf",
            "nul\0",
            "nbsp\u{a0}",
            "\u{feff}bom",
            "bell\u{7}",
        ];
        for text in rewritten {
            assert!(!is_already_sanitized(text), "{text:?}");
            assert_eq!(sanitize(text), SANITIZER.clean(text).to_string(), "{text:?}");
        }
    }

    /// A property check of the fast path against the sanitizer: any text it takes as it is,
    /// random or built from the characters HTML treats specially, sanitizes to itself.
    #[test]
    fn any_text_the_fast_path_takes_sanitizes_to_itself() {
        use rand::{Rng, SeedableRng};
        let special: Vec<char> = "<>&\"'=/!?-;#\n\t\r \u{0}\u{b}\u{c}\u{7f}\u{80}\u{85}\u{9f}\u{a0}\u{ad}\u{feff}\u{200b}\u{200d}\u{2028}\u{2029}\u{fffd}\u{fffe}\u{ffff}\u{fdd0}\u{1f600}\u{e000}\u{10ffff}aZ0\\`"
            .chars()
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let mut taken = 0;
        for _ in 0..20_000 {
            let len = rng.random_range(0..24);
            let text: String = (0..len)
                .map(|_| match rng.random_range(0..3) {
                    0 => special[rng.random_range(0..special.len())],
                    1 => rng.random_range(' '..='~'),
                    _ => rng.random::<char>(),
                })
                .collect();
            if is_already_sanitized(&text) {
                taken += 1;
                assert_eq!(SANITIZER.clean(&text).to_string(), text, "{text:?}");
            }
        }
        assert!(taken > 1_000, "the check took too few texts to mean anything: {taken}");
    }

    /// The same for plain paragraphs: whatever the fast path takes sanitizes to itself and
    /// shows, parsed, exactly the texts it runs together; the near misses go to the parser.
    #[test]
    fn any_plain_paragraphs_the_fast_path_takes_come_out_as_the_parser_says() {
        use rand::{Rng, SeedableRng};
        #[rustfmt::skip]
        let pieces = [
            "<p>", "</p>", "<p>", "</p>", "a", "Zz 0", " ", "\n", "\t", "\"", "'", "=", "/", "!", "-", ";", "#",
            "&", "<", ">", "\r", "\u{0}", "\u{a0}", "\u{feff}", "\u{2028}", "\u{1f600}", "é", "<P>", "<p >",
            "</p >", "<br>", "<b>", "</b>", "<p class=x>",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        let mut taken = 0;
        for _ in 0..20_000 {
            let html: String = (0..rng.random_range(0..10))
                .map(|_| pieces[rng.random_range(0..pieces.len())])
                .collect();
            if let Some(runs) = simple_runs(&html) {
                taken += 1;
                assert_eq!(SANITIZER.clean(&html).to_string(), html, "{html:?}");
                assert_eq!(parsed_text_content(&html), runs.concat(), "{html:?}");
            } else {
                assert_eq!(sanitize(&html), SANITIZER.clean(&html).to_string(), "{html:?}");
                assert_eq!(text_content(&html), parsed_text_content(&html), "{html:?}");
            }
        }
        assert!(taken > 1_000, "the check took too few texts to mean anything: {taken}");
        for html in [
            "<p>hello, this is a benchmark message</p>",
            "<p>one</p><p></p><p>two\nlines</p>",
            "",
        ] {
            assert!(simple_runs(html).is_some(), "{html:?}");
        }
        for html in [
            "<p>a</p>tail",
            "<p>a",
            "<p>a &amp; b</p>",
            "<p><p>a</p></p>",
            "<b>a</b>",
        ] {
            assert!(simple_runs(html).is_none(), "{html:?}");
        }
    }

    #[test]
    fn strips_what_can_run() {
        assert_eq!(sanitize("<script>alert(1)</script>"), "");
        assert_eq!(sanitize(r#"<b onclick="x()">hi</b>"#), "<b>hi</b>");
        assert!(!sanitize(r#"<a href="javascript:alert(1)">x</a>"#).contains("javascript"));
        assert!(sanitize(r#"<img src=x onerror="alert(1)">"#).find("onerror").is_none());
    }

    #[test]
    fn keeps_mentions_and_formatting() {
        let html = r#"<p>hi <span data-type="mention" data-id="u1" data-label="Ann">@Ann</span> <em>there</em></p>"#;
        assert_eq!(sanitize(html), html);
    }

    #[test]
    fn blank_bodies() {
        assert!(is_blank("<p> </p>"));
        assert!(is_blank(&sanitize("<script>x</script>")));
        assert!(!is_blank("<p>x</p>"));
    }

    #[test]
    fn text_content_decodes_entities() {
        assert_eq!(text_content("<p>a &amp; <b>b</b> &lt;c&gt;</p>"), "a & b <c>");
        assert_eq!(text_content("&amp;lt;"), "&lt;");
    }
}
