//! The API's error response: `{ "code", "message" }` with the status BRIEF §7 assigns to each
//! code, and `Retry-After` on 429. The service reports outcomes (`tabletalk::Error` and its
//! stable code); which HTTP status each one is, and what the client may read of it, is decided
//! here, next to the handlers, and only here. Internal errors are logged with their detail and
//! shown to the client only as "internal error".

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tabletalk::Error;
pub use tabletalk::error::ErrorBody;

/// A service error on its way to the client.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError(e)
    }
}

/// The HTTP status of each service outcome (BRIEF §7).
pub fn status(error: &Error) -> StatusCode {
    match error {
        // Malformed: syntax, a garbled cursor, a parameter out of range.
        Error::BadRequest(_) => StatusCode::BAD_REQUEST,
        // No valid credentials.
        Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        // Authenticated, but not allowed.
        Error::Forbidden(_) => StatusCode::FORBIDDEN,
        // Missing, or not visible to the caller: both answer the same, so a room's existence
        // does not leak to those outside it.
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        // Conflicts with the current state; trying again may work.
        Error::Conflict(_) => StatusCode::CONFLICT,
        // The body is over the limit.
        Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        // Well-formed, but a value breaks a rule (length, emptiness).
        Error::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
        // Slow down: the response carries `Retry-After` (`into_response`).
        Error::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
        // The store is unreachable or overloaded; safe to retry.
        Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        // A bug or an unexpected answer from a dependency.
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Whether the outcome is the caller's doing (a 4xx): the platform's callers (Event Grid, the
/// Functions host) drop such an event rather than retry it, since a retry would not help.
pub fn is_client_error(error: &Error) -> bool {
    status(error).is_client_error()
}

/// What the client is shown of an outcome: its stable code and its message, except that an
/// internal error's detail is logged (as an error) and replaced by "internal error", and an
/// unavailable dependency's message, written for the client, is shown and logged as a warning.
pub fn body(error: &Error) -> ErrorBody {
    let message = match error {
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
        code: error.code().to_owned(),
        message,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = self.0;
        let mut response = (status(&error), Json(body(&error))).into_response();
        if let Error::TooManyRequests { retry_after_secs, .. } = error {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(error: Error) -> (u16, Option<String>, serde_json::Value) {
        let response = ApiError(error).into_response();
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, retry_after, serde_json::from_slice(&bytes).unwrap())
    }

    /// Each outcome answers its status and stable code with its message; only a 429 carries
    /// `Retry-After`, and an internal error's detail never reaches the client.
    #[tokio::test]
    async fn each_error_answers_its_status_code_and_message() {
        let cases = [
            (Error::BadRequest("b".into()), 400, "BAD_REQUEST", "b"),
            (Error::Unauthorized("u".into()), 401, "UNAUTHORIZED", "u"),
            (Error::Forbidden("f".into()), 403, "FORBIDDEN", "f"),
            (Error::NotFound("n".into()), 404, "NOT_FOUND", "n"),
            (Error::Conflict("c".into()), 409, "CONFLICT", "c"),
            (Error::PayloadTooLarge("p".into()), 413, "PAYLOAD_TOO_LARGE", "p"),
            (Error::Validation("v".into()), 422, "VALIDATION", "v"),
            (
                Error::TooManyRequests {
                    message: "t".into(),
                    retry_after_secs: 7,
                },
                429,
                "TOO_MANY_REQUESTS",
                "t",
            ),
            (Error::Unavailable("try again".into()), 503, "UNAVAILABLE", "try again"),
            (
                Error::Internal("secret detail".into()),
                500,
                "INTERNAL",
                "internal error",
            ),
        ];
        for (error, expected_status, code, message) in cases {
            let client_error = is_client_error(&error);
            let (status, retry_after, body) = answer(error).await;
            assert_eq!(status, expected_status, "{code}");
            assert_eq!(client_error, status < 500, "{code}");
            assert_eq!(body, serde_json::json!({ "code": code, "message": message }), "{code}");
            let expected_retry = (status == 429).then(|| "7".to_owned());
            assert_eq!(retry_after, expected_retry, "{code}");
        }
    }
}
