//! Trust levels: how far a member is trusted to write in one room, earned there from what the
//! server already knows of them — how long ago they joined, how many messages they sent (the
//! room's tally row, counted in each send's own transaction: `store::tally`), on how many days
//! they were active, and the timeouts moderators gave them (strikes).
//!
//! | level | links, uploads | `@everyone`, `@here` | own writes in the room |
//! |-------|----------------|----------------------|------------------------|
//! | 0     | no             | no                   | 10 a minute            |
//! | 1     | yes            | no                   | 30 a minute            |
//! | 2     | yes            | yes                  | 60 a minute            |
//! | 3     | yes            | yes                  | the user's rate only   |
//!
//! A member reaches level `n` once they meet every threshold of level `n` (and so of each level
//! below it). Thresholds are server settings, which a room may override; level 1's time since
//! joining is the old newcomer period, so a newcomer is a member at level 0. Each strike (a
//! timeout, from a moderator or the word filter) costs one level until [`STRIKE_MEMORY`] has
//! passed since the latest. A member with ManageMembers may set someone's level, which then
//! holds instead of the earned one until it is cleared. Holders of ManageMessages and both
//! people of a direct conversation are at level 3 whatever is set (`Access::trust_level`). A refusal is a 403 that names the
//! level needed: waiting seconds does not help, only earning it does.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::limits::{Rate, contains_link};
use crate::messages::mentions::Mentions;

/// Deserializes a field that must be present but may be null (serde reads a missing
/// `Option` as `None` unless the field has a deserializer of its own).
pub fn nullable<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// The highest level.
pub const TOP: TrustLevel = TrustLevel(3);
/// How long a strike (a timeout) counts against a member's level after their latest one.
pub const STRIKE_MEMORY: Duration = Duration::days(30);
/// Bounds of a threshold, so no setting overflows a count or a date.
pub const MAX_JOINED_SECONDS: u32 = 10 * 365 * 24 * 3600;
pub const MAX_MESSAGES: u32 = 1_000_000;
pub const MAX_ACTIVE_DAYS: u32 = 3650;

/// A member's trust level in a room, 0..=3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "u8", into = "u8")]
#[schema(value_type = u8)]
pub struct TrustLevel(u8);

impl TrustLevel {
    pub fn new(level: u8) -> Result<TrustLevel> {
        TrustLevel::try_from(level).map_err(Error::validation)
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// The rate of a member's own writes in the room at this level; none at the top (the
    /// user's bucket, over every room, still holds).
    pub fn rate(self) -> Option<Rate> {
        let per_minute = match self.0 {
            0 => 10,
            1 => 30,
            2 => 60,
            _ => return None,
        };
        Some(Rate {
            per_second: f64::from(per_minute) / 60.0,
            burst: per_minute.min(20),
        })
    }
}

impl TryFrom<u8> for TrustLevel {
    type Error = String;

    fn try_from(level: u8) -> std::result::Result<TrustLevel, String> {
        match level <= TOP.0 {
            true => Ok(TrustLevel(level)),
            false => Err(format!("a trust level is 0 to {}", TOP.0)),
        }
    }
}

impl From<TrustLevel> for u8 {
    fn from(level: TrustLevel) -> u8 {
        level.0
    }
}

/// What a member must have done to reach one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Threshold {
    /// Seconds since they joined the room (at most ten years).
    #[schema(maximum = 315360000)]
    pub joined_seconds: u32,
    /// Messages they sent in the room (at most 1,000,000).
    #[schema(maximum = 1000000)]
    pub messages: u32,
    /// Days (UTC) on which they sent a message there (at most 3650).
    #[schema(maximum = 3650)]
    pub active_days: u32,
}

/// The thresholds of levels 1, 2 and 3, in that order; each at least the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "[Threshold; 3]", into = "[Threshold; 3]")]
#[schema(value_type = Vec<Threshold>)]
pub struct Thresholds([Threshold; 3]);

impl Thresholds {
    /// The server's defaults: level 1 after `newcomer_period`; level 2 after a day, 10 messages
    /// on 2 days; level 3 after a week, 50 messages on 4 days.
    pub fn defaults(newcomer_period: Duration) -> Thresholds {
        let seconds = |d: Duration| u32::try_from(d.num_seconds().clamp(0, i64::from(MAX_JOINED_SECONDS))).unwrap_or(0);
        Thresholds([
            Threshold {
                joined_seconds: seconds(newcomer_period),
                messages: 0,
                active_days: 0,
            },
            Threshold {
                joined_seconds: seconds(Duration::days(1)).max(seconds(newcomer_period)),
                messages: 10,
                active_days: 2,
            },
            Threshold {
                joined_seconds: seconds(Duration::days(7)).max(seconds(newcomer_period)),
                messages: 50,
                active_days: 4,
            },
        ])
    }

