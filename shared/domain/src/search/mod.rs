//! What a search asks and what a message is found by, in one place: the query language parsed
//! into a typed [`SearchQuery`], and the [`terms`] of a text, which the index stores and a
//! query's words are looked up as.
//!
//! Text is normalised as the word filter does (`word_filter::normalised`: compatibility
//! decomposition, no accents or zero-width characters, lower case), then split on Unicode word
//! boundaries (UAX #29). Scripts written without spaces are split further: each Han, Hiragana,
//! Katakana or Hangul character is a term of its own, and so is each pair of neighbours, so a
//! word of such a script is found as the run of its pairs (or, alone, as its character).
//!
//! The query language:
//! - `word` — every word must match; a word matches a term it begins (`deplo` finds
//!   "deployment");
//! - `"a quoted phrase"` — its words in that order;
//! - `-word` — messages with the word are left out;
//! - `from:<userId>`, `in:<roomId>`, `has:file`, `has:link`, `is:pinned`, `is:thread` (a reply),
//!   `before:<date>`, `after:<date>` (a date is `YYYY-MM-DD`, a day in UTC that neither
//!   includes, or an RFC 3339 time).

use chrono::{DateTime, NaiveDate, Utc};
use unicode_segmentation::UnicodeSegmentation;

use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::word_filter::normalised;

pub mod index;
pub mod matching;
pub mod page;

/// The longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// The most words (plain, in phrases and excluded) a query may look up: each is a read.
pub const MAX_QUERY_WORDS: usize = 12;
/// The longest term stored or looked up, in characters: a longer word is indexed (and
/// matched) by its first this many.
pub const MAX_TERM_CHARS: usize = 32;

/// A parsed search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Words every result has, each as a term prefix (normalised).
    pub words: Vec<String>,
    /// Phrases every result has, each as its terms in order.
    pub phrases: Vec<Vec<String>>,
    /// Terms no result has.
    pub excluded: Vec<String>,
    pub from: Option<UserId>,
    pub room: Option<RoomId>,
    pub has_file: bool,
    pub has_link: bool,
    pub pinned: bool,
    pub thread: bool,
    /// Results created before this instant.
    pub before: Option<DateTime<Utc>>,
    /// Results created at or after this instant (`after:<day>` is the start of the next day).
    pub after: Option<DateTime<Utc>>,
}

impl SearchQuery {
    /// Parses `q`, or says what is wrong with it (a 400).
    pub fn parse(q: &str) -> Result<SearchQuery> {
        let chars = q.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(bad(format!(
                "the query is {chars} characters long; at most {MAX_QUERY_CHARS}"
            )));
        }
        let mut query = SearchQuery::default();
        for token in tokens(q)? {
            match token {
                Token::Phrase(text) => {
                    let phrase = terms(&text);
                    match phrase.len() {
                        0 => {}
                        1 => query.words.extend(phrase),
                        _ => query.phrases.push(phrase),
                    }
                }
                Token::Bare(word) => query.bare(&word)?,
            }
        }
        let looked_up = query.words.len() + query.phrases.iter().map(Vec::len).sum::<usize>() + query.excluded.len();
        if looked_up > MAX_QUERY_WORDS {
            return Err(bad(format!(
                "the query has {looked_up} words; at most {MAX_QUERY_WORDS}"
            )));
        }
        if query.words.is_empty() && query.phrases.is_empty() {
            return Err(bad(
                "the query has no word to look for (filters and exclusions narrow a search, they do not start one)",
            ));
        }
        if let (Some(before), Some(after)) = (query.before, query.after)
            && before <= after
        {
            return Err(bad("before: is not later than after:; nothing can match"));
        }
        Ok(query)
    }

    /// A token outside quotes: a filter, an exclusion or words.
    fn bare(&mut self, token: &str) -> Result<()> {
        if let Some(word) = token.strip_prefix('-')
            && !word.is_empty()
        {
            self.excluded.extend(matching::without_covered_characters(&terms(word)));
            return Ok(());
        }
        // Only a filter's name makes a filter: `https://…` or `re:` are words.
        if let Some((name, value)) = token.split_once(':')
            && FILTERS.contains(&name.to_ascii_lowercase().as_str())
        {
            return self.filter(name, value);
        }
        self.words.extend(matching::without_covered_characters(&terms(token)));
        Ok(())
    }

    /// Applies the filter `name` (one of [`FILTERS`]) with its value.
    fn filter(&mut self, name: &str, value: &str) -> Result<()> {
        let empty = || bad(format!("{name}: needs a value"));
        match name.to_ascii_lowercase().as_str() {
            "from" if value.is_empty() => return Err(empty()),
            "from" => self.from = Some(UserId::parse(value).map_err(|_| bad(format!("from:{value} is no user id")))?),
            "in" if value.is_empty() => return Err(empty()),
            "in" => self.room = Some(RoomId::parse(value).map_err(|_| bad(format!("in:{value} is no room id")))?),
            "has" => match value {
                "file" => self.has_file = true,
                "link" => self.has_link = true,
                _ => return Err(bad(format!("has:{value} is unknown; has:file and has:link are"))),
            },
            "is" => match value {
                "pinned" => self.pinned = true,
                "thread" => self.thread = true,
                _ => return Err(bad(format!("is:{value} is unknown; is:pinned and is:thread are"))),
            },
            "before" => self.before = Some(date(name, value)?),
            "after" => self.after = Some(date(name, value)?),
            other => unreachable!("{other}: is not in FILTERS"),
        }
        Ok(())
    }
}

