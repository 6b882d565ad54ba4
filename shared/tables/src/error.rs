//! The storage layer's one error type. Every backend maps its own failures onto these kinds,
//! so callers match on `kind` and never on a backend's status codes or messages.

use std::fmt;

/// What went wrong, in Azure Table terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 404: the entity (or table) does not exist.
    NotFound,
    /// 409: an insert found an entity with the same keys.
    AlreadyExists,
    /// 412: the entity's ETag did not match the write's `If-Match`.
    PreconditionFailed,
    /// 400: the request breaks a rule of the table service (keys, sizes, batch shape).
    InvalidInput,
    /// The store could not be reached or refused for load (timeouts, 503, 500). Retryable.
    Unavailable,
    /// Anything else: a bug, a malformed answer, an authentication failure.
    Internal,
    /// A write that may or may not have been applied: the store did not answer in a way that
    /// tells (a timeout after the request went out), and looking afterwards could not tell
    /// either. Never retried blindly, since a retry could apply the write twice.
    Indeterminate,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::PreconditionFailed => "precondition failed",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
            ErrorKind::Indeterminate => "outcome unknown",
        })
    }
}

/// A storage failure. For a failed entity group transaction, `batch_index` names the
/// (0-based) operation that failed and `kind` is that operation's failure; nothing of the batch
/// was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub kind: ErrorKind,
    pub message: String,
    pub batch_index: Option<usize>,
}

impl StoreError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> StoreError {
        StoreError {
            kind,
            message: message.into(),
            batch_index: None,
        }
    }

    pub fn not_found(message: impl Into<String>) -> StoreError {
        StoreError::new(ErrorKind::NotFound, message)
    }

    pub fn invalid(message: impl Into<String>) -> StoreError {
        StoreError::new(ErrorKind::InvalidInput, message)
    }

    pub fn internal(message: impl Into<String>) -> StoreError {
        StoreError::new(ErrorKind::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> StoreError {
        StoreError::new(ErrorKind::Unavailable, message)
    }

    /// Marks this error as the failure of operation `index` of a batch.
    pub fn at_batch_index(mut self, index: usize) -> StoreError {
        self.batch_index = Some(index);
        self
    }

    pub fn is(&self, kind: ErrorKind) -> bool {
        self.kind == kind
    }

    /// True when a write that failed this way may still have been applied: the store was not
    /// heard to refuse it (a timeout, a reset connection, a 500 `OperationTimedOut`, an answer
    /// that could not be read). Even a failure that names an operation of a transaction may be
    /// one of these: Azure reports a timed-out changeset on one of its parts.
    pub fn may_have_applied(&self) -> bool {
        matches!(self.kind, ErrorKind::Unavailable | ErrorKind::Internal)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.batch_index {
            Some(index) => write!(f, "{} (batch operation {index}): {}", self.kind, self.message),
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

impl std::error::Error for StoreError {}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
