//! Search: messages of the caller's rooms that answer a query.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use tabletalk::search::page::{SearchPage, SearchParams};
use tabletalk::service::search::Searching;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, QueryParams};

/// Messages of the rooms the caller is a member of now that answer `q`, newest first. A page
/// may hold fewer than `limit` results, even none, and still have more (`hasMore`): follow
/// `nextCursor`.
#[utoipa::path(get, path = "/api/search", tag = "messages", operation_id = "searchMessages",
    params(SearchParams),
    responses((status = 200, body = SearchPage), (status = "4XX", body = ErrorBody)))]
pub async fn search(
    State(searching): State<Arc<Searching>>,
    Caller(who): Caller,
    QueryParams(params): QueryParams<SearchParams>,
) -> ApiResult<Json<SearchPage>> {
    Ok(Json(searching.search(&who, params).await?))
}
