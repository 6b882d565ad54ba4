//! Inbound webhooks: a room's secret URLs that post `Webhook` lines through the one
//! door. What a webhook is, how its id and token are made and checked, and what a request to
//! it carries; the Slack markup it accepts is [`slack`]. Storing them is
//! `tabletalk::store::webhooks`; the use cases are `tabletalk::service::webhooks`.
//!
//! A webhook's id names its room (its first 32 hex digits are the room's UUID), as an
//! invitation code does, so the secret URL finds its row without a lookup table that would
//! have to be kept in step with the room: deleting the room deletes its webhooks with it.
//! The token is 32 random bytes, shown once; only its SHA-256 is stored, so a leaked table
//! does not let anyone post.

pub mod slack;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::access::{Access, Rank};
use crate::error::{Error, Result};
use crate::ids::{RoomId, UserId};
use crate::members::{Member, MemberRole};
use crate::permissions::Permissions;
use crate::principal::Principal;
use crate::rooms::Room;
use crate::text::plain_text;

/// Most webhooks one room may have.
pub const MAX_WEBHOOKS_PER_ROOM: usize = 50;
/// Longest name (and `username` override), in characters, as Slack's.
pub const MAX_NAME_CHARS: usize = 80;

crate::text_field!(
    /// A webhook's name in the document.
    WebhookNameText, 1, MAX_NAME_CHARS, crate::text::ONE_LINE
);
/// Longest `icon_url`.
pub const MAX_ICON_URL_CHARS: usize = 2048;
/// The prefix of a webhook's author id, so no user id can be mistaken for one.
pub const AUTHOR_PREFIX: &str = "webhook:";

/// A room's webhook, as its managers see it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: String,
    pub room_id: String,
    pub name: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// An automation's webhook: its messages carry the origin `automation` (a plain webhook's,
    /// `webhook`); neither ever makes an automation event.
    pub automation: bool,
    /// The SHA-256 of the current token, hex.
    #[serde(skip)]
    pub token_hash: String,
}

impl Webhook {
    /// The id its messages carry as their author.
    pub fn author_id(&self) -> String {
        format!("{AUTHOR_PREFIX}{}", self.id)
    }

    /// True when `token` is this webhook's current token.
    pub fn accepts(&self, token: &str) -> bool {
        // Digests are compared, not tokens: how long the comparison takes tells nothing about
        // the token.
        token_hash(token) == self.token_hash
    }

    /// The standing a webhook has in its room when it posts: a plain member without any
    /// permission (so no `@everyone`, and the read-only flag, the filter and the room's
    /// ceiling all apply) at the top trust level (it was set up by a manager of the room, and
    /// has a bucket of its own).
    pub fn access(&self, room: Room) -> Result<Access> {
        let principal = Principal {
            user_id: UserId::parse(&self.author_id())?,
            name: self.name.clone(),
        };
        let mut member = Member::new(&principal, MemberRole::Member, DateTime::UNIX_EPOCH);
        member.trust_level = Some(crate::trust::TOP);
        Ok(Access {
            room,
            member,
            permissions: Permissions::default(),
            rank: Rank(0),
        })
    }
}

/// A webhook as created or rotated: its secret URL, shown this once.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookWithUrl {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// `/api/hooks/{id}/{token}`, relative to the API's origin. Only its holder can post.
    pub url: String,
}

/// `POST /api/rooms/{roomId}/webhooks` and the rename's body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookName {
    /// 1-80 characters, trimmed.
    #[schema(value_type = WebhookNameText, inline)]
    pub name: String,
    /// On create: the webhook is an automation's (its messages' origin is `automation`).
    /// Ignored on a rename.
    #[serde(default)]
    pub automation: Option<bool>,
}

impl WebhookName {
    pub fn checked(&self) -> Result<String> {
        plain_text(&self.name, "name", 1, MAX_NAME_CHARS)
    }
}

/// What a webhook is sent: Slack's incoming-webhook body. `text` is read as Slack markup
/// ([`slack::to_html`]); plain text is valid Slack markup, so our own `{text}` is the same
/// body. Slack's other fields (`blocks`, `attachments`, `channel`, `icon_emoji`, `mrkdwn`) are
/// accepted and ignored, so a Slack integration works unchanged.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct WebhookPayload {
    pub text: Option<String>,
    /// Shown as the author's name instead of the webhook's (1-80 characters).
    #[serde(default)]
    pub username: Option<String>,
    /// An `https` (or `http`) picture shown with the message.
    #[serde(default)]
    pub icon_url: Option<String>,
}

/// A payload checked: the sanitized HTML body and the overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedPayload {
    pub html: String,
    pub username: Option<String>,
    pub icon_url: Option<String>,
}

