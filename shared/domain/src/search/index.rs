//! What the word index holds for a message: its terms grouped into buckets, a bucket being a
//! term's first [`BUCKET_CHARS`] characters. The index has one row per bucket and message,
//! listing the message's terms in that bucket, so a word of at least that length is looked
//! up as one bucket (newest message first) whatever term it begins, and a message costs one
//! row per distinct bucket rather than per word. A term of a script written without spaces
//! (its characters and pairs of neighbours, see `search::terms`) is in the bucket of its first
//! character, so such a text costs a row per distinct character.
//!
//! What a message costs the index is bounded whatever its text: its first [`MAX_BUCKETS`]
//! buckets (in the order their terms appear) and the first [`MAX_BUCKET_TERMS`] terms of each
//! are indexed, and nothing further finds it.

use std::collections::{BTreeMap, BTreeSet};

use super::terms;
use crate::messages::{Message, MessageType};

/// Characters of a term that name its bucket. A query word shorter than this matches only a
/// term equal to it (a one- or two-letter prefix would match most of a room).
pub const BUCKET_CHARS: usize = 3;

/// Rows one message has at most. A text of the longest a message may be has a few hundred
/// distinct buckets in words, or a thousand or two distinct characters of an unspaced script.
pub const MAX_BUCKETS: usize = 2000;
/// Terms one row lists at most: the row stays within a property's 32 Ki characters.
pub const MAX_BUCKET_TERMS: usize = 200;

/// The bucket a term is stored in, or a query word is looked up in.
pub fn bucket(term: &str) -> String {
    let length = match term.chars().next().is_some_and(super::is_unspaced) {
        true => 1,
        false => BUCKET_CHARS,
    };
    term.chars().take(length).collect()
}

/// Whether `term`, stored, is found by the query word `word`: a word of at least
/// [`BUCKET_CHARS`] characters finds the terms it begins, a shorter one only itself.
pub fn finds(word: &str, term: &str) -> bool {
    match word.chars().count() >= BUCKET_CHARS {
        true => term.starts_with(word),
        false => term == word,
    }
}

/// Whether the index holds `message` at all: a live message a member, a poll or a webhook
/// wrote. The server's own lines (joins, renames, pins) say nothing anyone searches for.
pub fn is_indexed(message: &Message) -> bool {
    message.is_live()
        && matches!(
            message.kind,
            MessageType::Message | MessageType::Poll | MessageType::Webhook
        )
}

/// A message's terms in the order they are read: its text as shown (markup removed, a link by
/// its visible text), each link's host, a poll's question and options, and its attachments'
/// names. Nothing for a message the index does not hold.
pub fn message_terms(message: &Message) -> Vec<String> {
    if !is_indexed(message) {
        return Vec::new();
    }
    let mut text = crate::html::text_content(&message.text);
    for host in link_hosts(&message.text) {
        text.push('\n');
        text.push_str(host);
    }
    if let Some(poll) = &message.poll {
        for line in std::iter::once(&poll.question).chain(poll.options.iter().map(|option| &option.text)) {
            text.push('\n');
            text.push_str(line);
        }
    }
    for attachment in &message.attachments {
        text.push('\n');
        text.push_str(&attachment.name);
    }
    terms(&text)
}

/// The hosts of the `http(s)` links in sanitized HTML: an anchor's `href` as well as a URL
/// written out, so `example.com` finds a link shown as "the agenda".
fn link_hosts(html: &str) -> Vec<&str> {
    let mut hosts = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("://") {
        let scheme_start = rest[..at]
            .rfind(|c: char| !c.is_ascii_alphabetic())
            .map_or(0, |i| i + 1);
        let scheme = &rest[scheme_start..at];
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | ':') || c.is_whitespace())
            .unwrap_or(after.len());
        if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") {
            hosts.push(&after[..end]);
        }
        rest = &after[end..];
    }
    hosts
}

/// A message's index: each bucket with the distinct terms of the message in it, within
/// [`MAX_BUCKETS`] and [`MAX_BUCKET_TERMS`].
pub fn buckets(message: &Message) -> BTreeMap<String, BTreeSet<String>> {
    let mut buckets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for term in message_terms(message) {
        let key = bucket(&term);
        if buckets.len() == MAX_BUCKETS && !buckets.contains_key(&key) {
            continue;
        }
        let terms = buckets.entry(key).or_default();
        if terms.len() < MAX_BUCKET_TERMS {
            terms.insert(term);
        }
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> Message {
        super::super::sample_message(text)
    }

    #[test]
    fn markup_is_indexed_as_its_text_and_links_by_their_host() {
        let m = message(r#"<b>Launch</b> plan: <a href="https://docs.example.com/a/b?x=1">the agenda</a>"#);
        let terms = message_terms(&m);
        for term in ["launch", "plan", "the", "agenda", "docs.example.com"] {
            assert!(terms.contains(&term.to_owned()), "{term} in {terms:?}");
        }
        assert!(!terms.iter().any(|t| t.contains("href")), "{terms:?}");
        let buckets = buckets(&m);
        assert_eq!(buckets["lau"], BTreeSet::from(["launch".to_owned()]));
    }

    #[test]
    fn short_words_match_only_themselves() {
        assert!(finds("dep", "deployment"));
        assert!(finds("deploy", "deployment"));
        assert!(!finds("de", "deployment"));
        assert!(finds("de", "de"));
        assert!(!finds("deployments", "deployment"));
    }

    #[test]
    fn an_unspaced_text_has_a_row_per_character_and_a_bounded_number_in_all() {
        let m = message("我们明天开会");
        let buckets = buckets(&m);
        assert_eq!(buckets.len(), 6);
        assert_eq!(buckets["我"], BTreeSet::from(["我".to_owned(), "我们".to_owned()]));
        // Ten thousand characters, each distinct: bounded rows, each within a property.
        let long: String = (0..10_000u32).map(|i| char::from_u32(0x4E00 + i).unwrap()).collect();
        let buckets = super::buckets(&message(&long));
        assert_eq!(buckets.len(), MAX_BUCKETS);
        assert!(buckets.contains_key("一"), "the first characters are kept");
        let words: Vec<String> = (0..1000).map(|i| format!("abc{i:04}")).collect();
        let buckets = super::buckets(&message(&words.join(" ")));
        assert_eq!(buckets["abc"].len(), MAX_BUCKET_TERMS);
    }

    #[test]
    fn tombstones_and_server_lines_are_not_indexed() {
        let mut gone = message("secret plans");
        gone.tombstone("ana", chrono::Utc::now());
        assert!(message_terms(&gone).is_empty());
        let mut line = message("ana joined");
        line.kind = MessageType::System;
        assert!(message_terms(&line).is_empty());
    }
}
