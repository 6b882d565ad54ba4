//! The slash-command function: a command line runs as the caller, through its own route's checks.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use tabletalk::commands::{CommandLine, CommandOutcome};
use tabletalk::ids::RoomId;
use tabletalk::service::commands::Commands;

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// Runs `/me`, `/shrug`, `/topic`, `/invite`, `/kick`, `/ban`, `/timeout`, `/mute`, `/unmute` or
/// `/remind` in the room, each refused as its own route refuses (403 without its permission).
/// With a `clientId` it runs at most once: a repeat answers `repeated: true` and runs nothing.
#[utoipa::path(post, path = "/api/rooms/{roomId}/commands", tag = "messages", operation_id = "runCommand",
    params(("roomId" = String, Path)), request_body = CommandLine,
    responses((status = 200, body = CommandOutcome), (status = "4XX", body = ErrorBody)))]
pub async fn run(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(line): JsonBody<CommandLine>,
) -> ApiResult<Json<CommandOutcome>> {
    Ok(Json(commands.run(&who, &room, line).await?))
}
