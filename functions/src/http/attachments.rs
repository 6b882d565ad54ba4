//! Attachment functions: hand out an upload link, and the stable download URL that checks
//! membership and redirects to a short-lived signed link of the object store.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tabletalk::attachments::{NewUpload, UploadAnswer};
use tabletalk::ids::RoomId;
use tabletalk::service::attachments::Files;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// 201 with how to upload the file (a `PUT` to `upload.url` with `upload.headers`, within five
/// minutes) and the attachment id a message names in `attachments`.
#[utoipa::path(post, path = "/api/rooms/{roomId}/uploads", tag = "attachments", operation_id = "createUpload",
    params(("roomId" = String, Path)), request_body = NewUpload,
    responses((status = 201, body = UploadAnswer),
        (status = 413, description = "larger than the configured maximum", body = ErrorBody),
        (status = 422, description = "a type not on the allow-list, an empty name or size", body = ErrorBody),
        (status = "4XX", body = ErrorBody)))]
pub async fn create_upload(
    State(files): State<Arc<Files>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewUpload>,
) -> ApiResult<(StatusCode, Json<UploadAnswer>)> {
    let answer = files.create_upload(&who, &room, input).await?;
    Ok((StatusCode::CREATED, Json(answer)))
}

/// 302 to a link of the object store valid for 60 seconds, which answers with the file as
/// `Content-Disposition: attachment` and its declared type. A non-member, or an attachment
/// that does not exist (or was deleted with its message), is 404.
#[utoipa::path(get, path = "/api/rooms/{roomId}/attachments/{attachmentId}", tag = "attachments",
    operation_id = "downloadAttachment",
    params(("roomId" = String, Path), ("attachmentId" = String, Path)),
    responses((status = 302, description = "redirect to the signed download link (`Location`)"),
        (status = "4XX", body = ErrorBody)))]
pub async fn download(
    State(files): State<Arc<Files>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<Response> {
    Ok(redirect(files.attachment_link(&who, &room, &id).await?))
}

/// 302 to a link of the object store valid for 60 seconds to the thumbnail of an image a
/// message carries (PNG or JPEG, at most 320 pixels a side), made shortly after the send; the
/// attachment's `image` says it is there. A non-member, an attachment that gets no thumbnail
/// or whose thumbnail is not made yet, is 404.
#[utoipa::path(get, path = "/api/rooms/{roomId}/attachments/{attachmentId}/thumbnail", tag = "attachments",
    operation_id = "downloadThumbnail",
    params(("roomId" = String, Path), ("attachmentId" = String, Path)),
    responses((status = 302, description = "redirect to the signed download link (`Location`)"),
        (status = "4XX", body = ErrorBody)))]
pub async fn thumbnail(
    State(files): State<Arc<Files>>,
    Caller(who): Caller,
    PathParams((room, id)): PathParams<(RoomId, String)>,
) -> ApiResult<Response> {
    Ok(redirect(files.thumbnail_link(&who, &room, &id).await?))
}

/// A 302 to a short-lived signed link, never cached (the link expires).
fn redirect(url: String) -> Response {
    (
        StatusCode::FOUND,
        [(header::LOCATION, url), (header::CACHE_CONTROL, "no-store".to_owned())],
    )
        .into_response()
}
