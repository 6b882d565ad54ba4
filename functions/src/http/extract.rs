//! Extractors that turn every way a request can be malformed into the JSON error model:
//! `Caller` (authentication, so a handler that needs a user says so in its signature), and
//! `JsonBody` / `QueryParams` / `PathParams`, whose rejections become 400/413/422 instead of
//! axum's plain text.

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use tabletalk::Error;
use tabletalk::auth::Principal;
use tabletalk::ids::{RoomId, UserId};
use tabletalk::keys::MessageKey;
use tabletalk::members::target_user;

use super::AppState;
use super::error::ApiError;

/// The authenticated caller.
pub struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        Ok(Caller(state.auth.authenticate(header).await?))
    }
}

/// A JSON request body, labelled `application/json` (or `…+json`).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<JsonBody<T>, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError(Error::bad_request("the body must be application/json")));
        }
        let bytes = body_bytes(req, state).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// How long a JSON body may take to arrive, once its headers have: a client trickling a body a
/// byte at a time would otherwise hold its connection and a worker's buffer for as long as it
/// likes.
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The whole body, within the router's size limit (413 past it) and [`BODY_READ_TIMEOUT`].
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<axum::body::Bytes, ApiError> {
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::Bytes::from_request(req, state));
    let Ok(read) = read.await else {
        return Err(ApiError(Error::bad_request(format!(
            "the body did not arrive within {} seconds",
            BODY_READ_TIMEOUT.as_secs()
        ))));
    };
    match read {
        Ok(bytes) => Ok(bytes),
        Err(rejection) if rejection.status().as_u16() == 413 => Err(ApiError(Error::PayloadTooLarge(format!(
            "the body is larger than {} bytes",
            super::MAX_BODY_BYTES
        )))),
        Err(rejection) => Err(ApiError(Error::bad_request(rejection.body_text()))),
    }
}

/// A body as `T`: 400 when it is not JSON at all, 422 when it is JSON of the wrong shape.
/// serde_json reports a few wrong shapes (a number where an enum's name belongs) as syntax
/// errors, so whatever parses as some JSON value counts as a wrong shape.
///
/// Every body the API documents is an object, so anything else is a wrong shape, checked here
/// before serde: serde reads a struct from an array of its fields too (`["x"]` as `{"text":"x"}`).
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let is_json = || serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok();
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError(match is_json() {
            true => Error::Validation("the body must be a JSON object".into()),
            false => Error::bad_request("the body is not valid JSON"),
        }));
    }
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(e) if e.is_data() => match whole_numbers_as_integers(bytes) {
            Some(value) => Ok(value),
            None => Err(ApiError(Error::Validation(format!(
                "the body does not match the expected shape: {e}"
            )))),
        },
        Err(e) if is_json() => Err(ApiError(Error::Validation(format!(
            "the body does not match the expected shape: {e}"
        )))),
        Err(_) => Err(ApiError(Error::bad_request("the body is not valid JSON"))),
    }
}

/// The body as `T` once every whole number written with a fraction or an exponent (`1.0`,
/// `1e3`) is read as the integer it is, as JSON Schema counts it: the document's integers admit
/// them, so the server must too. Tried only after the plain read failed, so a body without
/// such numbers costs nothing more.
fn whole_numbers_as_integers<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    fn normalize(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Number(number) => {
                let whole = number
                    .as_f64()
                    .filter(|f| number.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0);
                if let Some(whole) = whole {
                    *number = serde_json::Number::from(whole as i64);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(normalize),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(normalize),
            _ => {}
        }
    }
    let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    normalize(&mut value);
    serde_json::from_value(value).ok()
}

