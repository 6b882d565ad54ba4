//! Slash commands: a command line runs as the caller, through its own route's checks; a
//! room's managers register commands of the room's own (Slack-compatible handlers).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use tabletalk::commands::{CommandInfo, CommandLine, CommandOutcome};
use tabletalk::ids::RoomId;
use tabletalk::service::commands::Commands;
use tabletalk::slash::{LaterAnswered, NewSlashCommand, SlackAnswer, SlashCommand, SlashCommandCreated};

use super::error::{ApiResult, ErrorBody};
use super::extract::{Caller, JsonBody, PathParams};

/// Runs `/me`, `/shrug`, `/topic`, `/invite`, `/kick`, `/ban`, `/timeout`, `/mute`, `/unmute` or
/// `/remind` in the room, each refused as its own route refuses (403 without its permission).
/// With a `clientId` it runs at most once: a repeat answers `repeated: true` and runs nothing.
/// Any other name runs the room's own command of that name (`createSlashCommand`).
#[utoipa::path(post, path = "/api/rooms/{roomId}/commands", tag = "messages", operation_id = "runCommand",
    params(("roomId" = String, Path)), request_body = CommandLine,
    responses((status = 200, body = CommandOutcome), (status = "4XX", body = ErrorBody),
        (status = 502, description = "the room's own command's handler failed, answered after 3 s or unreadably", body = ErrorBody)))]
pub async fn run(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(line): JsonBody<CommandLine>,
) -> ApiResult<Json<CommandOutcome>> {
    Ok(Json(commands.run(&who, &room, line).await?))
}

/// The commands a member may run in the room, by name: the built-in ones with their usage, and
/// the room's own with their descriptions (`own: true`; their handlers stay the managers' to
/// see). What the composer suggests after a `/`.
#[utoipa::path(get, path = "/api/rooms/{roomId}/commands", tag = "messages", operation_id = "listCommands",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [CommandInfo]), (status = "4XX", body = ErrorBody)))]
pub async fn list_all(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<CommandInfo>>> {
    Ok(Json(commands.list(&who, &room).await?))
}

/// Registers `/name` for the room (ManageWebhooks): running it POSTs Slack's slash-command form
/// to `url`, signed with the `signingSecret` of this answer (shown this once) as Slack signs.
#[utoipa::path(post, path = "/api/rooms/{roomId}/slash-commands", tag = "webhooks", operation_id = "createSlashCommand",
    params(("roomId" = String, Path)), request_body = NewSlashCommand,
    responses((status = 201, body = SlashCommandCreated), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
    JsonBody(input): JsonBody<NewSlashCommand>,
) -> ApiResult<(StatusCode, Json<SlashCommandCreated>)> {
    Ok((
        StatusCode::CREATED,
        Json(commands.create_own(&who, &room, input).await?),
    ))
}

/// The room's own commands (ManageWebhooks), without their secrets.
#[utoipa::path(get, path = "/api/rooms/{roomId}/slash-commands", tag = "webhooks", operation_id = "listSlashCommands",
    params(("roomId" = String, Path)),
    responses((status = 200, body = [SlashCommand]), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams(room): PathParams<RoomId>,
) -> ApiResult<Json<Vec<SlashCommand>>> {
    Ok(Json(commands.list_own(&who, &room).await?))
}

/// Deletes one of the room's own commands (ManageWebhooks).
#[utoipa::path(delete, path = "/api/rooms/{roomId}/slash-commands/{name}", tag = "webhooks", operation_id = "deleteSlashCommand",
    params(("roomId" = String, Path), ("name" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(commands): State<Arc<Commands>>,
    Caller(who): Caller,
    PathParams((room, name)): PathParams<(RoomId, String)>,
) -> ApiResult<StatusCode> {
    commands.delete_own(&who, &room, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A room's own command's handler answers later, at the run's `response_url` (no bearer
/// token: the URL is the secret). Slack's body: `response_type: in_channel` posts in the room
/// as the command's bot, anything else goes to the member who ran it alone. A run's URL takes
/// 5 answers within 30 minutes; after that, or for an unknown URL, 404 (used up: 409).
#[utoipa::path(post, path = "/api/slash-responses/{roomId}/{token}", tag = "webhooks", operation_id = "answerSlashCommand", security(()),
    params(("roomId" = String, Path), ("token" = String, Path)), request_body = SlackAnswer,
    responses((status = 200, body = LaterAnswered), (status = "4XX", body = ErrorBody)))]
pub async fn answer_later(
    State(commands): State<Arc<Commands>>,
    PathParams((room, token)): PathParams<(RoomId, String)>,
    JsonBody(answer): JsonBody<SlackAnswer>,
) -> ApiResult<Json<LaterAnswered>> {
    Ok(Json(commands.answer_later(&room, &token, answer).await?))
}
