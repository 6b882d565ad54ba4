//! Entities to and from the Table service's JSON, with `@odata.type` annotations.
//!
//! Writing: every property whose type JSON cannot carry gets `name@odata.type` — Int64 (sent as
//! a string, since JSON numbers lose precision past 2^53), DateTime, Binary (base64) — and so
//! does Double, always, written with a fraction or an exponent (`1.0`, `1e300`, never `1`),
//! because an unannotated whole number is an Int32 to the service.
//!
//! Reading: an annotation, when present, decides the type. Without one, a JSON string is a
//! String, a boolean a Bool, a whole number an Int32 — which we read as Int64, the only integer
//! type we have — and a number with a fraction or exponent a Double. Reads ask for
//! `odata=fullmetadata`, the mode in which the service annotates the most: with
//! `minimalmetadata` Azure returns a whole-valued Double as a bare integer with no annotation
//! (reported in Azure/azure-sdk-for-js#19899), which no reader can tell from an Int32. Azurite
//! 3.37 never returns an `Edm.Double` annotation, in any mode, but writes a Double-annotated
//! number with a fraction (`1.0`, `2.0`), so the rule above reads it back as a Double.
//!
//! DateTimes are written with seven fractional digits (Azure's 100 ns tick); anything finer is
//! truncated, as [`Value::DateTime`] documents.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value as Json};

use crate::entity::{decode_binary, encode_binary};
use crate::{ETag, Entity, Result, StoreError, Value};

const TYPE_SUFFIX: &str = "@odata.type";

/// The request body for inserting or writing an entity.
pub fn entity_body(entity: &Entity) -> String {
    let mut object = Map::new();
    object.insert("PartitionKey".into(), Json::String(entity.partition_key.clone()));
    object.insert("RowKey".into(), Json::String(entity.row_key.clone()));
    for (name, value) in &entity.properties {
        let (json, edm_type) = write_value(value);
        if let Some(edm_type) = edm_type {
            object.insert(format!("{name}{TYPE_SUFFIX}"), Json::String(edm_type.into()));
        }
        object.insert(name.clone(), json);
    }
    Json::Object(object).to_string()
}

/// A value as JSON, and the annotation it needs, if any.
fn write_value(value: &Value) -> (Json, Option<&'static str>) {
    match value {
        Value::String(s) => (Json::String(s.clone()), None),
        Value::Bool(b) => (Json::Bool(*b), None),
        Value::Int64(i) => (Json::String(i.to_string()), Some(value.edm_type())),
        // serde_json writes finite floats with a '.' or an exponent (1.0, 1e300); rules.rs keeps
        // NaN and infinities out, so `from_f64` cannot fail here.
        Value::Double(f) => (
            serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Some(value.edm_type()),
        ),
        Value::DateTime(at) => (Json::String(format_tick_datetime(at)), Some(value.edm_type())),
        Value::Binary(bytes) => (Json::String(encode_binary(bytes)), Some(value.edm_type())),
    }
}

/// `2026-11-30T08:42:02.1234560Z`: seven fractional digits, the precision Azure stores.
pub fn format_tick_datetime(at: &DateTime<Utc>) -> String {
    let seconds = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let ticks = at.timestamp_subsec_nanos() / 100;
    format!("{}.{ticks:07}Z", seconds.trim_end_matches('Z'))
}

/// The entities of a query response (`{"value": [..]}`).
pub fn parse_entities(body: &[u8]) -> Result<Vec<Entity>> {
    let json: Json = serde_json::from_slice(body).map_err(|e| malformed(format!("query response is not JSON: {e}")))?;
    let Some(Json::Array(items)) = json.get("value") else {
        return Err(malformed("query response has no \"value\" array"));
    };
    items
        .iter()
        .map(|item| match item {
            Json::Object(object) => parse_entity_object(object),
            _ => Err(malformed("query response holds a non-object entity")),
        })
        .collect()
}

/// One entity's JSON (a `GET` of a single entity).
pub fn parse_entity(body: &[u8]) -> Result<Entity> {
    match serde_json::from_slice(body) {
        Ok(Json::Object(object)) => parse_entity_object(&object),
        Ok(_) => Err(malformed("entity response is not a JSON object")),
        Err(e) => Err(malformed(format!("entity response is not JSON: {e}"))),
    }
}

