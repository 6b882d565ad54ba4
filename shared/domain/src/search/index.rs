//! What the word index holds for a message: its terms grouped into buckets, a bucket being a
//! term's first [`BUCKET_CHARS`] characters. The index has one row per bucket and message,
//! listing the message's terms in that bucket, so a word of at least that length is looked
//! up as one bucket (newest message first) whatever term it begins, and a message costs one
//! row per distinct bucket rather than per word.

use std::collections::{BTreeMap, BTreeSet};

use super::terms;
use crate::messages::{Message, MessageType};

/// Characters of a term that name its bucket. A query word shorter than this matches only a
/// term equal to it (a one- or two-letter prefix would match most of a room).
pub const BUCKET_CHARS: usize = 3;

/// The bucket a term is stored in, or a query word is looked up in.
pub fn bucket(term: &str) -> String {
    term.chars().take(BUCKET_CHARS).collect()
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

/// A message's index: each bucket with the distinct terms of the message in it.
pub fn buckets(message: &Message) -> BTreeMap<String, BTreeSet<String>> {
    let mut buckets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for term in message_terms(message) {
        buckets.entry(bucket(&term)).or_default().insert(term);
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
    fn tombstones_and_server_lines_are_not_indexed() {
        let mut gone = message("secret plans");
        gone.tombstone("ana", chrono::Utc::now());
        assert!(message_terms(&gone).is_empty());
        let mut line = message("ana joined");
        line.kind = MessageType::System;
        assert!(message_terms(&line).is_empty());
    }
}
