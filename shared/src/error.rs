//! The service layer's one error type. Each variant is a client-visible outcome with a stable
//! code (BRIEF §7); the HTTP layer only maps variants to statuses. Storage failures that are
//! not the client's doing become `Unavailable` or `Internal`, whose details are logged and
//! never shown.

use serde::Serialize;
use utoipa::ToSchema;

use crate::storage::{ErrorKind, StoreError};

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
    /// 503: the store is unreachable or overloaded; safe to retry.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a bug or an unexpected answer from a dependency. The text is for logs only.
    #[error("{0}")]
    Internal(String),
}

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
            Error::Unavailable(_) => "UNAVAILABLE",
            Error::Internal(_) => "INTERNAL",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest(_) => 400,
            Error::Unauthorized(_) => 401,
            Error::Forbidden(_) => 403,
            Error::NotFound(_) => 404,
            Error::Conflict(_) => 409,
            Error::PayloadTooLarge(_) => 413,
            Error::Validation(_) => 422,
            Error::TooManyRequests { .. } => 429,
            Error::Unavailable(_) => 503,
            Error::Internal(_) => 500,
        }
    }

    /// What the client is shown: internal details are logged here and replaced.
    pub fn body(&self) -> ErrorBody {
        let message = match self {
            Error::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                "internal error".to_owned()
            }
            Error::Unavailable(detail) => {
                tracing::warn!(%detail, "dependency unavailable");
                detail.clone()
            }
            other => other.to_string(),
        };
        ErrorBody {
            code: self.code().to_owned(),
            message,
        }
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

/// A storage failure reaching the service is ours, not the client's: input was validated
/// before it got there.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        match e.kind {
            ErrorKind::Unavailable => Error::Unavailable("storage is unavailable; try again".into()),
            ErrorKind::Indeterminate => Error::Unavailable(
                "storage did not confirm the change; it may have been stored (a send retried with the same clientId is safe)"
                    .into(),
            ),
            _ => Error::Internal(e.to_string()),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A conditional update's failure as the service reports it; `missing` names what was gone.
pub(crate) fn settle(e: crate::storage::conditional::ConditionalError<Error>, missing: &str) -> Error {
    use crate::storage::conditional::ConditionalError;
    match e {
        ConditionalError::NotFound => Error::not_found(missing),
        ConditionalError::Conflict => Error::Conflict("the change raced with others; try again".into()),
        ConditionalError::Store(e) => e.into(),
        ConditionalError::Rejected(e) => e,
    }
}
