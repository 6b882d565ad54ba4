//! The store layer's one error type: a storage failure (the tables' `StoreError`) or a row that
//! does not make its model (a domain error). The service sees it as a domain error: a storage
//! failure is never the client's doing, so it becomes `Unavailable` (safe to retry) or
//! `Internal` (logged, never shown).

use tabletalk_domain::error::Error as DomainError;
use tabletalk_tables::conditional::ConditionalError;
use tabletalk_tables::{ErrorKind, StoreError};

#[derive(Debug)]
pub enum Error {
    Store(StoreError),
    Domain(DomainError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(e) => e.fmt(f),
            Error::Domain(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        Error::Store(e)
    }
}

impl From<DomainError> for Error {
    fn from(e: DomainError) -> Error {
        Error::Domain(e)
    }
}

impl From<Error> for DomainError {
    fn from(e: Error) -> DomainError {
        match e {
            Error::Domain(e) => e,
            Error::Store(e) => {
                if matches!(e.kind, ErrorKind::Unavailable | ErrorKind::Indeterminate) {
                    // The client is told only to try again; what the store said is logged.
                    tracing::warn!(error = %e, "storage unavailable");
                }
                match e.kind {
                    ErrorKind::Unavailable => DomainError::Unavailable("storage is unavailable; try again".into()),
                    ErrorKind::Indeterminate => DomainError::unconfirmed(),
                    _ => DomainError::Internal(e.to_string()),
                }
            }
        }
    }
}

/// A storage failure as the service reports it.
pub fn reported(e: StoreError) -> DomainError {
    Error::Store(e).into()
}

/// A conditional update's failure as the service reports it; `missing` names what was gone.
pub fn settle(e: ConditionalError<DomainError>, missing: &str) -> DomainError {
    match e {
        ConditionalError::NotFound => DomainError::not_found(missing),
        ConditionalError::Conflict => DomainError::Conflict("the change raced with others; try again".into()),
        ConditionalError::Store(e) => reported(e),
        ConditionalError::Rejected(e) => e,
    }
}