    /// The level `tally` and the time since `joined_at` have earned.
    pub fn earned(&self, tally: &Tally, joined_at: DateTime<Utc>, now: DateTime<Utc>) -> TrustLevel {
        let joined = (now - joined_at).num_seconds().max(0);
        let met = self
            .0
            .iter()
            .take_while(|t| {
                joined >= i64::from(t.joined_seconds)
                    && tally.messages >= t.messages
                    && tally.active_days >= t.active_days
            })
            .count();
        TrustLevel(met as u8)
    }

    /// How long after joining a member reaches level 1 by time alone.
    pub fn newcomer_period(&self) -> Duration {
        Duration::seconds(i64::from(self.0[0].joined_seconds))
    }
}

impl TryFrom<[Threshold; 3]> for Thresholds {
    type Error = String;

    fn try_from(levels: [Threshold; 3]) -> std::result::Result<Thresholds, String> {
        for (i, t) in levels.iter().enumerate() {
            if t.joined_seconds > MAX_JOINED_SECONDS || t.messages > MAX_MESSAGES || t.active_days > MAX_ACTIVE_DAYS {
                return Err(format!(
                    "level {}'s threshold is out of range (joinedSeconds ≤ {MAX_JOINED_SECONDS}, messages ≤ {MAX_MESSAGES}, activeDays ≤ {MAX_ACTIVE_DAYS})",
                    i + 1
                ));
            }
        }
        for (i, pair) in levels.windows(2).enumerate() {
            let (low, high) = (pair[0], pair[1]);
            if high.joined_seconds < low.joined_seconds
                || high.messages < low.messages
                || high.active_days < low.active_days
            {
                return Err(format!("level {}'s thresholds are below level {}'s", i + 2, i + 1));
            }
        }
        Ok(Thresholds(levels))
    }
}

impl From<Thresholds> for [Threshold; 3] {
    fn from(thresholds: Thresholds) -> [Threshold; 3] {
        thresholds.0
    }
}

/// What a member did in a room, as its tally row counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub messages: u32,
    pub active_days: u32,
    /// The latest active day, in days since 1970-01-01 (UTC).
    pub last_day: i64,
}

impl Tally {
    /// The tally with one more message sent at `now`.
    pub fn counted(self, now: DateTime<Utc>) -> Tally {
        let today = day_of(now);
        let new_day = today != self.last_day;
        Tally {
            messages: self.messages.saturating_add(1),
            active_days: self.active_days.saturating_add(u32::from(new_day)),
            last_day: if new_day {
                today.max(self.last_day)
            } else {
                self.last_day
            },
        }
    }
}

/// A member's tally as read, with the version of its row (opaque: the store's ETag; none for a
/// row not written yet), so counting a send is one conditional write in its transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TallyRead {
    pub tally: Tally,
    pub version: Option<String>,
}

/// A send to count: whose, and their tally as admission read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub user: crate::ids::UserId,
    pub read: TallyRead,
}

fn day_of(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(86_400)
}

/// The moderation actions against a member that lower their level: timeouts, kept on their
/// member row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Strikes {
    pub count: u32,
    pub latest: Option<DateTime<Utc>>,
}

impl Strikes {
    /// The strikes that still count at `now`: all of them until [`STRIKE_MEMORY`] has passed
    /// since the latest.
    pub fn current(&self, now: DateTime<Utc>) -> u32 {
        match self.latest {
            Some(latest) if now - latest < STRIKE_MEMORY => self.count,
            _ => 0,
        }
    }

    /// One more strike at `now` (the old ones count again only if still current).
    pub fn add(self, now: DateTime<Utc>) -> Strikes {
        Strikes {
            count: self.current(now).saturating_add(1),
            latest: Some(self.latest.map_or(now, |l| l.max(now))),
        }
    }
}

/// The level a member earned (`earned`, from their tally and time since joining), less one
/// per current strike.
pub fn with_strikes(earned: TrustLevel, strikes: &Strikes, now: DateTime<Utc>) -> TrustLevel {
    let current = strikes.current(now).min(u32::from(TOP.0)) as u8;
    TrustLevel(earned.0.saturating_sub(current))
}

/// What a level gates in a write's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Links,
    Uploads,
    RoomMentions,
}

impl Gate {
    fn needs(self) -> TrustLevel {
        match self {
            Gate::Links | Gate::Uploads => TrustLevel(1),
            Gate::RoomMentions => TrustLevel(2),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Gate::Links => "posting links",
            Gate::Uploads => "attaching files",
            Gate::RoomMentions => "mentioning @everyone or @here",
        }
    }
}

