//! The send checks, in their fixed order, as pure functions of the caller's access, the time
//! and the text: membership (settled by loading the access) → timed out → read-only →
//! slowmode ([`before_limits`]) → the limits (`crate::limits`, which read the store, so the
//! send path runs them in between) → word filter ([`word_filter`]); [`admit`] is the checks
//! without the limits. Content validation comes after them, in the send path.
//!
//! ManageMessages (and so the owner) is exempt from read-only, slowmode and the filter, never
//! from a timeout. Slowmode allows a send exactly `slowmodeSeconds` after the last one.

use chrono::{DateTime, Duration, Utc};

use super::mentions::Mentions;
use crate::access::Access;
use crate::error::{Error, Result};
use crate::members::Member;
use crate::permissions::Permission;
use crate::rooms::{FilterAction, Room};

/// A send that passed the checks, or one the word filter caught (refused with 403 after its
/// timeout, if any, is applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    Filtered { timeout: Option<Duration> },
}

pub fn admit(access: &Access, now: DateTime<Utc>, text: &str) -> Result<Admission> {
    before_limits(access, now)?;
    Ok(word_filter(access, text))
}

/// The checks before the limits: timed out → read-only → slowmode.
pub fn before_limits(access: &Access, now: DateTime<Utc>) -> Result<()> {
    refuse_timed_out(&access.member, now)?;
    if access.can(Permission::ManageMessages) {
        return Ok(());
    }
    if access.room.read_only {
        return Err(Error::Forbidden("the room is read-only".into()));
    }
    slowmode(&access.room, &access.member, now)
}

/// In a replies-only room, a member's message must answer one (and so join its thread);
/// ManageMessages is exempt.
pub fn replies_only(access: &Access, is_reply: bool) -> Result<()> {
    if access.room.replies_only && !is_reply && !access.can(Permission::ManageMessages) {
        return Err(Error::Forbidden(
            "the room takes replies in threads only; answer a message to post".into(),
        ));
    }
    Ok(())
}

/// The word filter alone (edits pass through it too); ManageMessages is exempt.
pub fn word_filter(access: &Access, text: &str) -> Admission {
    let filter = &access.room.word_filter;
    if access.can(Permission::ManageMessages) || !filter.filter().blocks(text) {
        return Admission::Admitted;
    }
    let timeout = match filter.action {
        FilterAction::Block => None,
        FilterAction::BlockAndTimeout => Some(Duration::seconds(i64::from(filter.timeout_seconds.unwrap_or(0)))),
    };
    Admission::Filtered { timeout }
}

/// 403 when the mentions reach the whole room and the sender lacks MentionEveryone.
pub fn mentions_allowed(access: &Access, mentions: &Mentions) -> Result<()> {
    if (mentions.everyone || mentions.here) && !access.can(Permission::MentionEveryone) {
        return Err(Error::Forbidden(
            "mentioning @everyone or @here needs the MentionEveryone permission".into(),
        ));
    }
    Ok(())
}

/// 403 while the member's timeout runs.
pub fn refuse_timed_out(member: &Member, now: DateTime<Utc>) -> Result<()> {
    match member.timeout_until {
        Some(until) if until > now => Err(Error::Forbidden(format!(
            "you are timed out until {}",
            until.to_rfc3339()
        ))),
        _ => Ok(()),
    }
}

/// 429 with the seconds left when the member's last send is inside the room's slowmode window.
pub fn slowmode(room: &Room, member: &Member, now: DateTime<Utc>) -> Result<()> {
    let window = Duration::seconds(i64::from(room.slowmode_seconds));
    match member.last_message_at {
        Some(last) if room.slowmode_seconds > 0 && now - last < window => {
            let left = window - (now - last);
            let retry_after_secs = (left.num_milliseconds() as u64).div_ceil(1000).max(1);
            Err(Error::TooManyRequests {
                message: format!("slowmode: wait {retry_after_secs} s between messages"),
                retry_after_secs,
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Rank;
    use crate::ids::UserId;
    use crate::members::MemberRole;
    use crate::permissions::Permissions;
    use crate::principal::Principal;
    use crate::rooms::WordFilterSettings;

    fn access(role: MemberRole, permissions: Permissions) -> Access {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let who = Principal {
            user_id: UserId::parse("u").unwrap(),
            name: "U".into(),
        };
        Access {
            room: Room {
                id: "r".into(),
                name: "r".into(),
                description: String::new(),
                owner_id: "o".into(),
                created_at: now,
                read_only: false,
                replies_only: false,
                slowmode_seconds: 0,
                word_filter: WordFilterSettings::default(),
                everyone_permissions: Permissions::default(),
                retention_seconds: None,
                visibility: crate::rooms::Visibility::Private,
                direct: false,
                max_sends_per_second: 0,
                trust_thresholds: None,
            },
            member: Member::new(&who, role, now),
            permissions,
            rank: Rank(0),
        }
    }

    #[test]
    fn the_order_is_timeout_read_only_slowmode_filter() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut a = access(MemberRole::Member, Permissions::default());
        a.room.read_only = true;
        a.room.slowmode_seconds = 60;
        a.member.last_message_at = Some(now);
        a.room.word_filter.words = vec!["bad".into()];
        a.member.timeout_until = Some(now + Duration::minutes(1));
        assert!(matches!(admit(&a, now, "bad"), Err(Error::Forbidden(m)) if m.contains("timed out")));
        a.member.timeout_until = None;
        assert!(matches!(admit(&a, now, "bad"), Err(Error::Forbidden(m)) if m.contains("read-only")));
        a.room.read_only = false;
        assert!(matches!(
            admit(&a, now, "bad"),
            Err(Error::TooManyRequests {
                retry_after_secs: 60,
                ..
            })
        ));
        a.member.last_message_at = Some(now - Duration::seconds(60));
        assert_eq!(admit(&a, now, "bad").unwrap(), Admission::Filtered { timeout: None });
        assert_eq!(admit(&a, now, "good").unwrap(), Admission::Admitted);
    }

    #[test]
    fn manage_messages_is_exempt_from_all_but_a_timeout() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut a = access(MemberRole::Member, [Permission::ManageMessages].into_iter().collect());
        a.room.read_only = true;
        a.room.slowmode_seconds = 60;
        a.member.last_message_at = Some(now);
        a.room.word_filter.words = vec!["bad".into()];
        assert_eq!(admit(&a, now, "bad").unwrap(), Admission::Admitted);
        a.member.timeout_until = Some(now + Duration::seconds(5));
        assert!(admit(&a, now, "x").is_err());
        let mut owner = access(MemberRole::Owner, Permissions::default());
        owner.member.timeout_until = Some(now + Duration::seconds(5));
        assert!(admit(&owner, now, "x").is_err(), "even the owner");
    }
}
