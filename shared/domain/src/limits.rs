//! The limits against abuse (a step of the send checks, between slowmode and the word filter: `messages::checks`), as pure
//! rules: the token bucket every limit is made of, the buckets there are (per user, per room,
//! per member in a room at their trust level: `crate::trust`) and the repeat-text rule. Where
//! a bucket's state lives and how processes share it is `tabletalk::store::limits` and
//! `tabletalk::service::limits`.
//!
//! Every limit answers 429 with the whole seconds until it would let the write through
//! (`Retry-After`), except what a trust level forbids a text to carry, which is a 403: waiting
//! a few seconds does not help, only a higher level does.

use chrono::{DateTime, Duration, Utc};

use crate::error::{Error, Result};
use crate::html;
use crate::ids::{RoomId, UserId};
use crate::word_filter;

/// Every user may write 20 times a second, 40 at once, in all rooms together.
pub const USER_RATE: Rate = Rate {
    per_second: 20.0,
    burst: 40,
};
/// The same text from the same sender in the same room is refused for this long.
pub const REPEAT_WINDOW: Duration = Duration::minutes(10);
/// The highest per-room ceiling a moderator may set.
pub const MAX_ROOM_SENDS_PER_SECOND: u32 = 1000;

/// How fast a bucket refills and how many tokens it holds at most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

impl Rate {
    /// A room's ceiling: `n` sends a second, `n` at once.
    pub fn room(sends_per_second: u32) -> Rate {
        Rate {
            per_second: f64::from(sends_per_second),
            burst: sends_per_second,
        }
    }
}

/// A token bucket's state: the tokens it held at `at`. It refills continuously at its rate
/// up to its burst; time that runs backwards (another instance's clock a little behind) adds
/// nothing and takes nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub at: DateTime<Utc>,
}

impl Bucket {
    /// A bucket nobody has drawn from: full.
    pub fn full(rate: Rate, now: DateTime<Utc>) -> Bucket {
        Bucket {
            tokens: f64::from(rate.burst),
            at: now,
        }
    }

    /// Takes up to `want` whole tokens (at least one), or answers how long until one is there.
    pub fn take(&mut self, rate: Rate, now: DateTime<Utc>, want: u32) -> Result<u32, Duration> {
        if now > self.at {
            let elapsed = (now - self.at).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
            self.tokens += elapsed * rate.per_second;
            self.at = now;
        }
        // Also when the rate was lowered since (a room's ceiling): never more than the burst.
        self.tokens = self.tokens.min(f64::from(rate.burst));
        let whole = self.tokens.floor().max(0.0) as u32;
        let taken = whole.min(want.max(1));
        if taken == 0 {
            let wait = (1.0 - self.tokens) / rate.per_second;
            return Err(Duration::microseconds((wait * 1e6).ceil() as i64));
        }
        self.tokens -= f64::from(taken);
        Ok(taken)
    }
}

/// Which bucket a write draws from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BucketId {
    /// Every write of one user, in every room ([`USER_RATE`]).
    User(UserId),
    /// Every member's sends in one room (its `maxSendsPerSecond`).
    Room(RoomId),
    /// A member's writes in one room, at their trust level's rate
    /// (`crate::trust::TrustLevel::rate`).
    Member(RoomId, UserId),
}

/// A member's write other than a send (a send's limits step is its own:
/// `tabletalk::service::limits`); each draws from their own bucket. An edit carries its
/// sanitized text, which their trust level may forbid to carry links or room mentions.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    Edit(&'a str),
    Reaction,
    Vote,
    Report,
    /// A pin or an unpin (a pin writes a line in the room).
    Pin,
    /// A slash command (one that posts is a send as well).
    Command,
}

impl Write<'_> {
    pub fn text(&self) -> Option<&str> {
        match self {
            Write::Edit(text) => Some(text),
            Write::Reaction | Write::Vote | Write::Report | Write::Pin | Write::Command => None,
        }
    }
}

/// A refusal as the client sees it: 429 with the seconds to wait, rounded up, at least 1.
pub fn too_many(what: &str, wait: Duration) -> Error {
    let retry_after_secs = (wait.num_milliseconds().max(0) as u64).div_ceil(1000).max(1);
    Error::TooManyRequests {
        message: format!("{what}: try again in {retry_after_secs} s"),
        retry_after_secs,
    }
}

