//! The API's error response: `{ "code", "message" }` with the one status this file gives each
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

/// The HTTP status of each service outcome.
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
        // A handler the room registered failed; the message says how.
        Error::BadGateway(_) => StatusCode::BAD_GATEWAY,
        // The store is unreachable or overloaded; safe to retry.
        Error::Unavailable(_) | Error::Unconfirmed => StatusCode::SERVICE_UNAVAILABLE,
        // A bug or an unexpected answer from a dependency.
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Whether the outcome is the caller's doing (a 4xx): the platform's callers (Event Grid, the
/// Functions host) drop such an event rather than retry it, since a retry would not help.
pub fn is_client_error(error: &Error) -> bool {
    status(error).is_client_error()
}

tokio::task_local! {
    /// The `x-request-id` of the request being answered, so that an answer which hides its
    /// detail names the log line that holds it (`in_request`).
    static REQUEST_ID: String;
}

/// Runs `answer` (a request's handling) with `id` as its request id for [`body`]. An id the
/// client chose is named only if it looks like one (at most 64 letters, digits, `-`, `_`, `.`):
/// a message is no place for whatever a header held.
pub async fn in_request<F: std::future::Future>(id: String, answer: F) -> F::Output {
    let plain = id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    REQUEST_ID.scope(if plain { id } else { "-".to_owned() }, answer).await
}

/// What the client is shown of an outcome: its stable code and its message, except that the
/// detail of an internal error or of an unavailable dependency (a table's method and path, a
/// key service's URL and its error) is logged, never shown: the client reads a generic message
/// with the request id that finds the log line.
///
/// One unavailable outcome is told as it is: a change the store did not confirm, whose message
/// (fixed, with no detail in it) tells the client that a send retried with the same client id
/// is safe.
pub fn body(error: &Error) -> ErrorBody {
    let request = REQUEST_ID.try_with(String::clone).unwrap_or_else(|_| "-".to_owned());
    let message = match error {
        Error::Internal(detail) => {
            tracing::error!(%detail, "internal error");
            format!("internal error (request {request})")
        }
        Error::Unconfirmed => format!("{error} (request {request})"),
        Error::Unavailable(detail) => {
            tracing::warn!(%detail, "dependency unavailable");
            format!("temporarily unavailable; try again (request {request})")
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
    /// `Retry-After`, and the detail of an internal error or an unavailable dependency never
    /// reaches the client, which reads the request id instead.
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
            (
                Error::BadGateway("/deploy failed: late".into()),
                502,
                "BAD_GATEWAY",
                "/deploy failed: late",
            ),
            (
                Error::Unavailable("GET https://login.example/jwks: connection refused".into()),
                503,
                "UNAVAILABLE",
                "temporarily unavailable; try again (request r-1)",
            ),
            (
                Error::Internal("secret detail".into()),
                500,
                "INTERNAL",
                "internal error (request r-1)",
            ),
        ];
        for (error, expected_status, code, message) in cases {
            let client_error = is_client_error(&error);
            let (status, retry_after, body) = in_request("r-1".into(), answer(error)).await;
            assert_eq!(status, expected_status, "{code}");
            assert_eq!(client_error, status < 500, "{code}");
            assert_eq!(body, serde_json::json!({ "code": code, "message": message }), "{code}");
            let expected_retry = (status == 429).then(|| "7".to_owned());
            assert_eq!(retry_after, expected_retry, "{code}");
        }
    }

    /// The one unavailable outcome told as it is: a change the store did not confirm, whose
    /// fixed message tells the client a retry with the same client id is safe. A request id
    /// the client chose is named only if it looks like one.
    #[tokio::test]
    async fn an_unconfirmed_change_is_told_and_odd_request_ids_are_not_echoed() {
        let (status, _, body) = in_request("r-2".into(), answer(Error::unconfirmed())).await;
        assert_eq!(status, 503);
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("clientId is safe") && message.ends_with("(request r-2)"),
            "{message}"
        );
        let odd = "<script>".to_owned() + &"x".repeat(80);
        let (_, _, body) = in_request(odd, answer(Error::Internal("detail".into()))).await;
        assert_eq!(body["message"], "internal error (request -)");
    }
}