/// 403 when a write's sanitized text (with `files` attached) needs a higher level than `level`,
/// naming the level it needs.
pub fn check_content(level: TrustLevel, sanitized_html: &str, files: bool) -> Result<()> {
    // A text with too many mentions is refused by content validation, which says why.
    let mentions = Mentions::parse(sanitized_html).unwrap_or_default();
    let gates = [
        (Gate::RoomMentions, mentions.everyone || mentions.here),
        (Gate::Links, contains_link(sanitized_html)),
        (Gate::Uploads, files),
    ];
    match gates.into_iter().find(|(gate, used)| *used && level < gate.needs()) {
        Some((gate, _)) => Err(Error::Forbidden(format!(
            "{} needs trust level {} in this room; you are at level {}",
            gate.what(),
            gate.needs().0,
            level.0
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(days: f64) -> DateTime<Utc> {
        DateTime::from_timestamp((days * 86_400.0) as i64, 0).unwrap()
    }

    #[test]
    fn each_level_needs_every_threshold_of_it_and_below() {
        let thresholds = Thresholds::defaults(Duration::minutes(10));
        let joined = at(100.0);
        let tally = |messages, active_days| Tally {
            messages,
            active_days,
            last_day: 0,
        };
        assert_eq!(thresholds.earned(&tally(0, 0), joined, at(100.0)).get(), 0);
        assert_eq!(thresholds.earned(&tally(0, 0), joined, at(100.01)).get(), 1);
        assert_eq!(
            thresholds.earned(&tally(10, 1), joined, at(102.0)).get(),
            1,
            "one day short"
        );
        assert_eq!(thresholds.earned(&tally(10, 2), joined, at(102.0)).get(), 2);
        assert_eq!(
            thresholds.earned(&tally(500, 40), joined, at(106.0)).get(),
            2,
            "not a week yet"
        );
        assert_eq!(thresholds.earned(&tally(50, 4), joined, at(107.0)).get(), 3);
    }

    #[test]
    fn a_tally_counts_each_day_once() {
        let t = Tally::default().counted(at(10.2)).counted(at(10.9)).counted(at(11.1));
        assert_eq!(
            t,
            Tally {
                messages: 3,
                active_days: 2,
                last_day: 11
            }
        );
        assert_eq!(
            t.counted(at(10.5)).active_days,
            3,
            "a clock behind counts its day once more, never back"
        );
        assert_eq!(t.counted(at(10.5)).last_day, 11);
    }

    #[test]
    fn strikes_count_until_a_month_after_the_latest() {
        let s = Strikes::default().add(at(1.0)).add(at(20.0));
        assert_eq!(s.current(at(49.0)), 2);
        assert_eq!(s.current(at(50.0)), 0);
        assert_eq!(s.add(at(60.0)).current(at(60.0)), 1, "old strikes do not come back");
    }

    #[test]
    fn thresholds_must_rise_and_stay_in_range() {
        let t = |s, m, d| Threshold {
            joined_seconds: s,
            messages: m,
            active_days: d,
        };
        assert!(Thresholds::try_from([t(0, 0, 0), t(0, 0, 0), t(0, 0, 0)]).is_ok());
        assert!(Thresholds::try_from([t(0, 5, 0), t(0, 4, 0), t(0, 9, 0)]).is_err());
        assert!(Thresholds::try_from([t(0, 0, 0), t(0, 0, 0), t(0, 0, MAX_ACTIVE_DAYS + 1)]).is_err());
        let json = serde_json::json!([{"joinedSeconds": 1, "messages": 2, "activeDays": 3}]);
        assert!(serde_json::from_value::<Thresholds>(json).is_err(), "three levels");
    }

    #[test]
    fn a_refusal_names_the_level_needed() {
        let refusal = check_content(
            TrustLevel(1),
            r#"<p>hi <span data-type="mention" data-id="@here">@here</span></p>"#,
            false,
        )
        .unwrap_err();
        assert!(
            matches!(refusal, Error::Forbidden(ref m) if m.contains("trust level 2") && m.contains("level 1")),
            "{refusal:?}"
        );
        assert!(check_content(TrustLevel(0), "see https://x.example", false).is_err());
        assert!(check_content(TrustLevel(0), "a file", true).is_err());
        assert!(check_content(TrustLevel(1), "see https://x.example", true).is_ok());
        assert!(
            check_content(
                TrustLevel(2),
                r#"<span data-type="mention" data-id="@everyone">@everyone</span>"#,
                false
            )
            .is_ok()
        );
    }
}
