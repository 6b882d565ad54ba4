//! Whether a message answers a query, decided on the message as it is now. The word index
//! only proposes candidates; this decides, so a row the index still holds for an edited,
//! deleted or purged message never shows it.

use unicode_segmentation::UnicodeSegmentation;

use super::index::{bucket, finds, is_indexed, message_terms};
use super::{SearchQuery, is_unspaced, terms};
use crate::messages::Message;

/// One read of the word index: a bucket, and which of its terms count.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lookup {
    pub bucket: String,
    pub word: String,
    /// Only a term equal to `word` counts (a phrase's term), not every term it begins.
    pub exact: bool,
}

impl Lookup {
    /// Whether a stored term counts for this lookup.
    pub fn finds(&self, term: &str) -> bool {
        match self.exact {
            true => term == self.word,
            false => finds(&self.word, term),
        }
    }
}

impl SearchQuery {
    /// The index reads the query needs, one per distinct word and phrase term (a phrase's
    /// unspaced characters are looked up as their pairs).
    pub fn lookups(&self) -> Vec<Lookup> {
        let words = self.words.iter().map(|word| Lookup {
            bucket: bucket(word),
            word: word.clone(),
            exact: false,
        });
        let phrases = self.phrases.iter().flat_map(|phrase| {
            without_covered_characters(phrase).into_iter().map(|term| Lookup {
                bucket: bucket(&term),
                word: term,
                exact: true,
            })
        });
        let mut lookups: Vec<Lookup> = words.chain(phrases).collect();
        lookups.sort();
        lookups.dedup();
        lookups
    }

    /// Whether `message` answers the query (the room is the caller's to decide).
    pub fn matches(&self, message: &Message) -> bool {
        if !is_indexed(message) {
            return false;
        }
        let filters = self.from.as_ref().is_none_or(|from| from.as_str() == message.author_id)
            && (!self.has_file || !message.attachments.is_empty())
            && (!self.has_link || crate::messages::previews::first_link(&message.text).is_some())
            && (!self.pinned || message.is_pinned)
            && (!self.thread || message.thread_id.is_some())
            && self.before.is_none_or(|before| message.created_at < before)
            && self.after.is_none_or(|after| message.created_at >= after);
        if !filters {
            return false;
        }
        let terms = message_terms(message);
        let has = |word: &str| terms.iter().any(|term| finds(word, term));
        self.words.iter().all(|word| has(word))
            && self
                .phrases
                .iter()
                .all(|phrase| terms.windows(phrase.len()).any(|run| run == phrase.as_slice()))
            && !self.excluded.iter().any(|word| has(word))
    }

    /// The words of `message`'s visible text that the query's words and phrases found, as
    /// written, each once: what a client marks (as text) in the result.
    pub fn highlights(&self, message: &Message) -> Vec<String> {
        let wanted: Vec<&String> = self.words.iter().chain(self.phrases.iter().flatten()).collect();
        let text = crate::html::text_content(&message.text);
        let mut out: Vec<String> = Vec::new();
        for segment in text.split_word_bounds() {
            let shown = match segment.chars().all(is_unspaced) && !segment.is_empty() {
                // A character of an unspaced script is marked when a looked-up pair holds it.
                true => wanted.iter().any(|word| word.contains(segment)),
                false => terms(segment)
                    .iter()
                    .any(|term| wanted.iter().any(|word| finds(word, term))),
            };
            if shown && !out.iter().any(|seen| seen == segment) {
                out.push(segment.to_owned());
            }
        }
        out
    }
}

/// A run's terms without the single characters its pairs already hold: what a query word of
/// an unspaced script is looked up as (`明天开会` as 明天, 天开, 开会).
pub(super) fn without_covered_characters(run: &[String]) -> Vec<String> {
    let is_pair = |t: &String| t.chars().count() == 2 && t.chars().all(is_unspaced);
    let has_pairs = run.iter().any(is_pair);
    run.iter()
        .filter(|t| !(has_pairs && t.chars().count() == 1 && t.chars().all(is_unspaced)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> Message {
        super::super::sample_message(text)
    }

    fn matches(q: &str, text: &str) -> bool {
        SearchQuery::parse(q).unwrap().matches(&message(text))
    }

    #[test]
    fn every_word_phrases_in_order_and_no_excluded_word() {
        assert!(matches("deplo friday", "The deployment is on Friday"));
        assert!(!matches("deplo monday", "The deployment is on Friday"));
        assert!(matches("\"release notes\"", "see the Release Notes."));
        assert!(!matches("\"notes release\"", "see the release notes"));
        assert!(!matches("release -draft", "release draft"));
        assert!(matches("release -draft", "release final"));
        assert!(matches("cafe", "un café crème"));
        assert!(matches("明天开会", "我们明天开会吧"));
        assert!(!matches("明天开会", "明天不开会"));
    }

    #[test]
    fn filters_narrow_on_the_message_itself() {
        assert!(matches("plan from:ana", "plan"));
        assert!(!matches("plan from:bob", "plan"));
        assert!(!matches("plan is:pinned", "plan"));
        assert!(!matches("plan is:thread", "plan"));
        assert!(matches(
            "plan has:link",
            r#"plan <a href="https://example.com">here</a>"#
        ));
        assert!(!matches("plan has:link", "plan"));
        assert!(matches("plan before:2026-12-02 after:2026-11-30", "plan"));
        assert!(!matches("plan after:2026-12-01", "plan"));
    }

    #[test]
    fn highlights_are_the_words_as_written() {
        let q = SearchQuery::parse("deplo \"on friday\"").unwrap();
        assert_eq!(
            q.highlights(&message("The <b>Deployment</b> is on Friday, deployment!")),
            ["Deployment", "on", "Friday", "deployment"]
        );
    }

    #[test]
    fn a_phrase_is_looked_up_by_its_words_and_an_unspaced_one_by_its_pairs() {
        let q = SearchQuery::parse("\"明天开会\" deplo").unwrap();
        let words: Vec<String> = q.lookups().into_iter().map(|l| l.word).collect();
        assert_eq!(words, ["deplo", "天开", "开会", "明天"]);
    }
}