fn parse_entity_object(object: &Map<String, Json>) -> Result<Entity> {
    let key = |name: &str| match object.get(name) {
        Some(Json::String(s)) => Ok(s.clone()),
        _ => Err(malformed(format!("entity has no string {name}"))),
    };
    let mut entity = Entity::new(key("PartitionKey")?, key("RowKey")?);
    if let Some(Json::String(etag)) = object.get("odata.etag") {
        entity.etag = Some(ETag(etag.clone()));
    }
    for (name, json) in object {
        if name.starts_with("odata.") || name.ends_with(TYPE_SUFFIX) || name == "PartitionKey" || name == "RowKey" {
            continue;
        }
        let annotation = match object.get(&format!("{name}{TYPE_SUFFIX}")) {
            Some(Json::String(t)) => Some(t.as_str()),
            Some(_) => return Err(malformed(format!("property {name} has a non-string type annotation"))),
            None => None,
        };
        if name == "Timestamp" {
            entity.timestamp = Some(parse_datetime(name, json)?);
            continue;
        }
        // The service never stores nulls; tolerate one rather than fail the whole read.
        if json.is_null() {
            continue;
        }
        entity
            .properties
            .insert(name.clone(), read_value(name, json, annotation)?);
    }
    Ok(entity)
}

/// A property value from its JSON and its annotation.
fn read_value(name: &str, json: &Json, annotation: Option<&str>) -> Result<Value> {
    let wrong = || {
        malformed(format!(
            "property {name} is not a valid {}",
            annotation.unwrap_or("value")
        ))
    };
    match (annotation, json) {
        (None | Some("Edm.String"), Json::String(s)) => Ok(Value::String(s.clone())),
        // Guid is not one of our types; its canonical text form is the faithful reading.
        (Some("Edm.Guid"), Json::String(s)) => Ok(Value::String(s.clone())),
        (None | Some("Edm.Boolean"), Json::Bool(b)) => Ok(Value::Bool(*b)),
        (Some("Edm.Int64"), Json::String(s)) => s.parse().map(Value::Int64).map_err(|_| wrong()),
        (Some("Edm.Int64" | "Edm.Int32"), Json::Number(n)) => n.as_i64().map(Value::Int64).ok_or_else(wrong),
        (Some("Edm.Double"), Json::Number(n)) => n.as_f64().map(Value::Double).ok_or_else(wrong),
        (Some("Edm.Double"), Json::String(s)) => parse_special_double(s).map(Value::Double).ok_or_else(wrong),
        (None, Json::Number(n)) => match n.as_i64() {
            Some(i) => Ok(Value::Int64(i)),
            None => n.as_f64().map(Value::Double).ok_or_else(wrong),
        },
        (Some("Edm.DateTime"), json) => parse_datetime(name, json).map(Value::DateTime),
        (Some("Edm.Binary"), Json::String(s)) => decode_binary(s).map(Value::Binary).ok_or_else(wrong),
        (Some(other), _) if !KNOWN_TYPES.contains(&other) => {
            Err(malformed(format!("property {name} has unsupported type {other}")))
        }
        _ => Err(wrong()),
    }
}

const KNOWN_TYPES: &[&str] = &[
    "Edm.String",
    "Edm.Guid",
    "Edm.Boolean",
    "Edm.Int32",
    "Edm.Int64",
    "Edm.Double",
    "Edm.DateTime",
    "Edm.Binary",
];

/// `NaN`, `Infinity`, `-Infinity` (how OData spells non-finite doubles), or a number in a string.
fn parse_special_double(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" | "INF" => Some(f64::INFINITY),
        "-Infinity" | "-INF" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

fn parse_datetime(name: &str, json: &Json) -> Result<DateTime<Utc>> {
    json.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|at| at.with_timezone(&Utc))
        .ok_or_else(|| malformed(format!("property {name} is not an RFC 3339 datetime")))
}

