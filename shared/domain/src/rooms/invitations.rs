//! Invitations into a room: for one user (listed in their invitations, to accept or decline)
//! or a code to share as a link, with an optional expiry and use count.
//!
//! A code is 32 random bytes' worth of secret: it carries its room's id (so accepting it
//! needs no global lookup) and a secret of 128 random bits, of which only a digest is stored.
//! The invitation's id is that digest's first half, so knowing the id (as the room's
//! moderators do) does not let anyone join. An expired, used-up or revoked code answers
//! exactly like one that never existed.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};

/// The longest a code stays valid: 30 days.
pub const MAX_EXPIRY_SECONDS: u32 = 30 * 24 * 3600;
pub const MAX_USES: u32 = 10_000;
/// Invitations a room lists at most.
pub const MAX_LISTED: usize = 1000;
/// Invitations one user may have waiting at once (from different rooms): past it, a new one
/// is refused, so nobody can fill anyone's list of invitations with names of their choosing.
pub const MAX_PENDING_PER_USER: usize = 100;

/// What to invite: a user, or a code (optionally expiring, optionally limited in uses).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewInvitation {
    /// Invite this user; leave out for a code.
    pub user_id: Option<String>,
    /// A code stops working this many seconds from now (1..=2592000); absent: never.
    #[schema(minimum = 1, maximum = 2592000)]
    pub expires_in_seconds: Option<u32>,
    /// A code stops working after this many joins (1..=10000); absent: unlimited. Not for a
    /// user's invitation.
    #[schema(minimum = 1, maximum = 10000)]
    pub max_uses: Option<u32>,
}

/// Who an invitation lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invitee {
    User(UserId),
    Code { max_uses: Option<u32> },
}

impl NewInvitation {
    /// The invitee and the expiry in seconds, checked.
    pub fn checked(&self) -> Result<(Invitee, Option<u32>)> {
        if let Some(seconds) = self.expires_in_seconds
            && !(1..=MAX_EXPIRY_SECONDS).contains(&seconds)
        {
            return Err(Error::validation(format!(
                "expiresInSeconds must be 1..={MAX_EXPIRY_SECONDS}"
            )));
        }
        let invitee = match (&self.user_id, self.max_uses) {
            (Some(_), Some(_)) => return Err(Error::validation("maxUses is for a code, not a user's invitation")),
            (Some(user), None) => Invitee::User(
                UserId::parse(user)
                    .map_err(|_| Error::validation("userId must be 1..=256 characters, no control characters"))?,
            ),
            (None, Some(uses)) if !(1..=MAX_USES).contains(&uses) => {
                return Err(Error::validation(format!("maxUses must be 1..={MAX_USES}")));
            }
            (None, max_uses) => Invitee::Code { max_uses },
        };
        Ok((invitee, self.expires_in_seconds))
    }
}

/// An invitation as the room's members see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    pub id: String,
    pub room_id: String,
    /// The invited user; absent for a code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The code to share: only in the answer that created it (it is stored as a digest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    pub uses: u32,
}

impl Invitation {
    /// True while it still lets someone in.
    pub fn is_open(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now) && self.max_uses.is_none_or(|max| self.uses < max)
    }
}

/// An invitation waiting for the caller to accept or decline it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingInvitation {
    pub room_id: String,
    pub room_name: String,
    pub room_description: String,
    pub invited_by: String,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Joins through a shared code.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Redeem {
    pub code: String,
}

/// The id of `user`'s invitation into a room: one per user and room, so inviting again
/// renews it.
pub fn user_invitation_id(user: &UserId) -> String {
    digest_id(&["user", user.as_str()])
}

/// A fresh code for `room` and the id of its invitation.
pub fn new_code(room: &RoomId) -> (String, String) {
    let secret: [u8; 16] = rand::random();
    let room_bytes = uuid::Uuid::parse_str(room.as_str())
        .expect("a room id is a UUID")
        .into_bytes();
    let mut code = room_bytes.to_vec();
    code.extend_from_slice(&secret);
    let id = code_id(&secret);
    (URL_SAFE_NO_PAD.encode(code), id)
}

/// The room a code names and its invitation's id; anything that is not a code answers as a
/// missing invitation.
pub fn parse_code(code: &str) -> Result<(RoomId, String)> {
    let missing = || Error::not_found("invitation not found");
    let bytes = URL_SAFE_NO_PAD.decode(code.trim()).map_err(|_| missing())?;
    if bytes.len() != 32 {
        return Err(missing());
    }
    let room = uuid::Uuid::from_slice(&bytes[..16]).map_err(|_| missing())?;
    let room = RoomId::parse(&room.hyphenated().to_string())?;
    Ok((room, code_id(&bytes[16..])))
}

/// True for text shaped like an invitation id (32 lower-case hex digits); anything else names
/// no invitation.
pub fn is_invitation_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn code_id(secret: &[u8]) -> String {
    let digest = Sha256::digest(secret);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn digest_id(parts: &[&str]) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    digest.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_names_its_room_and_only_its_digest_is_the_id() {
        let room = RoomId::generate();
        let (code, id) = new_code(&room);
        assert_eq!(parse_code(&code).unwrap(), (room.clone(), id.clone()));
        assert!(!code.contains(&id), "the id does not reveal the code");
        let (other, other_id) = new_code(&room);
        assert_ne!((code, id), (other, other_id), "codes are random");
        assert!(parse_code("not a code").is_err());
        assert!(parse_code(&URL_SAFE_NO_PAD.encode([0u8; 31])).is_err());
    }

    #[test]
    fn a_code_closes_when_expired_or_used_up() {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut invitation = Invitation {
            id: "i".into(),
            room_id: "r".into(),
            user_id: None,
            code: None,
            created_by: "u".into(),
            created_at: now,
            expires_at: Some(now + chrono::Duration::seconds(10)),
            max_uses: Some(1),
            uses: 0,
        };
        assert!(invitation.is_open(now));
        assert!(!invitation.is_open(now + chrono::Duration::seconds(10)));
        invitation.uses = 1;
        assert!(!invitation.is_open(now));
    }

    #[test]
    fn a_new_invitation_is_checked() {
        let bad = [
            NewInvitation {
                expires_in_seconds: Some(0),
                ..Default::default()
            },
            NewInvitation {
                max_uses: Some(0),
                ..Default::default()
            },
            NewInvitation {
                user_id: Some("bob".into()),
                max_uses: Some(3),
                ..Default::default()
            },
            NewInvitation {
                user_id: Some(String::new()),
                ..Default::default()
            },
        ];
        for input in bad {
            assert!(input.checked().is_err(), "{input:?}");
        }
        let code = NewInvitation {
            max_uses: Some(3),
            ..Default::default()
        };
        assert_eq!(code.checked().unwrap(), (Invitee::Code { max_uses: Some(3) }, None));
    }
}
