//! The data model of a table: typed property values, entities, ETags and write conditions.
//!
//! These mirror Azure Table Storage's model (the EDM types we use, server-assigned ETag and
//! Timestamp) so that every backend stores exactly what Azure would, and code above the storage
//! layer never learns which backend it runs on.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// One typed property value. Azure's EDM types that tabletalk uses; `Int32` and `Guid` are
/// deliberately absent (we store `i64` and ids as strings), so there is one way to store each
/// kind of value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", content = "v")]
pub enum Value {
    #[serde(rename = "s")]
    String(String),
    #[serde(rename = "i")]
    Int64(i64),
    #[serde(rename = "f")]
    Double(f64),
    #[serde(rename = "b")]
    Bool(bool),
    /// Stored at 100 ns precision at most (Azure's tick); see [`Value::datetime`].
    #[serde(rename = "d")]
    DateTime(DateTime<Utc>),
    #[serde(rename = "x", with = "base64_bytes")]
    Binary(Vec<u8>),
}

impl Value {
    /// A datetime truncated to whole microseconds, the precision every backend (Azure, Azurite's
    /// JavaScript dates aside, and SQLite's text form) keeps, so a value reads back equal to
    /// what was written.
    pub fn datetime(at: DateTime<Utc>) -> Value {
        Value::DateTime(truncate_to_micros(at))
    }

    /// The name of the EDM type, as Azure spells it in `@odata.type` annotations.
    pub fn edm_type(&self) -> &'static str {
        match self {
            Value::String(_) => "Edm.String",
            Value::Int64(_) => "Edm.Int64",
            Value::Double(_) => "Edm.Double",
            Value::Bool(_) => "Edm.Boolean",
            Value::DateTime(_) => "Edm.DateTime",
            Value::Binary(_) => "Edm.Binary",
        }
    }

    /// Bytes this value counts towards Azure's 1 MiB entity limit (the documented formula).
    pub fn stored_size(&self) -> usize {
        match self {
            Value::String(s) => 4 + utf16_len(s) * 2,
            Value::Binary(b) => 4 + b.len(),
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            Value::Bool(_) => 1,
        }
    }
}

/// UTF-16 code units of `s`, as Azure counts a string. ASCII (nearly every key, name and
/// message) is one unit a byte, checked far faster than encoding: every write sizes its entity.
pub(crate) fn utf16_len(s: &str) -> usize {
    match s.is_ascii() {
        true => s.len(),
        false => s.encode_utf16().count(),
    }
}

/// Truncates to microseconds; see [`Value::datetime`].
pub fn truncate_to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at)
}

/// Formats a datetime the way Azure writes `Edm.DateTime` values.
pub fn format_datetime(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

mod base64_bytes {
    use super::BASE64;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Encodes binary values for wire formats that carry them as base64 text.
pub fn encode_binary(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Decodes a base64 binary value; `None` when the text is not base64.
pub fn decode_binary(text: &str) -> Option<Vec<u8>> {
    BASE64.decode(text).ok()
}

/// An entity's version as the store reports it. Opaque: compare for equality, never parse.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ETag(pub String);

impl std::fmt::Display for ETag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The condition on a write: `Any` is `If-Match: *` (the entity must exist, any version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    Any,
    Etag(ETag),
}

/// Replace drops properties the new entity does not name; merge keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    Replace,
    Merge,
}

/// An entity: its keys, its typed properties, and — when it was read from a store — the
/// version and timestamp the store assigned.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    pub partition_key: String,
    pub row_key: String,
    pub properties: BTreeMap<String, Value>,
    /// Set on entities read from a store; ignored on writes (conditions are explicit).
    pub etag: Option<ETag>,
    /// Server-assigned last-modified time; ignored on writes.
    pub timestamp: Option<DateTime<Utc>>,
}

impl Entity {
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Entity {
        Entity {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            properties: BTreeMap::new(),
            etag: None,
            timestamp: None,
        }
    }

    /// Builder-style property setter.
    pub fn with(mut self, name: &str, value: Value) -> Entity {
        self.properties.insert(name.to_owned(), value);
        self
    }

    pub fn set(&mut self, name: &str, value: Value) {
        self.properties.insert(name.to_owned(), value);
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        match self.properties.get(name) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    pub fn i64(&self, name: &str) -> Option<i64> {
        match self.properties.get(name) {
            Some(Value::Int64(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.properties.get(name) {
            Some(Value::Bool(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn datetime(&self, name: &str) -> Option<DateTime<Utc>> {
        match self.properties.get(name) {
            Some(Value::DateTime(v)) => Some(*v),
            _ => None,
        }
    }

    /// The version this entity was read at. Entities built in code have none.
    pub fn etag(&self) -> Option<&ETag> {
        self.etag.as_ref()
    }

    /// Bytes the entity counts towards Azure's 1 MiB limit.
    pub fn stored_size(&self) -> usize {
        let key_bytes = (utf16_len(&self.partition_key) + utf16_len(&self.row_key)) * 2;
        4 + key_bytes
            + self
                .properties
                .iter()
                .map(|(name, value)| 8 + utf16_len(name) * 2 + value.stored_size())
                .sum::<usize>()
    }
}
