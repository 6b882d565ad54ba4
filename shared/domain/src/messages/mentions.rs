//! Mentions, read from a message's sanitized HTML: `<span data-type="mention" data-id="…">`
//! names a user, with `data-mention-type="role"` a role, and the ids `@everyone` / `@here`
//! the whole room. They are parsed from the sanitizer's output, never from the raw input, so
//! what is counted is exactly what is shown; that output is html5ever's canonical
//! serialization (double-quoted attribute values, `"` and `&` escaped), which a small scanner
//! reads exactly.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::html::decode_entities;
use crate::ids::UserId;

/// Most mentions one message may carry.
pub const MAX_MENTIONS: usize = 100;

pub const EVERYONE: &str = "@everyone";
pub const HERE: &str = "@here";

/// Whom a message mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mentions {
    /// Mentioned user ids, each once, in order of appearance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Mentioned role ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// `@everyone`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub everyone: bool,
    /// `@here`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub here: bool,
}

impl Mentions {
    /// The mentions of sanitized HTML; more than [`MAX_MENTIONS`] is a validation error.
    pub fn parse(sanitized_html: &str) -> Result<Mentions> {
        let mut mentions = Mentions::default();
        for span in spans(sanitized_html) {
            let attr = |name: &str| span.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
            if attr("data-type") != Some("mention") {
                continue;
            }
            let Some(id) = attr("data-id").map(str::trim).filter(|id| !id.is_empty()) else {
                continue;
            };
            match (id, attr("data-mention-type")) {
                (EVERYONE, _) => mentions.everyone = true,
                (HERE, _) => mentions.here = true,
                (role, Some("role")) => push_once(&mut mentions.roles, role),
                (user, _) if UserId::parse(user).is_ok() => push_once(&mut mentions.users, user),
                _ => {}
            }
        }
        let count = mentions.users.len() + mentions.roles.len() + usize::from(mentions.everyone || mentions.here);
        if count > MAX_MENTIONS {
            return Err(Error::validation(format!(
                "the message mentions {count} users and roles; at most {MAX_MENTIONS} are allowed"
            )));
        }
        Ok(mentions)
    }

    pub fn is_empty(&self) -> bool {
        self == &Mentions::default()
    }

    /// True when the message reaches `user`, holder of `roles`, through any mention; `@here`
    /// reaches them only if they were `online` when it was sent.
    pub fn reaches(&self, user: &str, roles: &[String], online: bool) -> bool {
        self.everyone
            || (self.here && online)
            || self.users.iter().any(|u| u == user)
            || self.roles.iter().any(|r| roles.contains(r))
    }
}

fn push_once(list: &mut Vec<String>, id: &str) {
    if !list.iter().any(|known| known == id) {
        list.push(id.to_owned());
    }
}

/// The attributes of every `<span …>` start tag, values decoded.
fn spans(html: &str) -> Vec<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("<span") {
        rest = &rest[at + "<span".len()..];
        if !rest.starts_with([' ', '>']) {
            continue;
        }
        let (attributes, after) = attributes(rest);
        found.push(attributes);
        rest = after;
    }
    found
}

/// Reads `name="value"` pairs up to the tag's closing `>`; returns them and the text after it.
fn attributes(mut rest: &str) -> (Vec<(String, String)>, &str) {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return (out, rest);
        }
        if let Some(after) = rest.strip_prefix('>') {
            return (out, after);
        }
        // Always move forward, even over a stray '=' with no name before it.
        let name_end = rest.find(['=', ' ', '>']).unwrap_or(rest.len()).max(1);
        let name = rest[..name_end].to_owned();
        rest = &rest[name_end..];
        let Some(quoted) = rest.strip_prefix("=\"") else {
            out.push((name, String::new()));
            continue;
        };
        let value_end = quoted.find('"').unwrap_or(quoted.len());
        out.push((name, decode_entities(&quoted[..value_end])));
        rest = quoted.get(value_end + 1..).unwrap_or("");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::sanitize;

    fn mention(id: &str, extra: &str) -> String {
        format!(r#"<span data-type="mention" data-id="{id}"{extra}>x</span>"#)
    }

    #[test]
    fn users_roles_and_the_room() {
        let html = sanitize(&format!(
            "<p>{} {} {} {} {}</p>",
            mention("bob", ""),
            mention("r1", r#" data-mention-type="role""#),
            mention("@everyone", ""),
            mention("bob", ""),
            mention("a&quot;b>c", ""),
        ));
        let m = Mentions::parse(&html).unwrap();
        assert_eq!(m.users, ["bob", "a\"b>c"]);
        assert_eq!(m.roles, ["r1"]);
        assert!(m.everyone && !m.here);
        assert!(m.reaches("zed", &[], false));
        let here = Mentions {
            here: true,
            ..Mentions::default()
        };
        assert!(here.reaches("zed", &[], true) && !here.reaches("zed", &[], false));
    }

    #[test]
    fn other_spans_and_idless_mentions_are_ignored() {
        let html = sanitize(r#"<span data-id="bob">x</span><span data-type="mention">y</span><spanx>"#);
        assert!(Mentions::parse(&html).unwrap().is_empty());
    }

    #[test]
    fn the_scanner_always_moves_forward() {
        let (attrs, rest) = attributes(r#"="x" a="b">after"#);
        assert_eq!(rest, "after");
        assert!(attrs.contains(&("a".to_owned(), "b".to_owned())));
    }

    #[test]
    fn too_many_is_refused() {
        let html: String = (0..=MAX_MENTIONS).map(|i| mention(&format!("u{i}"), "")).collect();
        assert!(matches!(Mentions::parse(&sanitize(&html)), Err(Error::Validation(_))));
    }
}
