//! The domain's one error type, which the service answers with. Each variant is a
//! client-visible outcome with a stable code; the HTTP layer maps variants to
//! statuses. Storage failures that are not the client's doing become `Unavailable` or
//! `Internal` (`tabletalk::store::Error`), whose details are logged and never shown.

use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response, and of each failed part of a partial success (forwards).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND, CONFLICT, PAYLOAD_TOO_LARGE, VALIDATION,
    /// TOO_MANY_REQUESTS, UNAVAILABLE or INTERNAL.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 400: the request is malformed (syntax, a garbled cursor, a parameter out of range).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no valid credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: authenticated, but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// 404: missing — or not visible to the caller, which answers the same.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with the current state; trying again may work.
    #[error("{0}")]
    Conflict(String),
    /// 413: the request body is too large.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 422: well-formed, but a value breaks a rule (length, emptiness).
    #[error("{0}")]
    Validation(String),
    /// 429: slow down; retry after the given seconds.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_secs: u64 },
    /// 502: a handler the room registered (its own slash command) failed, answered late or
    /// unreadably; the text says which, and is the caller's to read.
    #[error("{0}")]
    BadGateway(String),
    /// 503: the store is unreachable or overloaded; safe to retry.
    #[error("{0}")]
    Unavailable(String),
    /// 503 as well: the store did not confirm a change, which may have been stored. Its own
    /// variant, so that what depends on it (a claim kept for a retry) never reads a message.
    #[error("{UNCONFIRMED}")]
    Unconfirmed,
    /// 500: a bug or an unexpected answer from a dependency. The text is for logs only.
    #[error("{0}")]
    Internal(String),
}

/// What the service answers for a change the store did not confirm.
const UNCONFIRMED: &str =
    "storage did not confirm the change; it may have been stored (a send retried with the same clientId is safe)";

impl Error {
    /// The stable code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadRequest(_) => "BAD_REQUEST",
            Error::Unauthorized(_) => "UNAUTHORIZED",
            Error::Forbidden(_) => "FORBIDDEN",
            Error::NotFound(_) => "NOT_FOUND",
            Error::Conflict(_) => "CONFLICT",
            Error::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            Error::Validation(_) => "VALIDATION",
            Error::TooManyRequests { .. } => "TOO_MANY_REQUESTS",
            Error::BadGateway(_) => "BAD_GATEWAY",
            Error::Unavailable(_) | Error::Unconfirmed => "UNAVAILABLE",
            Error::Internal(_) => "INTERNAL",
        }
    }

    /// A change the store did not confirm: it may have been stored. Its message is fixed and
    /// safe to show (a send retried with the same client id is the one message either way).
    pub fn unconfirmed() -> Error {
        Error::Unconfirmed
    }

    /// Whether this answers a change the store did not confirm ([`Error::unconfirmed`]).
    pub fn is_unconfirmed(&self) -> bool {
        matches!(self, Error::Unconfirmed)
    }

    pub fn bad_request(message: impl Into<String>) -> Error {
        Error::BadRequest(message.into())
    }

    pub fn validation(message: impl Into<String>) -> Error {
        Error::Validation(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Error {
        Error::NotFound(message.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