/// The filters a query may name, as `name:value`.
const FILTERS: [&str; 6] = ["from", "in", "has", "is", "before", "after"];

/// A query's pieces: quoted phrases and whitespace-separated bare tokens.
enum Token {
    Phrase(String),
    Bare(String),
}

fn tokens(q: &str) -> Result<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut rest = q;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(tokens);
        }
        if let Some(quoted) = rest.strip_prefix('"') {
            let Some(end) = quoted.find('"') else {
                return Err(bad("a quoted phrase has no closing quote"));
            };
            tokens.push(Token::Phrase(quoted[..end].to_owned()));
            rest = &quoted[end + 1..];
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            tokens.push(Token::Bare(rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
}

/// `before:`/`after:` — a day in UTC (`before:` that day begins, `after:` it ends: the day
/// itself is in neither, as in Slack's search) or an RFC 3339 instant.
fn date(name: &str, value: &str) -> Result<DateTime<Utc>> {
    if let Ok(day) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        let day = match name.eq_ignore_ascii_case("after") {
            true => day
                .succ_opt()
                .ok_or_else(|| bad(format!("{name}:{value} is too late")))?,
            false => day,
        };
        return Ok(day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| bad(format!("{name}:{value} is no date; use YYYY-MM-DD or an RFC 3339 time")))
}

fn bad(reason: impl Into<String>) -> Error {
    Error::BadRequest(reason.into())
}

/// Whether `c` belongs to a script written without spaces between words.
pub(crate) fn is_unspaced(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}' // CJK Extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK Unified Ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}' // CJK Compatibility Ideographs
        | '\u{20000}'..='\u{2FA1F}')
}

/// The terms of `text` (plain text, not markup), in order, repeats kept: normalised words cut
/// to [`MAX_TERM_CHARS`]; a run of an unspaced script gives each character and each pair of
/// neighbours (a pair after its first character).
pub fn terms(text: &str) -> Vec<String> {
    let text = normalised(text);
    let mut out = Vec::new();
    // Word boundaries split an unspaced script into single characters: neighbours that touch
    // are gathered into one run again.
    let mut run: Vec<char> = Vec::new();
    for word in text.split_word_bounds() {
        let chars: Vec<char> = word.chars().collect();
        if !chars.is_empty() && chars.iter().all(|c| is_unspaced(*c)) {
            run.extend(chars);
            continue;
        }
        unspaced_terms(&mut run, &mut out);
        // A segment with a letter or digit is a word (as `unicode_words` has it); the rest are
        // spaces and punctuation.
        if chars.iter().any(|c| c.is_alphanumeric()) {
            spaced_terms(&chars, &mut out);
        }
    }
    unspaced_terms(&mut run, &mut out);
    out
}

/// A word with no unspaced character is a term; one that mixes scripts gives its spaced parts
/// as terms and its unspaced characters as a run.
fn spaced_terms(chars: &[char], out: &mut Vec<String>) {
    let mut spaced = String::new();
    let mut run = Vec::new();
    for c in chars {
        if is_unspaced(*c) {
            if !spaced.is_empty() {
                out.push(std::mem::take(&mut spaced).chars().take(MAX_TERM_CHARS).collect());
            }
            run.push(*c);
        } else {
            unspaced_terms(&mut run, out);
            spaced.push(*c);
        }
    }
    unspaced_terms(&mut run, out);
    if !spaced.is_empty() {
        out.push(spaced.chars().take(MAX_TERM_CHARS).collect());
    }
}

/// Each character of an unspaced run, and each pair of neighbours; empties `run`.
fn unspaced_terms(run: &mut Vec<char>, out: &mut Vec<String>) {
    for (i, c) in run.iter().enumerate() {
        out.push(c.to_string());
        if let Some(next) = run.get(i + 1) {
            out.push(format!("{c}{next}"));
        }
    }
    run.clear();
}

