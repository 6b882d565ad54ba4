//! The stored form of an entity's properties: a JSON object of typed values,
//! `{"name":{"t":"s","v":"text"},…}`, exactly as serde writes the map of [`Value`]s (and reads it
//! back).
//!
//! Encoding is written out here rather than left to serde: every write of a send encodes about
//! six rows, and serde's map and adjacently tagged enum machinery cost more than the escaping
//! itself. Each name and scalar still goes through serde_json — but a datetime, whose RFC 3339
//! text never needs escaping — so the text is the one serde writes, byte for byte (a test holds
//! the two together).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::entity::{encode_binary, format_datetime};
use crate::{Result, StoreError, Value};

/// Most properties' names, type tags and values fit this, so the text rarely grows.
const BYTES_PER_PROPERTY: usize = 48;

/// The stored text of `properties`.
pub(super) fn encode(properties: &BTreeMap<String, Value>) -> Result<String> {
    let mut out = Vec::with_capacity(2 + properties.len() * BYTES_PER_PROPERTY);
    out.push(b'{');
    for (i, (name, value)) in properties.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        scalar(&mut out, name.as_str())?;
        out.extend_from_slice(b":{\"t\":\"");
        out.extend_from_slice(tag(value).as_bytes());
        out.extend_from_slice(b"\",\"v\":");
        match value {
            Value::String(text) => scalar(&mut out, text.as_str())?,
            Value::Int64(n) => scalar(&mut out, n)?,
            Value::Double(x) => scalar(&mut out, x)?,
            Value::Bool(b) => scalar(&mut out, b)?,
            // chrono's serde writes this text through a character-at-a-time escaper; it never
            // needs escaping.
            Value::DateTime(at) => {
                out.push(b'"');
                out.extend_from_slice(format_datetime(at).as_bytes());
                out.push(b'"');
            }
            Value::Binary(bytes) => scalar(&mut out, encode_binary(bytes).as_str())?,
        }
        out.push(b'}');
    }
    out.push(b'}');
    String::from_utf8(out).map_err(|e| StoreError::internal(format!("encode: {e}")))
}

/// The properties stored as `text`.
pub(super) fn decode(text: &str) -> Result<BTreeMap<String, Value>> {
    serde_json::from_str(text).map_err(|e| StoreError::internal(format!("stored entity unreadable: {e}")))
}

/// `Value`'s serde tag for each variant.
fn tag(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "s",
        Value::Int64(_) => "i",
        Value::Double(_) => "f",
        Value::Bool(_) => "b",
        Value::DateTime(_) => "d",
        Value::Binary(_) => "x",
    }
}

fn scalar(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) -> Result<()> {
    serde_json::to_writer(out, value).map_err(|e| StoreError::internal(format!("encode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn every_kind() -> BTreeMap<String, Value> {
        let at = Utc.with_ymd_and_hms(2026, 12, 2, 1, 25, 15).unwrap() + chrono::Duration::microseconds(746_722);
        let mut props = BTreeMap::new();
        let texts = [
            "",
            "plain",
            "<p>a \"quoted\" word, a back\\slash, a /slash</p>",
            "controls \u{0}\u{1}\u{8}\t\n\u{c}\r\u{1f}\u{7f}",
            "ünïcödé, 中文, emoji 🎉, a lone-looking \u{fffd}",
            "{\"json\":[\"inside\",1]}",
        ];
        for (i, text) in texts.iter().enumerate() {
            props.insert(format!("s{i}"), Value::String((*text).to_owned()));
        }
        for (i, n) in [0, 1, -1, 96, i64::MAX, i64::MIN].into_iter().enumerate() {
            props.insert(format!("i{i}"), Value::Int64(n));
        }
        for (i, x) in [0.0, -0.0, 0.1, 1.5e300, -2.5e-300, 1e21, f64::NAN, f64::INFINITY]
            .into_iter()
            .enumerate()
        {
            props.insert(format!("f{i}"), Value::Double(x));
        }
        props.insert("b0".into(), Value::Bool(false));
        props.insert("b1".into(), Value::Bool(true));
        props.insert("d0".into(), Value::datetime(at));
        // Whole seconds, milliseconds, the earliest date Azure stores, the last of year 9999,
        // year 10000, a leap second, nanoseconds.
        for (i, (secs, nanos)) in [
            (0, 0),
            (1, 120_000_000),
            (-11_644_473_600, 0),
            (253_402_300_799, 999_999_000),
            (253_402_300_800, 0),
            (1_483_228_799, 1_000_000_000),
            (5, 7),
        ]
        .into_iter()
        .enumerate()
        {
            props.insert(
                format!("d{}", i + 1),
                Value::DateTime(Utc.timestamp_opt(secs, nanos).unwrap()),
            );
        }
        props.insert("x0".into(), Value::Binary(vec![]));
        props.insert("x1".into(), Value::Binary((0..=255).collect()));
        props.insert("name with \"quotes\" and ünïcödé".into(), Value::Bool(true));
        props
    }

    #[test]
    fn the_stored_text_is_the_one_serde_writes() {
        let props = every_kind();
        assert_eq!(encode(&props).unwrap(), serde_json::to_string(&props).unwrap());
        assert_eq!(encode(&BTreeMap::new()).unwrap(), "{}");
    }

    #[test]
    fn the_stored_text_reads_back_as_written() {
        let mut props = every_kind();
        // JSON has no NaN or infinity: serde writes them as null, which reads back as no number.
        props.retain(|_, v| !matches!(v, Value::Double(x) if !x.is_finite()));
        assert_eq!(decode(&encode(&props).unwrap()).unwrap(), props);
    }
}
