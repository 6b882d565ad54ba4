//! Presence: whether a user has a live connection open (online) or not (away, with when their
//! last connection closed), and the custom status they set themselves (a short text and an
//! emoji, optionally expiring). Presence is derived from connections, never set by a client;
//! the status is the one part a user writes, so it is validated here like every other short
//! text a client sets (`text::plain_text`).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::text::plain_text;

/// The longest status text, in characters.
pub const MAX_STATUS_TEXT_CHARS: usize = 100;
/// The longest status emoji, in characters: one emoji may be several code points (a flag, a
/// skin tone, a ZWJ sequence), but never a sentence.
pub const MAX_STATUS_EMOJI_CHARS: usize = 16;

crate::text_field!(
    /// A status's text in the document.
    StatusText, 1, MAX_STATUS_TEXT_CHARS, crate::text::ONE_LINE
);
crate::text_field!(
    /// A status's emoji in the document: no whitespace anywhere.
    StatusEmoji, 1, MAX_STATUS_EMOJI_CHARS, crate::text::NO_SPACES
);
/// How far ahead a status may expire.
pub const MAX_STATUS_LIFETIME: Duration = Duration::days(366);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum PresenceState {
    /// At least one live connection is open.
    Online,
    /// No live connection is open (or none ever was).
    Away,
}

impl PresenceState {
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceState::Online => "online",
            PresenceState::Away => "away",
        }
    }

    pub fn parse(text: &str) -> Option<PresenceState> {
        match text {
            "online" => Some(PresenceState::Online),
            "away" => Some(PresenceState::Away),
            _ => None,
        }
    }
}

/// A status a user set: at least one of text and emoji.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// When it stops showing; none: until cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl CustomStatus {
    /// True while it shows.
    pub fn holds_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// `PUT /api/me/status`: what the user asks to show.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewStatus {
    /// 1–100 characters on one line, no control characters.
    #[serde(default)]
    #[schema(value_type = Option<StatusText>, inline)]
    pub text: Option<String>,
    /// 1–16 characters, no whitespace or control characters.
    #[serde(default)]
    #[schema(value_type = Option<StatusEmoji>, inline)]
    pub emoji: Option<String>,
    /// In the future, at most 366 days ahead.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

impl NewStatus {
    /// The status as it will be stored, checked against `now`.
    pub fn checked(self, now: DateTime<Utc>) -> Result<CustomStatus> {
        let text = self
            .text
            .as_deref()
            .map(|t| plain_text(t, "text", 1, MAX_STATUS_TEXT_CHARS))
            .transpose()?;
        let emoji = self
            .emoji
            .as_deref()
            .map(|e| plain_text(e, "emoji", 1, MAX_STATUS_EMOJI_CHARS))
            .transpose()?;
        if self
            .emoji
            .as_deref()
            .is_some_and(|e| e.chars().any(char::is_whitespace))
        {
            return Err(Error::validation("emoji must not contain whitespace"));
        }
        if text.is_none() && emoji.is_none() {
            return Err(Error::validation("a status needs text, an emoji or both"));
        }
        match self.expires_at {
            Some(at) if at <= now => Err(Error::validation("expiresAt must be in the future")),
            Some(at) if at > now + MAX_STATUS_LIFETIME => {
                Err(Error::validation("expiresAt must be at most 366 days ahead"))
            }
            expires_at => Ok(CustomStatus {
                text,
                emoji,
                expires_at,
            }),
        }
    }
}

/// A user's presence as members of their rooms see it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    pub state: PresenceState,
    /// When their last connection closed (away), or the latest connection opened (online);
    /// none for a user never seen connected.
    pub last_seen: Option<DateTime<Utc>>,
    /// Their custom status while it holds.
    pub status: Option<CustomStatus>,
}

impl Presence {
    /// A user never seen connected, with no status.
    pub fn unknown() -> Presence {
        Presence {
            state: PresenceState::Away,
            last_seen: None,
            status: None,
        }
    }

    /// The presence as shown at `now`: an expired status is gone.
    pub fn as_of(mut self, now: DateTime<Utc>) -> Presence {
        if self.status.as_ref().is_some_and(|s| !s.holds_at(now)) {
            self.status = None;
        }
        self
    }
}

/// When a user was online, as far as their presence row tells: the session they are in now
/// (from `since`, `until` none), or else their last one (from its start until they were last
/// seen). What an `@here` reaches: the members online when it was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnlineWindow {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

impl OnlineWindow {
    /// Whether the user was online at `at`. An earlier session than the last is not known, so
    /// a message from then does not count (unread counts look at recent messages anyway).
    pub fn covers(&self, at: DateTime<Utc>) -> bool {
        self.since
            .is_some_and(|since| since <= at && self.until.is_none_or(|until| at <= until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(text: Option<&str>, emoji: Option<&str>, expires_at: Option<DateTime<Utc>>) -> NewStatus {
        NewStatus {
            text: text.map(str::to_owned),
            emoji: emoji.map(str::to_owned),
            expires_at,
        }
    }

    #[test]
    fn an_online_window_covers_the_session_now_or_the_last_one() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let online = OnlineWindow {
            since: Some(t(10)),
            until: None,
        };
        assert!(!online.covers(t(9)) && online.covers(t(10)) && online.covers(t(99)));
        let away = OnlineWindow {
            since: Some(t(10)),
            until: Some(t(20)),
        };
        assert!(!away.covers(t(9)) && away.covers(t(15)) && away.covers(t(20)) && !away.covers(t(21)));
        assert!(!OnlineWindow::default().covers(t(0)), "never seen online");
    }

    #[test]
    fn a_status_is_trimmed_bounded_and_needs_text_or_an_emoji() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let ok = status(Some("  in a meeting "), Some("📅"), Some(now + Duration::hours(1)))
            .checked(now)
            .unwrap();
        assert_eq!(ok.text.as_deref(), Some("in a meeting"));
        assert!(ok.holds_at(now) && !ok.holds_at(now + Duration::hours(2)));
        assert!(status(None, None, None).checked(now).is_err());
        assert!(status(Some(&"x".repeat(101)), None, None).checked(now).is_err());
        assert!(status(Some("a\u{7}b"), None, None).checked(now).is_err());
        assert!(status(None, Some("a b"), None).checked(now).is_err());
        assert!(status(None, Some(&"🙂".repeat(17)), None).checked(now).is_err());
        assert!(status(Some("x"), None, Some(now)).checked(now).is_err());
        assert!(
            status(Some("x"), None, Some(now + Duration::days(367)))
                .checked(now)
                .is_err()
        );
    }

    #[test]
    fn an_expired_status_no_longer_shows() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let presence = Presence {
            status: Some(CustomStatus {
                text: Some("lunch".into()),
                emoji: None,
                expires_at: Some(now),
            }),
            ..Presence::unknown()
        };
        assert_eq!(presence.as_of(now).status, None);
    }
}