/// The terms a query word is looked up as: for an unspaced run, its pairs (a single
/// character alone), so each must be found; otherwise the word itself.
pub fn lookup_terms(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() < 2 || !chars.iter().all(|c| is_unspaced(*c)) {
        return vec![word.to_owned()];
    }
    chars.windows(2).map(|pair| pair.iter().collect()).collect()
}

/// Ana's message of `text` on 2026-12-01, for the search tests.
#[cfg(test)]
fn sample_message(text: &str) -> crate::messages::Message {
    let mut message = crate::messages::sample("0000000000000000001", text);
    message.author_id = "ana".into();
    message.created_at = "2026-12-01T00:00:00Z".parse().unwrap();
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(q: &str) -> String {
        match SearchQuery::parse(q) {
            Err(Error::BadRequest(reason)) => reason,
            other => panic!("{q:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn words_phrases_exclusions_and_filters() {
        let q = SearchQuery::parse(
            r#"Deplo "release NOTES" -draft from:ana in:6a6ddb24-ae7c-4901-a57f-50f52d603ab5 has:file has:link is:pinned is:thread before:2026-12-01 after:2026-11-01T10:00:00Z"#,
        )
        .unwrap();
        assert_eq!(q.words, ["deplo"]);
        assert_eq!(q.phrases, [vec!["release".to_owned(), "notes".to_owned()]]);
        assert_eq!(q.excluded, ["draft"]);
        assert_eq!(q.from.unwrap().as_str(), "ana");
        assert_eq!(q.room.unwrap().as_str(), "6a6ddb24-ae7c-4901-a57f-50f52d603ab5");
        assert!(q.has_file && q.has_link && q.pinned && q.thread);
        assert_eq!(q.before.unwrap().to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(q.after.unwrap().to_rfc3339(), "2026-11-01T10:00:00+00:00");
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        assert!(reason("").contains("no word"));
        assert!(reason("   ").contains("no word"));
        assert!(reason("from:ana").contains("no word"));
        assert!(reason(&"a".repeat(1000)).contains("1000 characters"));
        let many: Vec<String> = (0..100).map(|i| ((b'a' + i % 26) as char).to_string()).collect();
        assert!(reason(&many.join(" ")).contains("100 words"));
        let words = SearchQuery::parse("re: colour:red https://example.com/a").unwrap();
        assert_eq!(
            words.words,
            ["re", "colour:red", "https", "example.com", "a"],
            "no filter's name: words"
        );
        assert!(reason("hello before:yesterday").contains("no date"));
        assert!(reason("hello before:2026-13-01").contains("no date"));
        assert!(reason("hello has:cats").contains("has:cats is unknown"));
        assert!(reason("hello \"unclosed").contains("closing quote"));
        assert!(reason("hello from:").contains("needs a value"));
        assert!(reason("hello before:2026-01-01 after:2026-02-01").contains("nothing can match"));
        assert!(reason("hello before:2026-01-02 after:2026-01-01").contains("nothing can match"));
        let day = SearchQuery::parse("hello after:2026-01-01 before:2026-01-03").unwrap();
        assert_eq!(
            day.after.unwrap().to_rfc3339(),
            "2026-01-02T00:00:00+00:00",
            "after the day"
        );
    }

    #[test]
    fn terms_are_normalised_words() {
        assert_eq!(terms("Café DÉPLOYMENT, naïve!"), ["cafe", "deployment", "naive"]);
        assert_eq!(terms("ｆｕｌｌ ｗｉｄｔｈ"), ["full", "width"], "full-width letters");
        assert_eq!(terms("zero\u{200B}width"), ["zerowidth"]);
        assert_eq!(terms("it's 3.5 ok"), ["it's", "3.5", "ok"]);
        let long = "x".repeat(100);
        assert_eq!(terms(&long)[0].chars().count(), MAX_TERM_CHARS);
    }

    #[test]
    fn an_unspaced_script_gives_characters_and_pairs() {
        let t = terms("我们明天开会");
        for term in ["我", "们", "我们", "明天", "开会", "会"] {
            assert!(t.contains(&term.to_owned()), "{term} in {t:?}");
        }
        assert_eq!(lookup_terms("明天开会"), ["明天", "天开", "开会"]);
        assert_eq!(lookup_terms("会"), ["会"]);
        assert_eq!(lookup_terms("deploy"), ["deploy"]);
        let mixed = terms("版本v2发布");
        assert!(
            mixed.contains(&"v2".to_owned()) && mixed.contains(&"发布".to_owned()),
            "{mixed:?}"
        );
    }
}
