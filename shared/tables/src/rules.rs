//! The rules Azure Table Storage enforces, checked in one place before any backend sees a
//! request (Azure's documented limits on entities, keys and batches). The embedded store would accept anything
//! and Azurite accepts more than Azure (multi-partition batches, for one); checking here makes
//! every backend answer the same, with a message that says which rule was broken.

use std::collections::HashSet;

use super::{BatchOp, Entity, RangeQuery, Result, StoreError, Value};

/// Largest `$top` and largest page a query returns.
pub const MAX_PAGE_SIZE: usize = 1000;
/// Operations in one entity group transaction.
pub const MAX_BATCH_OPS: usize = 100;
/// Payload of one entity group transaction.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;
/// An entity's stored size (Azure's formula, see [`Entity::stored_size`]).
pub const MAX_ENTITY_BYTES: usize = 1024 * 1024;
/// A PartitionKey or RowKey, in UTF-16 bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// A string property, in UTF-16 code units (64 KiB).
pub const MAX_STRING_UNITS: usize = 32 * 1024;
/// A binary property, in bytes.
pub const MAX_BINARY_BYTES: usize = 64 * 1024;
/// Custom properties (255 minus PartitionKey, RowKey, Timestamp).
pub const MAX_PROPERTIES: usize = 252;
/// A property name, in characters.
pub const MAX_PROPERTY_NAME: usize = 255;

/// `^[A-Za-z][A-Za-z0-9]{2,62}$`, and not the reserved name `tables`.
pub fn check_table_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let valid = name.len() >= 3
        && name.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric())
        && !name.eq_ignore_ascii_case("tables");
    if valid {
        Ok(())
    } else {
        Err(StoreError::invalid(format!(
            "table name {name:?} must be 3-63 letters and digits starting with a letter"
        )))
    }
}

/// Forbidden in keys: `/ \ # ?`, U+0000–U+001F and U+007F–U+009F.
pub fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?') || c.is_control()
}

pub fn check_key(which: &str, key: &str) -> Result<()> {
    // Every write checks its keys: bytes that cannot be a forbidden character are passed over
    // without decoding, and only a key with another byte is read character by character.
    let maybe_forbidden = |b: u8| b < 0x20 || b >= 0x7f || matches!(b, b'/' | b'\\' | b'#' | b'?');
    if key.bytes().any(maybe_forbidden)
        && let Some(bad) = key.chars().find(|&c| is_forbidden_key_char(c))
    {
        return Err(StoreError::invalid(format!(
            "{which} must not contain {bad:?} (forbidden: / \\ # ? and control characters)"
        )));
    }
    if crate::entity::utf16_len(key) * 2 > MAX_KEY_BYTES {
        return Err(StoreError::invalid(format!("{which} is longer than 1 KiB")));
    }
    Ok(())
}

pub fn check_keys(partition_key: &str, row_key: &str) -> Result<()> {
    check_key("PartitionKey", partition_key)?;
    check_key("RowKey", row_key)
}

/// A C#-identifier-like name of at most 255 characters, not one of the system properties.
pub fn check_property_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let identifier =
        chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_');
    if !identifier || name.chars().count() > MAX_PROPERTY_NAME {
        return Err(StoreError::invalid(format!(
            "property name {name:?} must be an identifier of at most {MAX_PROPERTY_NAME} characters"
        )));
    }
    if matches!(name, "PartitionKey" | "RowKey" | "Timestamp" | "ETag") {
        return Err(StoreError::invalid(format!("property name {name:?} is reserved")));
    }
    Ok(())
}

/// The earliest `Edm.DateTime` Azure stores, 1601-01-01T00:00:00Z, in seconds from 1970.
const MIN_DATETIME_SECS: i64 = -11_644_473_600;

pub fn check_value(name: &str, value: &Value) -> Result<()> {
    match value {
        Value::String(s) if crate::entity::utf16_len(s) > MAX_STRING_UNITS => {
            Err(StoreError::invalid(format!("property {name} is longer than 64 KiB")))
        }
        Value::Binary(b) if b.len() > MAX_BINARY_BYTES => {
            Err(StoreError::invalid(format!("property {name} is larger than 64 KiB")))
        }
        Value::Double(f) if !f.is_finite() => {
            Err(StoreError::invalid(format!("property {name} must be a finite number")))
        }
        Value::DateTime(at) if at.timestamp() < MIN_DATETIME_SECS => Err(StoreError::invalid(format!(
            "property {name} is before 1601-01-01, the earliest date Azure stores"
        ))),
        _ => Ok(()),
    }
}

pub fn check_entity(entity: &Entity) -> Result<()> {
    checked_size(entity).map(drop)
}

