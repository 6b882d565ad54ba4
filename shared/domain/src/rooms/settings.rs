//! A room's settings and the change a moderator makes to them, with their limits. Applying
//! a change is `crate::service::room_settings`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::permissions::Permissions;
use crate::text::plain_text;
use crate::word_filter::WordFilter;

pub const MAX_SLOWMODE_SECONDS: u32 = 6 * 3600;
pub const MAX_FILTER_WORDS: usize = 1000;
pub const MAX_FILTER_WORD_CHARS: usize = 100;

crate::text_field!(
    /// One filter word in the document.
    FilterWord, 1, MAX_FILTER_WORD_CHARS, crate::text::ONE_LINE
);
/// The stored word list's budget, under table storage's 32 Ki UTF-16 units per string.
pub const MAX_FILTER_STORED_UNITS: usize = 30_000;
pub const MAX_FILTER_TIMEOUT_SECONDS: u32 = 7 * 24 * 3600;

/// What happens to a send the word filter catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub enum FilterAction {
    /// Refuse the send (403).
    #[default]
    Block,
    /// Refuse it and time the sender out for `timeoutSeconds` (a running longer timeout is
    /// never shortened).
    BlockAndTimeout,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WordFilterSettings {
    /// Words or phrases (at most 1000, each 1..=100 characters), matched as whole words after
    /// normalisation.
    #[schema(max_items = 1000, value_type = Vec<FilterWord>)]
    pub words: Vec<String>,
    #[serde(default)]
    pub action: FilterAction,
    /// For `BlockAndTimeout`: 1..=604800.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 604800)]
    pub timeout_seconds: Option<u32>,
}

impl WordFilterSettings {
    pub fn filter(&self) -> WordFilter {
        WordFilter::new(self.words.iter().map(String::as_str))
    }

    pub fn checked(mut self) -> Result<WordFilterSettings> {
        if self.words.len() > MAX_FILTER_WORDS {
            return Err(Error::validation(format!("at most {MAX_FILTER_WORDS} filter words")));
        }
        for word in &mut self.words {
            *word = plain_text(word, "a filter word", 1, MAX_FILTER_WORD_CHARS)?;
        }
        // The list is stored as one string property, which holds at most 32 Ki UTF-16 units.
        let stored = serde_json::to_string(&self).unwrap_or_default().encode_utf16().count();
        if stored > MAX_FILTER_STORED_UNITS {
            return Err(Error::validation(format!(
                "the word list takes {stored} characters stored; at most {MAX_FILTER_STORED_UNITS} fit"
            )));
        }
        match (self.action, self.timeout_seconds) {
            (FilterAction::Block, Some(_)) => Err(Error::validation("timeoutSeconds belongs to BlockAndTimeout")),
            (FilterAction::BlockAndTimeout, Some(s)) if (1..=MAX_FILTER_TIMEOUT_SECONDS).contains(&s) => Ok(self),
            (FilterAction::BlockAndTimeout, _) => Err(Error::validation(format!(
                "BlockAndTimeout needs timeoutSeconds in 1..={MAX_FILTER_TIMEOUT_SECONDS}"
            ))),
            (FilterAction::Block, None) => Ok(self),
        }
    }
}

/// A change to a room; absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoomChange {
    /// 1..=100 characters, trimmed, on one line.
    #[schema(value_type = Option<super::RoomName>, inline)]
    pub name: Option<String>,
    /// At most 500 characters, trimmed; line breaks allowed.
    #[schema(value_type = Option<super::RoomDescription>, inline)]
    pub description: Option<String>,
    pub read_only: Option<bool>,
    /// Members may only reply in threads; ManageMessages still posts.
    pub replies_only: Option<bool>,
    /// `public` lists the room in the directory and lets anyone join by id; `private` takes
    /// it out (members stay). Not for a direct conversation.
    pub visibility: Option<super::Visibility>,
    /// 0 turns slowmode off; at most 21600.
    #[schema(maximum = 21600)]
    pub slowmode_seconds: Option<u32>,
    pub word_filter: Option<WordFilterSettings>,
    /// Needs ManageRoles.
    pub everyone_permissions: Option<Permissions>,
    /// Seconds messages are kept (1..=315360000); null keeps them forever.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 315360000)]
    pub retention_seconds: Option<Option<u32>>,
    /// A ceiling on sends per second across all members (ManageMessages exempt); 0 turns it
    /// off (the default); at most 1000.
    #[schema(maximum = 1000)]
    pub max_sends_per_second: Option<u32>,
    /// The room's own trust thresholds of levels 1, 2 and 3 (see `Threshold`), each at least
    /// the one before; null returns the room to the server's.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<crate::trust::Threshold>>, min_items = 3, max_items = 3)]
    pub trust_thresholds: Option<Option<crate::trust::Thresholds>>,
}

/// Tells a field sent as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

pub const MAX_RETENTION_SECONDS: u32 = 10 * 365 * 24 * 3600;
