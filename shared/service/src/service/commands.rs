//! Slash commands (`crate::commands`): each runs what its HTTP route runs, as the caller, so
//! the same membership, permission, rank and limit checks and the same moderation log apply.
//! A command acts when it runs and is never sent as text; it counts as a write against the
//! caller's rate. With a client id it runs at most once while a send's would (a run record in
//! the room, `MessageStore::claim_command`, written before it acts, expiring with the sends'
//! idempotency records): a repeated request runs nothing and answers `repeated`. A command
//! refused for what it is (422, 403, 404, 409) frees its id again, since nothing ran; one whose
//! outcome is unknown (the store failed half-way) keeps it.

use std::sync::Arc;

use crate::auth::Principal;
use crate::commands::{Command, CommandLine, CommandOutcome};
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId};
use crate::limits::Write;
use crate::markdown::TextFormat;
use crate::members::{Ban, MembershipChange, Timeout};
use crate::messages::Message;
use crate::messages::send::NewMessage;
use crate::moderation::Kick;
use crate::rooms::RoomChange;
use crate::rooms::invitations::NewInvitation;
use crate::scheduled::NewScheduled;

/// Runs slash commands. Holds the store (for run records) and the components whose use cases
/// the commands are.
#[derive(Clone)]
pub struct Commands {
    pub(crate) store: crate::store::Store,
    pub(crate) access: Arc<crate::service::access::RoomAccess>,
    pub(crate) limiter: Arc<crate::service::limits::Limiter>,
    pub(crate) sending: Arc<crate::service::send::Sending>,
    pub(crate) moderation: Arc<crate::service::moderation::Moderation>,
    pub(crate) members: Arc<crate::service::members::Members>,
    pub(crate) rooms: Arc<crate::service::rooms::Rooms>,
    pub(crate) scheduler: Arc<crate::service::scheduled::Scheduler>,
}

/// `¯\_(ツ)_/¯` in Markdown, its backslash and underscores escaped.
const SHRUG: &str = r"¯\\\_(ツ)\_/¯";

impl Commands {
    /// Runs the command `line` holds in `room` as `who`.
    pub async fn run(&self, who: &Principal, room: &RoomId, line: CommandLine) -> Result<CommandOutcome> {
        let command = Command::parse(&line.text)?;
        let client_id = line.client_id.as_deref().map(ClientId::parse).transpose()?;
        let access = self.access.access(room, &who.user_id).await?;
        self.limiter.check_write_limits(&access, Write::Command).await?;
        let Some(client_id) = client_id else {
            return self.act(who, room, &command).await;
        };
        let (user, now) = (&who.user_id, self.store.now());
        if !self.store.messages.claim_command(room, user, &client_id, now).await? {
            let said = "it ran already with this client id; nothing ran again";
            return Ok(CommandOutcome {
                repeated: true,
                ..outcome(&command, said.into())
            });
        }
        let acted = self.act(who, room, &command).await;
        if let Err(Error::Validation(_) | Error::Forbidden(_) | Error::NotFound(_) | Error::Conflict(_)) = &acted
            && let Err(e) = self.store.messages.release_command(room, user, &client_id).await
        {
            tracing::warn!(%room, error = %e, "a refused command's run record stays until it expires");
        }
        acted
    }

    /// Does what `command` says, as `who`.
    async fn act(&self, who: &Principal, room: &RoomId, command: &Command) -> Result<CommandOutcome> {
        let outcome = |result: String| outcome(command, result);
        Ok(match command {
            Command::Me(text) => {
                // Rendered, then each paragraph in italics: wrapping the Markdown in `*` would
                // change with what the text holds (`/me *` is a rule).
                let html = self.rendered(who, room, text).await?;
                let html = html.replace("<p>", "<p><em>").replace("</p>", "</em></p>");
                let message = self.post(who, room, html, TextFormat::Html).await?;
                CommandOutcome {
                    message: Some(message),
                    ..outcome("posted".into())
                }
            }
            Command::Shrug(text) => {
                let text = match text.is_empty() {
                    true => SHRUG.to_owned(),
                    false => format!("{text} {SHRUG}"),
                };
                let message = self.post(who, room, text, TextFormat::Markdown).await?;
                CommandOutcome {
                    message: Some(message),
                    ..outcome("posted".into())
                }
            }
            Command::Topic(text) => {
                let change = RoomChange {
                    description: Some(text.clone()),
                    ..RoomChange::default()
                };
                self.rooms.update_room(who, room, change).await?;
                outcome("the room's description is set".into())
            }
            Command::Invite(user) => {
                let invitation = NewInvitation {
                    user_id: Some(user.to_string()),
                    ..NewInvitation::default()
                };
                self.rooms.create_invitation(who, room, invitation).await?;
                outcome(format!("{user} is invited"))
            }
            Command::Kick { user, reason } => {
                let kick = Kick { reason: reason.clone() };
                self.moderation.kick(who, room, user, kick).await?;
                outcome(format!("{user} is removed from the room"))
            }
            Command::Ban { user, reason } => {
                let ban = Ban {
                    until: None,
                    reason: reason.clone(),
                };
                self.moderation.ban(who, room, user, ban).await?;
                outcome(format!("{user} is banned"))
            }
            Command::Timeout { user, lasting, reason } => {
                let until = self.store.now() + *lasting;
                let timeout = Timeout {
                    until: Some(until),
                    reason: reason.clone(),
                };
                self.moderation.timeout(who, room, user, timeout).await?;
                outcome(format!(
                    "{user} is timed out until {}",
                    until.format("%Y-%m-%d %H:%M UTC")
                ))
            }
            Command::Mute | Command::Unmute => {
                let muted = *command == Command::Mute;
                let change = MembershipChange {
                    muted: Some(muted),
                    ..MembershipChange::default()
                };
                self.members.update_membership(who, room, change).await?;
                outcome(format!("notifications {}", if muted { "muted" } else { "unmuted" }))
            }
            Command::Remind { after, text } => {
                let html = self.rendered(who, room, text).await?;
                let send_at = self.store.now() + *after;
                let scheduled = NewScheduled {
                    text: Some(html),
                    poll: None,
                    attachments: None,
                    send_at,
                };
                let scheduled = self.scheduler.schedule_message(who, room, scheduled).await?;
                CommandOutcome {
                    scheduled: Some(scheduled),
                    ..outcome(format!("posted here at {}", send_at.format("%Y-%m-%d %H:%M UTC")))
                }
            }
        })
    }

    /// Posts `text` as the caller, through the one door.
    async fn post(&self, who: &Principal, room: &RoomId, text: String, format: TextFormat) -> Result<Message> {
        let message = NewMessage {
            text: Some(text),
            format: Some(format),
            ..NewMessage::default()
        };
        Ok(self.sending.send_message(who, room, message).await?.message)
    }

    /// Markdown `text` by `who` as HTML, `@id` of the room's members as mentions (as a send
    /// renders it).
    async fn rendered(&self, who: &Principal, room: &RoomId, text: &str) -> Result<String> {
        let members = self
            .sending
            .mentionable(room, &who.user_id, Some(text), TextFormat::Markdown)
            .await?;
        crate::markdown::render(text, &members).ok_or_else(|| Error::validation("the text is too long to show"))
    }
}

/// What `command` did, `result` saying it.
fn outcome(command: &Command, result: String) -> CommandOutcome {
    CommandOutcome {
        command: command.name().to_owned(),
        result,
        message: None,
        scheduled: None,
        repeated: false,
    }
}