/// [`check_entity`], answering the entity's stored size (a batch adds them up).
fn checked_size(entity: &Entity) -> Result<usize> {
    check_keys(&entity.partition_key, &entity.row_key)?;
    if entity.properties.len() > MAX_PROPERTIES {
        return Err(StoreError::invalid(format!(
            "an entity has at most {MAX_PROPERTIES} properties"
        )));
    }
    for (name, value) in &entity.properties {
        check_property_name(name)?;
        check_value(name, value)?;
    }
    match entity.stored_size() {
        size if size > MAX_ENTITY_BYTES => Err(StoreError::invalid("the entity is larger than 1 MiB")),
        size => Ok(size),
    }
}

pub fn check_query(query: &RangeQuery) -> Result<()> {
    check_key("PartitionKey", &query.partition_key)?;
    if query.top == 0 || query.top > MAX_PAGE_SIZE {
        return Err(StoreError::invalid(format!("$top must be 1..={MAX_PAGE_SIZE}")));
    }
    Ok(())
}

/// One partition, at most 100 operations, each entity once, at most 4 MiB. A broken rule names
/// the operation that broke it.
pub fn check_batch(partition_key: &str, ops: &[BatchOp]) -> Result<()> {
    if ops.is_empty() {
        return Err(StoreError::invalid("a batch needs at least one operation"));
    }
    if ops.len() > MAX_BATCH_OPS {
        return Err(StoreError::invalid(format!(
            "a batch holds at most {MAX_BATCH_OPS} operations, not {}",
            ops.len()
        )));
    }
    check_key("PartitionKey", partition_key)?;
    let mut seen = HashSet::new();
    let mut bytes = 0;
    for (index, op) in ops.iter().enumerate() {
        let (pk, rk) = op.keys();
        let fail = |e: StoreError| e.at_batch_index(index);
        if pk != partition_key {
            return Err(fail(StoreError::invalid(
                "every operation of a batch must use the batch's PartitionKey",
            )));
        }
        if !seen.insert(rk) {
            return Err(fail(StoreError::invalid("an entity can appear only once in a batch")));
        }
        match op {
            BatchOp::Insert(e) | BatchOp::Update { entity: e, .. } | BatchOp::Upsert { entity: e, .. } => {
                bytes += checked_size(e).map_err(fail)?;
            }
            BatchOp::Delete { row_key, .. } => check_key("RowKey", row_key).map_err(fail)?,
        }
    }
    if bytes > MAX_BATCH_BYTES {
        return Err(StoreError::invalid("a batch is limited to 4 MiB"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_azure() {
        assert!(check_table_name("Messages").is_ok());
        assert!(check_table_name("t1abc").is_ok());
        for bad in ["ab", "1abc", "has-dash", "tables", "Tables", &"a".repeat(64)] {
            assert!(check_table_name(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn forbidden_key_characters() {
        for bad in ["a/b", "a\\b", "a#b", "a?b", "a\tb", "a\u{7f}", "a\u{85}"] {
            let err = check_key("RowKey", bad).unwrap_err();
            assert!(err.message.contains("must not contain"), "{err}");
        }
        for good in ["o'brien", "with space", "naïve 日本", "a%2Fb", ""] {
            assert!(check_key("RowKey", good).is_ok(), "{good} refused");
        }
        assert!(check_key("RowKey", &"k".repeat(512)).is_ok());
        assert!(check_key("RowKey", &"k".repeat(513)).is_err());
    }

    /// The byte-wise pass refuses exactly the characters the rule names, alone and inside text.
    #[test]
    fn every_character_is_judged_by_the_rule() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            for key in [c.to_string(), format!("ab{c}cd")] {
                assert_eq!(check_key("RowKey", &key).is_err(), is_forbidden_key_char(c), "{c:?}");
            }
        }
    }

    #[test]
    fn datetimes_from_1601_on() {
        use chrono::{Duration, TimeZone, Utc};
        let earliest = Utc.with_ymd_and_hms(1601, 1, 1, 0, 0, 0).unwrap();
        assert!(check_value("at", &Value::DateTime(earliest)).is_ok());
        let before = Value::DateTime(earliest - Duration::microseconds(1));
        assert!(check_value("at", &before).unwrap_err().message.contains("before 1601"));
    }

    #[test]
    fn property_names() {
        assert!(check_property_name("createdAt").is_ok());
        assert!(check_property_name("_x1").is_ok());
        for bad in ["", "1a", "a-b", "PartitionKey", "Timestamp", &"a".repeat(256)] {
            assert!(check_property_name(bad).is_err(), "{bad} accepted");
        }
    }
}