/// Query-string parameters.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    /// A parameter given empty (`?cursor=`) is one not given: a client that fills a form's
    /// fields from its state sends them so, and no parameter of the API means anything empty.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<QueryParams<T>, ApiError> {
        let given: Vec<&str> = parts
            .uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|pair| pair.split_once('=').is_some_and(|(_, value)| !value.is_empty()))
            .collect();
        let uri: axum::http::Uri = format!("/?{}", given.join("&"))
            .parse()
            .map_err(|_| ApiError(Error::bad_request("the query string is not valid")))?;
        match Query::<T>::try_from_uri(&uri) {
            Ok(Query(value)) => Ok(QueryParams(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => Err(ApiError(Error::bad_request(e.body_text()))),
            Err(other) => Err(ApiError(Error::bad_request(other.body_text()))),
        }
    }
}

/// A route's path parameters as the domain types they name, in the route's order: a single
/// type or a tuple of them, each parsed by its own rule (`PathSegment`). A handler takes
/// `PathParams<RoomId>`, never a string it parses, and a malformed id answers as that type says
/// (a room id that is no UUID names no room: 404).
pub struct PathParams<T>(pub T);

impl<T: FromSegments, S: Send + Sync> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<PathParams<T>, ApiError> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError(Error::bad_request(rejection.body_text())))?;
        let values: Vec<&str> = raw.iter().map(|(_, value)| value).collect();
        Ok(PathParams(T::from_segments(&values)?))
    }
}

/// One path parameter's type, parsed from its percent-decoded text.
pub trait PathSegment: Sized {
    fn from_segment(text: &str) -> tabletalk::Result<Self>;
}

impl PathSegment for String {
    fn from_segment(text: &str) -> tabletalk::Result<String> {
        Ok(text.to_owned())
    }
}

impl PathSegment for RoomId {
    fn from_segment(text: &str) -> tabletalk::Result<RoomId> {
        RoomId::parse(text)
    }
}

/// A message in a path: an id that is no message key names no message (404).
impl PathSegment for MessageKey {
    fn from_segment(text: &str) -> tabletalk::Result<MessageKey> {
        MessageKey::of_message(text)
    }
}

/// A user in a path is the member a moderator acts on: one that cannot exist is no member.
impl PathSegment for UserId {
    fn from_segment(text: &str) -> tabletalk::Result<UserId> {
        target_user(text)
    }
}

/// All of a route's path parameters: one [`PathSegment`] or a tuple of them.
pub trait FromSegments: Sized {
    fn from_segments(values: &[&str]) -> tabletalk::Result<Self>;
}

/// The route and the extractor disagree on the number of parameters: a programming error.
fn wrong_count(expected: usize, values: &[&str]) -> Error {
    Error::Internal(format!(
        "the route has {} path parameters, the handler takes {expected}",
        values.len()
    ))
}

macro_rules! from_segments {
    ($($type:ident $value:ident),+) => {
        impl<$($type: PathSegment),+> FromSegments for ($($type,)+) {
            fn from_segments(values: &[&str]) -> tabletalk::Result<Self> {
                const COUNT: usize = [$(stringify!($type)),+].len();
                let [$($value),+] = values else {
                    return Err(wrong_count(COUNT, values));
                };
                Ok(($($type::from_segment($value)?,)+))
            }
        }
    };
}
from_segments!(A a, B b);
from_segments!(A a, B b, C c);

macro_rules! one_segment {
    ($($type:ty),+) => {$(
        impl FromSegments for $type {
            fn from_segments(values: &[&str]) -> tabletalk::Result<$type> {
                match values {
                    [one] => PathSegment::from_segment(one),
                    _ => Err(wrong_count(1, values)),
                }
            }
        }
    )+};
}
one_segment!(String, RoomId, UserId, MessageKey);

/// A JSON request body a route has not always taken: no body (or only whitespace) is
/// `T::default()`, so a request from before the body existed still works; any other body is
/// read as JSON, whatever its content type, and refused as [`JsonBody`] refuses it.
pub struct OptionalJsonBody<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<OptionalJsonBody<T>, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(T::default()));
        }
        parse_json(&bytes).map(OptionalJsonBody)
    }
}