/// True when sanitized HTML carries a link: an anchor, or a URL in its text (a client shows
/// one as a link) — read after the word filter's normalisation, so full-width or zero-width
/// disguises of `http://` or `www.` count too.
pub fn contains_link(sanitized_html: &str) -> bool {
    if sanitized_html.contains("<a ") {
        return true;
    }
    let text = word_filter::normalised(&html::text_content(sanitized_html));
    text.contains("://") || text.contains("www.")
}

/// What the repeat-text rule compares: the text's words after the word filter's
/// normalisation (so case, accents, markup, spacing and punctuation do not make a text new),
/// or, for a text without words (emoji), its normalised characters without spaces. `None` for
/// nothing to compare (a poll's empty body never repeats).
pub fn repeat_fingerprint(filter_text: &str) -> Option<String> {
    let plain = html::text_content(filter_text);
    let words = word_filter::words(&plain);
    let fingerprint = match words.is_empty() {
        false => words.join(" "),
        true => word_filter::normalised(&plain)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect(),
    };
    (!fingerprint.is_empty()).then_some(fingerprint)
}

/// How long a text sent at `sent_at` still blocks its repeat, if it does.
pub fn repeat_wait(sent_at: DateTime<Utc>, now: DateTime<Utc>) -> Option<Duration> {
    let until = sent_at + REPEAT_WINDOW;
    (now < until).then(|| until - now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: f64) -> DateTime<Utc> {
        DateTime::from_timestamp_micros((seconds * 1e6) as i64).unwrap()
    }

    #[test]
    fn a_bucket_gives_its_burst_then_refills_at_its_rate() {
        let mut bucket = Bucket::full(USER_RATE, at(0.0));
        assert_eq!(bucket.take(USER_RATE, at(0.0), 30), Ok(30));
        assert_eq!(bucket.take(USER_RATE, at(0.0), 30), Ok(10));
        let wait = bucket.take(USER_RATE, at(0.0), 1).unwrap_err();
        assert_eq!(wait, Duration::milliseconds(50), "one token every 1/20 s");
        assert_eq!(bucket.take(USER_RATE, at(1.0), 40), Ok(20), "a second refills 20");
        assert_eq!(
            bucket.take(USER_RATE, at(100.0), 100),
            Ok(40),
            "never more than the burst"
        );
    }

    #[test]
    fn time_running_backwards_adds_nothing() {
        let mut bucket = Bucket::full(USER_RATE, at(10.0));
        assert_eq!(bucket.take(USER_RATE, at(10.0), 40), Ok(40));
        assert!(bucket.take(USER_RATE, at(5.0), 1).is_err());
        assert_eq!(bucket.at, at(10.0));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let seconds = |wait| match too_many("x", wait) {
            Error::TooManyRequests { retry_after_secs, .. } => retry_after_secs,
            other => panic!("{other:?}"),
        };
        assert_eq!(seconds(Duration::milliseconds(50)), 1);
        assert_eq!(seconds(Duration::milliseconds(6000)), 6);
        assert_eq!(seconds(Duration::milliseconds(6001)), 7);
        assert_eq!(seconds(Duration::zero()), 1);
    }

    #[test]
    fn the_repeat_fingerprint_is_the_word_filters_normalisation() {
        let same = [
            "Hello, World!",
            "<p>hello   world</p>",
            "ＨＥＬＬＯ wörld",
            "hel\u{200B}lo world",
        ];
        for text in same {
            assert_eq!(repeat_fingerprint(text).as_deref(), Some("hello world"), "{text}");
        }
        assert_ne!(repeat_fingerprint("hello there"), repeat_fingerprint("hello world"));
        assert_eq!(repeat_fingerprint("😀 😀").as_deref(), Some("😀😀"));
        assert_eq!(repeat_fingerprint(""), None);
    }

    #[test]
    fn a_repeat_waits_ten_minutes() {
        let sent = at(1000.0);
        assert_eq!(repeat_wait(sent, at(1000.0)), Some(REPEAT_WINDOW));
        assert_eq!(repeat_wait(sent, at(1599.0)), Some(Duration::seconds(1)));
        assert_eq!(repeat_wait(sent, at(1600.0)), None);
    }

    #[test]
    fn links_are_seen_in_anchors_and_text() {
        assert!(contains_link(r#"<a href="https://x.example" rel="noopener">x</a>"#));
        assert!(contains_link("see https://x.example"));
        assert!(contains_link("see WWW.x.example"));
        assert!(contains_link("see ｈｔｔｐ：／／x.example"), "full-width");
        assert!(!contains_link("no link here: 3:30 www"));
    }
}
