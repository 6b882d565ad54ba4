//! The key codec: how times become row keys, decided in one place.
//!
//! A message is keyed by its tick (100 ns since 0001-01-01, .NET's unit, which Azure tooling
//! shows natively). `Messages` uses the reverse tick, `MAX_TICKS - tick`, so ascending row-key
//! order is newest first; `MessagesAscending` uses the tick itself. Both are 19-digit, zero-padded
//! decimals, so string order is numeric order, and each is the other's inverse.
//!
//! Ticks come from a per-process clock that never repeats or goes backwards. Two processes can
//! still pick the same tick; the send path detects that (the index insert answers 409) and takes
//! the next free tick, never overwriting.

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};

/// `DateTime.MaxValue.Ticks`: 9999-12-31T23:59:59.9999999.
pub const MAX_TICKS: u64 = 3_155_378_975_999_999_999;
/// Ticks at 1970-01-01T00:00:00Z.
pub const UNIX_EPOCH_TICKS: u64 = 621_355_968_000_000_000;
/// Digits in every key.
pub const KEY_WIDTH: usize = 19;

/// A point in time at 100 ns resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticks(u64);

impl Ticks {
    pub fn from_datetime(at: DateTime<Utc>) -> Ticks {
        let nanos = at.timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
        Ticks(UNIX_EPOCH_TICKS + nanos / 100)
    }

    pub fn to_datetime(self) -> DateTime<Utc> {
        let nanos = (self.0.saturating_sub(UNIX_EPOCH_TICKS)) as i64 * 100;
        DateTime::from_timestamp_nanos(nanos)
    }

    /// The following tick: where a send goes when its tick is taken.
    pub fn next(self) -> Ticks {
        Ticks(self.0 + 1)
    }

    pub fn value(self) -> u64 {
        self.0
    }

    /// The `Messages` row key: newest first.
    pub fn message_key(self) -> MessageKey {
        MessageKey(format!("{:019}", MAX_TICKS - self.0))
    }

    /// The `MessagesAscending` row key: oldest first.
    pub fn ascending_key(self) -> AscendingKey {
        AscendingKey(format!("{:019}", self.0))
    }
}

/// Parses a 19-digit key into its number.
fn parse_digits(key: &str) -> Option<u64> {
    if key.len() == KEY_WIDTH && key.bytes().all(|b| b.is_ascii_digit()) {
        key.parse::<u64>().ok().filter(|v| *v <= MAX_TICKS)
    } else {
        None
    }
}

/// A `Messages` row key, which is also the message's id inside its room.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageKey(String);

impl std::fmt::Display for MessageKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl MessageKey {
    /// The key of the message `id` names: an id that is no key names no message (404), as
    /// one of a message that does not exist.
    pub fn of_message(id: &str) -> crate::error::Result<MessageKey> {
        MessageKey::parse(id).ok_or_else(|| crate::error::Error::not_found("message not found"))
    }

    /// `None` unless `key` is exactly 19 digits within range.
    pub fn parse(key: &str) -> Option<MessageKey> {
        parse_digits(key).map(|_| MessageKey(key.to_owned()))
    }

    pub fn ticks(&self) -> Ticks {
        Ticks(MAX_TICKS - parse_digits(&self.0).expect("validated on construction"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A `MessagesAscending` row key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AscendingKey(String);

impl AscendingKey {
    pub fn parse(key: &str) -> Option<AscendingKey> {
        parse_digits(key).map(|_| AscendingKey(key.to_owned()))
    }

    pub fn ticks(&self) -> Ticks {
        Ticks(parse_digits(&self.0).expect("validated on construction"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Row keys of message rows are all digits; rows of other kinds in the same partition start
/// with a letter, so they sort after every message and a message range never meets them.
pub const MESSAGE_KEY_RANGE: (&str, &str) = ("0", ":");

/// Where a service's sends take their ticks: at the clock's time, each strictly after the
/// last one it handed out (two sends within one 100 ns of the clock get two), or — for a test
/// that makes every send collide — always the same one. One per service, so a test's clock
/// set in the future moves no other service's ticks.
#[derive(Debug)]
pub enum TickSource {
    Clock(AtomicU64),
    Frozen(Ticks),
}

impl Default for TickSource {
    fn default() -> TickSource {
        TickSource::Clock(AtomicU64::new(0))
    }
}

impl TickSource {
    /// The tick of a send at `now`.
    pub fn at(&self, now: DateTime<Utc>) -> Ticks {
        match self {
            TickSource::Frozen(ticks) => *ticks,
            TickSource::Clock(last) => {
                let wall = Ticks::from_datetime(now).0;
                let previous = last
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(wall.max(last + 1)))
                    .expect("the update closure always returns Some");
                Ticks(wall.max(previous + 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn known_value_from_the_reference() {
        let at = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let ticks = Ticks::from_datetime(at);
        assert_eq!(ticks.value(), 638_712_864_000_000_000);
        assert_eq!(ticks.message_key().as_str(), "2516666111999999999");
        assert_eq!(ticks.ascending_key().as_str(), "0638712864000000000");
        assert_eq!(ticks.to_datetime(), at);
    }

    #[test]
    fn keys_are_inverse_and_fixed_width() {
        for t in [0, 1, UNIX_EPOCH_TICKS, 638_712_864_000_000_123, MAX_TICKS] {
            let ticks = Ticks(t);
            let mk = ticks.message_key();
            let ak = ticks.ascending_key();
            assert_eq!((mk.as_str().len(), ak.as_str().len()), (KEY_WIDTH, KEY_WIDTH));
            assert_eq!(MessageKey::parse(mk.as_str()).unwrap().ticks(), ticks);
            assert_eq!(AscendingKey::parse(ak.as_str()).unwrap().ticks(), ticks);
        }
    }

    #[test]
    fn string_order_is_time_order() {
        let a = Ticks(9_999_999);
        let b = Ticks(10_000_000);
        assert!(a.ascending_key() < b.ascending_key());
        assert!(a.message_key() > b.message_key(), "newer sorts first");
        let (low, high) = MESSAGE_KEY_RANGE;
        assert!(low <= a.message_key().as_str() && a.message_key().as_str() < high);
        assert!("idem" > high);
    }

    #[test]
    fn clock_never_repeats() {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let source = TickSource::default();
        let ticks: Vec<Ticks> = (0..10_000).map(|_| source.at(at)).collect();
        assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn garbage_is_not_a_key() {
        for bad in [
            "",
            "123",
            "abcdefghijklmnopqrs",
            "9999999999999999999",
            "-000000000000000001",
            "０１２３４５６７８９０１２３４５６７８",
        ] {
            assert!(MessageKey::parse(bad).is_none(), "{bad}");
        }
    }
}
