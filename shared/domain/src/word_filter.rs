//! The word filter's matching rule, in one place.
//!
//! Text and filter words are normalised the same way before they meet: compatibility
//! decomposition (NFKD, so a full-width `ｂａｄ` becomes `bad`), combining marks and zero-width
//! characters removed (so `b\u{200B}ad` and `bád` become `bad`), lower case. Then whole words
//! are compared — a filter word (or phrase) matches a run of whole words of the text, so a
//! longer innocent word that merely contains it (`class` for `ass`) passes.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::html;

/// Characters that render as nothing; removed before matching so they cannot split a word.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{034F}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
    )
}

/// `text` normalised: compatibility decomposition, without combining marks and invisible
/// characters, in lower case. The limits read text through it too (`crate::limits`).
pub fn normalised(text: &str) -> String {
    text.nfkd()
        .filter(|c| !is_combining_mark(*c) && !is_invisible(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The words of `text` after normalisation, in order.
pub fn words(text: &str) -> Vec<String> {
    normalised(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The filter: each entry is a word or phrase, kept as its normalised words.
#[derive(Debug, Clone, Default)]
pub struct WordFilter {
    entries: Vec<Vec<String>>,
}

impl WordFilter {
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a str>) -> WordFilter {
        WordFilter {
            entries: entries.into_iter().map(words).filter(|w| !w.is_empty()).collect(),
        }
    }

    /// True when the message HTML contains a filtered word or phrase as whole words.
    pub fn blocks(&self, message_html: &str) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let text = words(&html::text_content(message_html));
        self.entries
            .iter()
            .any(|entry| text.windows(entry.len()).any(|window| window == entry.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter() -> WordFilter {
        WordFilter::new(["darn", "heck no"])
    }

    #[test]
    fn whole_words_only() {
        assert!(filter().blocks("<p>well darn it</p>"));
        assert!(filter().blocks("DARN!"));
        assert!(!filter().blocks("darned and undarnable"), "longer innocent words pass");
        assert!(filter().blocks("oh heck   no"), "phrases match across spacing");
        assert!(!filter().blocks("heck yes, no"));
    }

    #[test]
    fn disguises_are_seen_through() {
        assert!(filter().blocks("ｄａｒｎ"), "full-width letters");
        assert!(filter().blocks("da\u{200B}rn"), "a zero-width space inside the word");
        assert!(filter().blocks("dárn"), "a combining accent");
        assert!(filter().blocks("d<b>a</b>rn"), "markup inside the word");
        assert!(filter().blocks("d&#97;rn"), "an entity inside the word");
    }

    #[test]
    fn an_empty_filter_blocks_nothing() {
        assert!(!WordFilter::new([]).blocks("anything"));
        assert!(!WordFilter::new(["  ", "\u{200B}"]).blocks("anything"));
    }
}
