//! Emoji suggestions for the composer's `:`.

use axum::Json;
use tabletalk::emoji::{EmojiQuery, EmojiSuggestion, suggestions};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, QueryParams};

/// The standard emoji whose shortcodes begin with `q` (GitHub's set, as `:shortcode:` renders
/// in Markdown), shortest shortcode first.
#[utoipa::path(get, path = "/api/emoji", tag = "messages", operation_id = "suggestEmoji",
    params(EmojiQuery),
    responses((status = 200, body = [EmojiSuggestion]), (status = "4XX", body = ErrorBody)))]
pub async fn suggest(
    Caller(_): Caller,
    QueryParams(query): QueryParams<EmojiQuery>,
) -> ApiResult<Json<Vec<EmojiSuggestion>>> {
    Ok(Json(suggestions(&query)?))
}
