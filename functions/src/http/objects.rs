//! The embedded object store's own door, `/objects/{key}`: served only by the self-hosted
//! server when attachments are files under the data directory. A `PUT` with a signed upload
//! link stores the body; a `GET` with a signed download link answers the file as an
//! attachment. Each link's signature is checked against this one object and this one method
//! and must not have expired (403 otherwise, as the blob service answers) — from the URL alone,
//! before any of an upload's body is read. An upload link can
//! only create: a second upload to its key is refused (409), as a blob SAS with only the
//! create permission is, before its body is read.
//!
//! Bodies stream both ways, a chunk at a time; at most
//! [`tabletalk::adapters::objects::embedded::MAX_REQUESTS_AT_ONCE`] uploads are received at once
//! (429 past it), and one that stalls gives up its place, so what a replayed link costs the
//! server is bounded in memory and in workers.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tabletalk::Error;
use tabletalk::adapters::objects::ObjectKey;
use tabletalk::adapters::objects::embedded::{SignedQuery, Uploaded};
use tabletalk::service::attachments::Files;

use super::error::ApiError;

fn refuse(error: Error) -> Response {
    ApiError(error).into_response()
}

/// Stores an upload. Anyone may send one, so nothing of the body is read before the URL's
/// signature (this object, this method, not expired) is checked and the object is found not to
/// exist, and then no more of it than the largest attachment allowed: a longer
/// `Content-Length` is refused unread, and a body that runs over (sent without one) is cut off
/// at the limit.
pub async fn put(
    State(files): State<Arc<Files>>,
    Path(key): Path<String>,
    Query(query): Query<SignedQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(store) = files.embedded_objects() else {
        return refuse(Error::not_found("no such route"));
    };
    let Ok(key) = ObjectKey::parse(&key) else {
        return refuse(Error::not_found("no such object"));
    };
    if let Err(e) = store.verify("PUT", &key, &query, files.now()) {
        return refuse(e);
    }
    let _permit = match store.admit_request() {
        Ok(permit) => permit,
        Err(e) => return refuse(e),
    };
    let max = files.attachment_max_bytes().unwrap_or(0);
    let too_large = || {
        refuse(Error::PayloadTooLarge(
            "the file is larger than the largest attachment allowed".into(),
        ))
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max) {
        return too_large();
    }
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream");
    match store.create(&key, mime, body.into_data_stream(), max).await {
        Ok(Uploaded::Created) => StatusCode::CREATED.into_response(),
        Ok(Uploaded::Exists) => refuse(Error::Conflict("the object exists already".into())),
        Ok(Uploaded::TooLarge) => too_large(),
        Err(e) => refuse(e),
    }
}

/// Answers a download.
pub async fn get(
    State(files): State<Arc<Files>>,
    Path(key): Path<String>,
    Query(query): Query<SignedQuery>,
) -> Response {
    let Some(store) = files.embedded_objects() else {
        return refuse(Error::not_found("no such route"));
    };
    let Ok(key) = ObjectKey::parse(&key) else {
        return refuse(Error::not_found("no such object"));
    };
    if let Err(e) = store.verify("GET", &key, &query, files.now()) {
        return refuse(e);
    }
    match store.read_stream(&key).await {
        Ok(Some(chunks)) => {
            let mime = query.rsct.unwrap_or_else(|| "application/octet-stream".into());
            let name = query.rscd.unwrap_or_else(|| "file".into());
            (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, mime),
                    (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
                    (
                        header::HeaderName::from_static("x-content-type-options"),
                        "nosniff".into(),
                    ),
                ],
                Body::from_stream(chunks),
            )
                .into_response()
        }
        Ok(None) => refuse(Error::not_found("no such object")),
        Err(e) => refuse(e),
    }
}
