//! The API's error response: `{ "code", "message" }` with the status BRIEF §7 assigns to each
//! code, and `Retry-After` on 429. Internal errors are logged with their detail and shown to
//! the client only as "internal error".

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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = self.0;
        let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(error.body())).into_response();
        if let Error::TooManyRequests { retry_after_secs, .. } = error {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