fn malformed(message: impl Into<String>) -> StoreError {
    StoreError::internal(format!("unexpected answer from the table service: {}", message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn writes_annotations_where_the_type_is_not_inferable() {
        let entity = Entity::new("p", "r")
            .with("s", Value::String("x".into()))
            .with("i", Value::Int64(9_007_199_254_740_993))
            .with("d", Value::Double(1.0))
            .with("b", Value::Bool(true))
            .with("t", Value::DateTime(at("2024-01-02T03:04:05.123456Z")))
            .with("x", Value::Binary(vec![0, 1, 2]));
        let json: Json = serde_json::from_str(&entity_body(&entity)).unwrap();
        let expected = serde_json::json!({
            "PartitionKey": "p", "RowKey": "r",
            "s": "x",
            "i": "9007199254740993", "i@odata.type": "Edm.Int64",
            "d": 1.0, "d@odata.type": "Edm.Double",
            "b": true,
            "t": "2024-01-02T03:04:05.1234560Z", "t@odata.type": "Edm.DateTime",
            "x": "AAEC", "x@odata.type": "Edm.Binary",
        });
        assert_eq!(json, expected);
        assert!(entity_body(&entity).contains("\"d\":1.0"), "{}", entity_body(&entity));
    }

    #[test]
    fn datetimes_are_written_in_ticks() {
        assert_eq!(
            format_tick_datetime(&at("2024-01-02T03:04:05Z")),
            "2024-01-02T03:04:05.0000000Z"
        );
        assert_eq!(
            format_tick_datetime(&at("1601-01-01T00:00:00.123456789Z")),
            "1601-01-01T00:00:00.1234567Z"
        );
    }

    #[test]
    fn reads_every_type_back() {
        let body = br#"{
            "odata.etag": "W/\"datetime'2026-11-30T09%3A30%3A51.3411301Z'\"",
            "PartitionKey": "p", "RowKey": "r",
            "Timestamp@odata.type": "Edm.DateTime", "Timestamp": "2026-11-30T09:30:51.3411301Z",
            "s": "x", "b": false, "i32": 5, "neg": -7,
            "i@odata.type": "Edm.Int64", "i": "-9007199254740993",
            "d": 1.0, "d2": 2.5e-3, "dz@odata.type": "Edm.Double", "dz": 3,
            "t@odata.type": "Edm.DateTime", "t": "2024-01-02T03:04:05.123456Z",
            "x@odata.type": "Edm.Binary", "x": "AAEC"
        }"#;
        let entity = parse_entity(body).unwrap();
        assert_eq!(
            entity.etag,
            Some(ETag("W/\"datetime'2026-11-30T09%3A30%3A51.3411301Z'\"".into()))
        );
        assert_eq!(entity.timestamp, Some(at("2026-11-30T09:30:51.3411301Z")));
        let expected = Entity::new("p", "r")
            .with("s", Value::String("x".into()))
            .with("b", Value::Bool(false))
            .with("i32", Value::Int64(5))
            .with("neg", Value::Int64(-7))
            .with("i", Value::Int64(-9_007_199_254_740_993))
            .with("d", Value::Double(1.0))
            .with("d2", Value::Double(0.0025))
            .with("dz", Value::Double(3.0))
            .with("t", Value::DateTime(at("2024-01-02T03:04:05.123456Z")))
            .with("x", Value::Binary(vec![0, 1, 2]));
        assert_eq!(entity.properties, expected.properties);
    }

    #[test]
    fn round_trips_through_our_own_writer() {
        let entity = Entity::new("p", "r")
            .with("d", Value::Double(-0.0))
            .with("big", Value::Double(1e300))
            .with("tiny", Value::Double(5e-324))
            .with("n", Value::Int64(i64::MIN))
            .with("t", Value::DateTime(at("9999-12-31T23:59:59.999999Z")));
        let read = parse_entity(entity_body(&entity).as_bytes()).unwrap();
        assert_eq!(read.properties, entity.properties);
    }

    #[test]
    fn refuses_what_it_cannot_represent() {
        for body in [
            &br#"{"PartitionKey":"p","RowKey":"r","g@odata.type":"Edm.Decimal","g":"1"}"#[..],
            br#"{"PartitionKey":"p","RowKey":"r","i@odata.type":"Edm.Int64","i":"x"}"#,
            br#"{"PartitionKey":"p","RowKey":"r","a":[1]}"#,
            br#"{"RowKey":"r"}"#,
            b"not json",
        ] {
            let err = parse_entity(body).unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Internal, "{err}");
        }
    }

    #[test]
    fn query_pages() {
        let body =
            br#"{"odata.metadata":"m","value":[{"PartitionKey":"p","RowKey":"a"},{"PartitionKey":"p","RowKey":"b"}]}"#;
        let rows: Vec<String> = parse_entities(body).unwrap().into_iter().map(|e| e.row_key).collect();
        assert_eq!(rows, ["a", "b"]);
        assert!(parse_entities(br#"{"value":[]}"#).unwrap().is_empty());
        assert!(parse_entities(br#"{}"#).is_err());
    }
}