impl WebhookPayload {
    pub fn checked(&self) -> Result<CheckedPayload> {
        let text = self
            .text
            .as_deref()
            .ok_or_else(|| Error::validation("a webhook message needs `text`"))?;
        // Checked before the conversion, so no request converts more than this.
        if text.chars().nth(slack::MAX_TEXT_CHARS).is_some() {
            return Err(Error::validation(format!(
                "`text` is longer than {} characters",
                slack::MAX_TEXT_CHARS
            )));
        }
        let username = match self.username.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(name) => Some(plain_text(name, "username", 1, MAX_NAME_CHARS)?),
        };
        let icon_url = match self.icon_url.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) => Some(checked_icon_url(url)?),
        };
        Ok(CheckedPayload {
            html: crate::html::sanitize(&slack::to_html(text)),
            username,
            icon_url,
        })
    }
}

fn checked_icon_url(url: &str) -> Result<String> {
    let lower = url.to_ascii_lowercase();
    let scheme_ok = lower.starts_with("https://") || lower.starts_with("http://");
    if !scheme_ok
        || url.chars().count() > MAX_ICON_URL_CHARS
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::validation(format!(
            "`icon_url` must be an http(s) URL of at most {MAX_ICON_URL_CHARS} characters"
        )));
    }
    Ok(url.to_owned())
}

/// A fresh webhook id for `room`: the room's UUID as 32 hex digits, then 16 random ones.
pub fn new_id(room: &RoomId) -> String {
    let room = uuid::Uuid::parse_str(room.as_str()).expect("a room id is a UUID");
    let random: [u8; 8] = rand::random();
    let tail: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{tail}", room.simple())
}

/// The room a webhook id names; anything else answers as a missing webhook.
pub fn parse_id(id: &str) -> Result<RoomId> {
    let valid = id.len() == 48 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !valid {
        return Err(missing());
    }
    let room = uuid::Uuid::try_parse(&id[..32]).map_err(|_| missing())?;
    RoomId::parse(&room.hyphenated().to_string()).map_err(|_| missing())
}

/// A 404 unless `id` is a webhook id of `room` (so no other text reaches a row key).
pub fn check_id_of(room: &RoomId, id: &str) -> Result<()> {
    match parse_id(id)? == *room {
        true => Ok(()),
        false => Err(missing()),
    }
}

/// A fresh token and its digest.
pub fn new_token() -> (String, String) {
    let secret: [u8; 32] = rand::random();
    let token = URL_SAFE_NO_PAD.encode(secret);
    let hash = token_hash(&token);
    (token, hash)
}

/// What is stored of a token.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The secret URL of a webhook with `token`.
pub fn url(id: &str, token: &str) -> String {
    format!("/api/hooks/{id}/{token}")
}

/// A missing, deleted or rotated-away webhook, or a wrong token: all answer the same.
pub fn missing() -> Error {
    Error::not_found("webhook not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_its_room_and_nothing_else_parses() {
        let room = RoomId::generate();
        let id = new_id(&room);
        assert_eq!(parse_id(&id).unwrap(), room);
        assert_ne!(new_id(&room), id, "ids are random");
        for bad in ["", "x", &id[..47], &id.to_uppercase(), &format!("{id}0")] {
            assert!(matches!(parse_id(bad), Err(Error::NotFound(_))), "{bad}");
        }
    }

    #[test]
    fn only_the_current_token_is_accepted() {
        let (token, hash) = new_token();
        let hook = Webhook {
            id: "i".into(),
            room_id: "r".into(),
            name: "n".into(),
            created_by: "u".into(),
            created_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            automation: false,
            token_hash: hash,
        };
        assert!(hook.accepts(&token));
        assert!(!hook.accepts(&new_token().0));
        assert!(!hook.token_hash.contains(&token));
    }

    #[test]
    fn a_payload_is_checked() {
        let payload = |text: Option<&str>, username: Option<&str>, icon: Option<&str>| WebhookPayload {
            text: text.map(str::to_owned),
            username: username.map(str::to_owned),
            icon_url: icon.map(str::to_owned),
        };
        assert!(payload(None, None, None).checked().is_err());
        assert!(payload(Some("x"), Some(&"n".repeat(81)), None).checked().is_err());
        assert!(payload(Some("x"), None, Some("javascript:alert(1)")).checked().is_err());
        let ok = payload(Some("*hi*"), Some(" Bot "), Some("https://x.example/a.png"))
            .checked()
            .unwrap();
        assert_eq!(ok.html, "<b>hi</b>");
        assert_eq!(ok.username.as_deref(), Some("Bot"));
    }
}
