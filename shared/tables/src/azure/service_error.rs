//! The table service's error answers, mapped onto [`ErrorKind`].
//!
//! One status table for every request and for each part of a batch, so a 412 means
//! `PreconditionFailed` wherever it comes from. The service's own error code and message (the
//! `odata.error` JSON body; XML for some authentication failures) go into
//! [`StoreError::message`], because they are what an operator needs to see.

use reqwest::StatusCode;
use serde_json::Value as Json;

use crate::{ErrorKind, StoreError};

/// The kind for a non-success status.
pub fn kind_for_status(status: StatusCode) -> ErrorKind {
    match status.as_u16() {
        404 => ErrorKind::NotFound,
        409 => ErrorKind::AlreadyExists,
        412 => ErrorKind::PreconditionFailed,
        400 | 413 => ErrorKind::InvalidInput,
        408 | 500 | 503 => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

/// What the service said about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceError {
    /// E.g. `EntityAlreadyExists`, `UpdateConditionNotSatisfied`.
    pub code: Option<String>,
    /// The human-readable text, as sent (a batch failure starts with `N:`).
    pub message: Option<String>,
}

impl ServiceError {
    /// Reads an `odata.error` JSON body, or an XML `<Error>` one; anything else becomes the
    /// message, shortened.
    pub fn parse(body: &[u8]) -> ServiceError {
        if let Ok(json) = serde_json::from_slice::<Json>(body) {
            let error = &json["odata.error"];
            let message = &error["message"];
            return ServiceError {
                code: error["code"].as_str().map(str::to_owned),
                message: message["value"].as_str().or(message.as_str()).map(str::to_owned),
            };
        }
        let text = String::from_utf8_lossy(body);
        let (code, message) = (xml_element(&text, "Code"), xml_element(&text, "Message"));
        if code.is_some() || message.is_some() {
            return ServiceError { code, message };
        }
        let text = text.trim();
        ServiceError {
            code: None,
            message: (!text.is_empty()).then(|| text.chars().take(300).collect()),
        }
    }

    /// `code: message` on one line, or `fallback` when the service said nothing.
    pub fn describe(&self, fallback: &str) -> String {
        let message = self
            .message
            .as_deref()
            .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "));
        match (&self.code, message) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => code.clone(),
            (None, Some(message)) => message,
            (None, None) => fallback.to_owned(),
        }
    }

    /// The failing operation's 0-based index from a batch failure's `N:` message prefix.
    pub fn batch_index(&self) -> Option<usize> {
        let (index, _) = self.message.as_deref()?.split_once(':')?;
        index.trim().parse().ok()
    }
}

/// The error for a failed response: kind from the status (a few codes refine it), message from
/// the body. `context` says what we were doing, e.g. `insert into rooms`.
pub fn error_for(status: StatusCode, body: &[u8], context: &str) -> StoreError {
    let service = ServiceError::parse(body);
    let kind = match service.code.as_deref() {
        // A table is unusable for a while after it is deleted; retrying later is the fix.
        Some("TableBeingDeleted") => ErrorKind::Unavailable,
        _ => kind_for_status(status),
    };
    let reason = status.canonical_reason().unwrap_or("");
    StoreError::new(
        kind,
        format!(
            "{context}: HTTP {} {reason}: {}",
            status.as_u16(),
            service.describe("no details")
        ),
    )
}

/// The text of the first `<name>..</name>` element, for XML error bodies.
fn xml_element(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{name}>"))? + start;
    Some(text[start..end].trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        for (status, kind) in [
            (404, ErrorKind::NotFound),
            (409, ErrorKind::AlreadyExists),
            (412, ErrorKind::PreconditionFailed),
            (400, ErrorKind::InvalidInput),
            (413, ErrorKind::InvalidInput),
            (408, ErrorKind::Unavailable),
            (500, ErrorKind::Unavailable),
            (503, ErrorKind::Unavailable),
            (401, ErrorKind::Internal),
            (403, ErrorKind::Internal),
            (405, ErrorKind::Internal),
        ] {
            assert_eq!(kind_for_status(StatusCode::from_u16(status).unwrap()), kind, "{status}");
        }
    }

    #[test]
    fn json_errors_keep_code_and_message() {
        let body = br#"{"odata.error":{"code":"UpdateConditionNotSatisfied","message":{"lang":"en-US","value":"1:The update condition specified in the request was not satisfied.\nRequestId:x"}}}"#;
        let service = ServiceError::parse(body);
        assert_eq!(service.code.as_deref(), Some("UpdateConditionNotSatisfied"));
        assert_eq!(service.batch_index(), Some(1));
        let err = error_for(StatusCode::PRECONDITION_FAILED, body, "update rooms");
        assert_eq!(err.kind, ErrorKind::PreconditionFailed);
        assert_eq!(
            err.message,
            "update rooms: HTTP 412 Precondition Failed: UpdateConditionNotSatisfied: 1:The update condition specified in the request was not satisfied. RequestId:x"
        );
    }

    #[test]
    fn xml_and_empty_bodies() {
        let xml = b"<?xml version=\"1.0\"?><Error><Code>AuthorizationFailure</Code><Message>Server failed to authenticate the request.</Message></Error>";
        let err = error_for(StatusCode::FORBIDDEN, xml, "get rooms");
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(
            err.message.contains("AuthorizationFailure: Server failed"),
            "{}",
            err.message
        );
        let err = error_for(StatusCode::SERVICE_UNAVAILABLE, b"", "get rooms");
        assert_eq!(err.kind, ErrorKind::Unavailable);
        assert!(err.message.ends_with("no details"), "{}", err.message);
    }

    #[test]
    fn table_being_deleted_is_retryable() {
        let body = br#"{"odata.error":{"code":"TableBeingDeleted","message":{"value":"The specified table is being deleted."}}}"#;
        assert_eq!(
            error_for(StatusCode::CONFLICT, body, "create table").kind,
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn batch_index_needs_a_number() {
        let service = ServiceError {
            code: None,
            message: Some("The specified resource does not exist: x".into()),
        };
        assert_eq!(service.batch_index(), None);
    }
}
