//! The directory of public rooms: what a search matches, and a page of results.
//!
//! A search matches a room when every word of the query begins a word of the room's name,
//! both normalised the way the word filter normalises (`word_filter::words`), so `gen` finds
//! "General chat" and `ｃａｆé` finds "Cafe". Rooms are listed in the order of their
//! normalised names.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{Error, Result};
use crate::word_filter::words;

pub const MAX_QUERY_CHARS: usize = 100;
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;

/// Query parameters of a directory read.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct DirectoryQuery {
    /// Words the room's name must have words beginning with; absent or empty lists every
    /// public room. At most 100 characters.
    pub q: Option<String>,
    /// The `cursor` of the previous page of the same search.
    pub cursor: Option<String>,
    /// Rooms per page, 1..=100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<usize>,
}

/// A public room as the directory lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryEntry {
    pub id: String,
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryPage {
    pub rooms: Vec<DirectoryEntry>,
    /// Present when more rooms may follow: ask again with it (a page may be short, since one
    /// request reads a bounded part of the directory).
    pub cursor: Option<String>,
}

/// A checked search.
#[derive(Debug, Clone)]
pub struct Search {
    words: Vec<String>,
    pub limit: usize,
}

impl Search {
    pub fn new(query: &DirectoryQuery) -> Result<Search> {
        let q = query.q.as_deref().unwrap_or("");
        if q.chars().count() > MAX_QUERY_CHARS {
            return Err(Error::validation(format!("q is at most {MAX_QUERY_CHARS} characters")));
        }
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::validation(format!("limit must be 1..={MAX_LIMIT}")));
        }
        Ok(Search { words: words(q), limit })
    }

    /// True when every word of the search begins some word of `name`.
    pub fn matches(&self, name: &str) -> bool {
        let name = words(name);
        self.words
            .iter()
            .all(|q| name.iter().any(|w| w.starts_with(q.as_str())))
    }
}

/// Where a room sorts in the directory: its name's normalised words.
pub fn sort_key(name: &str) -> String {
    words(name).join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(q: &str) -> Search {
        Search::new(&DirectoryQuery {
            q: Some(q.into()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn every_query_word_must_begin_a_word_of_the_name() {
        assert!(search("gen").matches("General chat"));
        assert!(search("CHAT gen").matches("General chat"));
        assert!(search("ｃａｆé").matches("Cafe corner"));
        assert!(!search("eneral").matches("General chat"));
        assert!(!search("gen music").matches("General chat"));
        assert!(search("").matches("anything"));
    }

    #[test]
    fn limits_are_checked() {
        let long = DirectoryQuery {
            q: Some("x".repeat(101)),
            ..Default::default()
        };
        assert!(Search::new(&long).is_err());
        for limit in [0, 101] {
            let query = DirectoryQuery {
                limit: Some(limit),
                ..Default::default()
            };
            assert!(Search::new(&query).is_err());
        }
    }
}
