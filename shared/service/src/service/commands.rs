//! Slash commands (`crate::commands`): each runs what its HTTP route runs, as the caller, so
//! the same membership, permission, rank and limit checks and the same moderation log apply.
//! A command acts when it runs and is never sent as text; it counts as a write against the
//! caller's rate. With a client id it runs at most once while a send's would (a run record in
//! the room, `MessageStore::claim_command`, written before it acts, expiring with the sends'
//! idempotency records): a repeated request runs nothing and answers `repeated`. A command
//! refused for what it is (422, 403, 404, 409) frees its id again, since nothing ran; one whose
//! outcome is unknown (the store failed half-way) keeps it.
//!
//! A room's own command's handler may answer later too, at the run's `response_url`
//! (`answer_later`): up to five times in 30 minutes, as Slack allows, each answer shown as the
//! first would have been — posted as the command's bot, or to the caller alone as a live
//! notice.

use std::sync::Arc;

use crate::access::Access;
use crate::adapters::outgoing::{HookSender, SlashFailure, new_signing_secret};
use crate::auth::Principal;
use crate::commands::{Command, CommandInfo, CommandLine, CommandOutcome, command_list, is_name, unknown};
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId};
use crate::limits::Write;
use crate::markdown::TextFormat;
use crate::members::{Ban, MembershipChange, Timeout};
use crate::messages::Message;
use crate::messages::checks;
use crate::messages::send::NewMessage;
use crate::moderation::Kick;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;
use crate::rooms::Room;
use crate::rooms::RoomChange;
use crate::rooms::invitations::NewInvitation;
use crate::scheduled::NewScheduled;
use crate::service::send::Submission;
use crate::signals::Signal;
use crate::slash::{
    Answer, LaterAnswered, LaterAnswers, MAX_ANSWER_BYTES, MAX_PER_ROOM, NewSlashCommand, SlackAnswer, SlashCommand,
    SlashCommandCreated, later_answer_url_unknown,
};
use crate::store::slash::StoredSlash;
use crate::webhooks::{Webhook, WebhookPayload, new_token, token_hash};

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
    /// Where an answer for the caller alone goes when it comes later.
    pub(crate) signals: Arc<crate::service::live::Signals>,
    /// The signed POST of a room's own commands; without it none registers (503) or runs (409).
    pub(crate) outgoing: Option<Arc<HookSender>>,
    /// Sent as Slack's `team_id`.
    pub(crate) workspace_id: Arc<str>,
    /// The base of the `response_url` a run is given; without it, a handler answers in its
    /// response only.
    pub(crate) public_url: Option<Arc<str>>,
}

/// How a handler's answer was shown.
enum Shown {
    /// An empty answer: an acknowledgement.
    Nothing,
    /// Posted in the room as the command's bot.
    Posted(Message),
    /// For the caller alone: the answer as HTML.
    ToCaller(String),
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
            return self.act(who, &access, room, &command).await;
        };
        let (user, now) = (&who.user_id, self.store.now());
        if !self.store.messages.claim_command(room, user, &client_id, now).await? {
            let said = "it ran already with this client id; nothing ran again";
            return Ok(CommandOutcome {
                repeated: true,
                ..outcome(command.name(), said.into())
            });
        }
        let acted = self.act(who, &access, room, &command).await;
        if let Err(Error::Validation(_) | Error::Forbidden(_) | Error::NotFound(_) | Error::Conflict(_)) = &acted
            && let Err(e) = self.store.messages.release_command(room, user, &client_id).await
        {
            tracing::warn!(%room, error = %e, "a refused command's run record stays until it expires");
        }
        acted
    }

    /// Does what `command` says, as `who`.
    async fn act(&self, who: &Principal, access: &Access, room: &RoomId, command: &Command) -> Result<CommandOutcome> {
        let outcome = |result: String| outcome(command.name(), result);
        Ok(match command {
            Command::Custom { name, text } => self.run_own(who, access, room, name, text).await?,
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

    /// Registers a command of the room's own (ManageWebhooks): its signing secret is in this
    /// answer only, and sealed in the store.
    pub async fn create_own(
        &self,
        who: &Principal,
        room: &RoomId,
        input: NewSlashCommand,
    ) -> Result<SlashCommandCreated> {
        let (name, url, description) = input.checked()?;
        self.manager(who, room).await?;
        let sender = self.sender()?;
        sender.check_url(&url).map_err(Error::validation)?;
        if self.store.slash.list(room).await?.len() >= MAX_PER_ROOM {
            return Err(Error::Conflict(format!(
                "a room has at most {MAX_PER_ROOM} commands of its own"
            )));
        }
        let signing_secret = new_signing_secret();
        let now = self.store.now();
        let command = SlashCommand {
            name,
            url,
            description,
            created_by: who.user_id.to_string(),
            created_at: now,
        };
        let stored = StoredSlash {
            sealed_secret: sender
                .sealer()
                .seal(&signing_secret, &sealed_for(room, &command.name))?,
            command,
        };
        let logged = ModerationEntry::by(ModerationAction::SlashCommandCreated, &who.user_id, now)
            .detail("name", &stored.command.name);
        self.store.slash.insert(room, &stored, &logged).await?;
        Ok(SlashCommandCreated {
            command: stored.command,
            signing_secret,
        })
    }

    /// The commands `who` may run in the room: the built-in ones their permissions allow, and
    /// the room's own (any member; without their URLs).
    pub async fn list(&self, who: &Principal, room: &RoomId) -> Result<Vec<CommandInfo>> {
        let access = self.access.access(room, &who.user_id).await?;
        let own = self.store.slash.list(room).await?.into_iter();
        Ok(command_list(
            |permission| access.can(permission),
            own.map(|stored| (stored.command.name, stored.command.description)),
        ))
    }

    /// The room's own commands (ManageWebhooks).
    pub async fn list_own(&self, who: &Principal, room: &RoomId) -> Result<Vec<SlashCommand>> {
        self.manager(who, room).await?;
        Ok(self
            .store
            .slash
            .list(room)
            .await?
            .into_iter()
            .map(|stored| stored.command)
            .collect())
    }

    /// Deletes a command of the room's own (ManageWebhooks).
    pub async fn delete_own(&self, who: &Principal, room: &RoomId, name: &str) -> Result<()> {
        self.manager(who, room).await?;
        if !is_name(name) {
            return Err(Error::not_found(format!("the room has no /{name}")));
        }
        let logged = ModerationEntry::by(ModerationAction::SlashCommandDeleted, &who.user_id, self.store.now())
            .detail("name", name);
        Ok(self.store.slash.delete(room, name, &logged).await?)
    }

    /// The caller's access, if they may manage the room's commands (a non-member: 404).
    async fn manager(&self, who: &Principal, room: &RoomId) -> Result<Access> {
        let access = self.access.access(room, &who.user_id).await?;
        access.require(Permission::ManageWebhooks)?;
        Ok(access)
    }

    fn sender(&self) -> Result<&HookSender> {
        self.outgoing.as_deref().ok_or_else(|| {
            Error::Unavailable("this server makes no outgoing requests: a room's own commands cannot run".into())
        })
    }

    /// Runs the room's own command `name`: Slack's form to its handler, signed; the answer
    /// posted as the command's bot (`in_channel`) or shown to the caller only. A handler that
    /// fails, answers late (3 s) or unreadably is a 502 saying so, and nothing is posted.
    async fn run_own(
        &self,
        who: &Principal,
        access: &Access,
        room: &RoomId,
        name: &str,
        text: &str,
    ) -> Result<CommandOutcome> {
        let stored = self.store.slash.get(room, name).await?.ok_or_else(|| unknown(name))?;
        // A command acts for its maker too: one who may no longer manage the room's
        // integrations runs nothing.
        if !self
            .sending
            .maker_may_manage_webhooks(room, &stored.command.created_by)
            .await?
        {
            return Err(Error::Forbidden(format!(
                "/{name}'s maker may no longer manage the room's integrations; a manager can register it again"
            )));
        }
        // What would refuse the caller's own message refuses the command before its handler
        // acts: timed out, a read-only room, slowmode.
        checks::before_limits(access, self.store.now())?;
        // Nothing is sent without a sender: the id may run it again (409 frees it).
        let sender = self.sender().map_err(|e| Error::Conflict(e.to_string()))?;
        let secret = sender.sealer().open(&stored.sealed_secret, &sealed_for(room, name))?;
        let trigger = uuid::Uuid::new_v4().simple().to_string();
        let command = format!("/{name}");
        let response_url = self.grant_later_answers(who, room, &stored.command).await?;
        let form = [
            ("token", ""),
            ("team_id", &*self.workspace_id),
            ("team_domain", &*self.workspace_id),
            ("channel_id", room.as_str()),
            ("channel_name", access.room.name.as_str()),
            ("user_id", who.user_id.as_str()),
            ("user_name", who.name.as_str()),
            ("command", command.as_str()),
            ("text", text),
            ("api_app_id", "tabletalk"),
            ("is_enterprise_install", "false"),
            ("trigger_id", trigger.as_str()),
            ("response_url", response_url.as_deref().unwrap_or("")),
        ];
        let failed = |why: String| Error::BadGateway(format!("{command} failed: {why}"));
        let reply = sender
            .run_slash(&stored.command.url, &secret, &form, self.store.now(), MAX_ANSWER_BYTES)
            .await
            .map_err(|failure| match failure {
                // Never reached: nothing ran, and the id may run it again.
                SlashFailure::NotSent(why) => {
                    Error::Conflict(format!("{command} could not reach its handler ({why}); nothing ran"))
                }
                SlashFailure::Failed(why) => failed(why),
            })?;
        if !(200..300).contains(&reply.status) {
            return Err(failed(format!("its handler answered {}", reply.status)));
        }
        let answer = Answer::read(&reply.body, reply.json).map_err(|e| failed(e.to_string()))?;
        // The handler ran: an answer the room refuses is the handler's failure, which keeps the
        // client id (a repeat must not run it again).
        let shown = self.show(room, access.room.clone(), &stored, answer).await;
        let mut done = outcome(name, "ran".into());
        match shown.map_err(|e| failed(format!("it ran, but its answer could not be shown: {e}")))? {
            Shown::Nothing => {}
            Shown::Posted(message) => done.message = Some(message),
            Shown::ToCaller(html) => done.ephemeral = Some(html),
        }
        Ok(done)
    }

    /// A `response_url` for a run of `command` by `who`, its answers granted in the store; none
    /// when this server does not know the URL it is reached at.
    async fn grant_later_answers(
        &self,
        who: &Principal,
        room: &RoomId,
        command: &SlashCommand,
    ) -> Result<Option<String>> {
        let Some(base) = &self.public_url else {
            return Ok(None);
        };
        let (token, hash) = new_token();
        let grant = LaterAnswers {
            command: command.name.clone(),
            command_created_at: command.created_at,
            caller: who.user_id.to_string(),
            granted_at: self.store.now(),
            used: 0,
        };
        self.store.slash.grant_later_answers(room, &hash, &grant).await?;
        Ok(Some(format!("{base}/api/slash-responses/{room}/{token}")))
    }

    /// A handler's later answer at a run's `response_url` (`{room}/{token}`): shown as an
    /// answer in its response would have been, while the URL takes answers
    /// (`LaterAnswers::check`), its command still exists and its maker may still manage the
    /// room's integrations. An answer for the caller alone reaches them live if they are still
    /// a member, and is stored nowhere.
    pub async fn answer_later(&self, room: &RoomId, token: &str, body: SlackAnswer) -> Result<LaterAnswered> {
        let grant = self
            .store
            .slash
            .take_later_answer(room, &token_hash(token), self.store.now())
            .await?;
        let stored = self
            .store
            .slash
            .get(room, &grant.command)
            .await?
            .filter(|stored| stored.command.created_at == grant.command_created_at)
            .ok_or_else(later_answer_url_unknown)?;
        if !self
            .sending
            .maker_may_manage_webhooks(room, &stored.command.created_by)
            .await?
        {
            return Err(Error::Forbidden(format!(
                "/{}'s maker may no longer manage the room's integrations",
                grant.command
            )));
        }
        let room_row = self
            .store
            .rooms
            .room(room)
            .await?
            .ok_or_else(later_answer_url_unknown)?;
        let mut answered = LaterAnswered {
            message: None,
            ephemeral: false,
        };
        match self.show(room, room_row, &stored, Answer::from(body)).await? {
            Shown::Nothing => {}
            Shown::Posted(message) => answered.message = Some(message),
            Shown::ToCaller(html) => {
                answered.ephemeral = true;
                let caller = crate::ids::UserId::parse(&grant.caller)?;
                match self.access.access(room, &caller).await {
                    Ok(_) => self.signals.notice(
                        room,
                        &caller,
                        Signal::CommandAnswered {
                            command: grant.command,
                            html,
                        },
                    ),
                    Err(Error::NotFound(_) | Error::Forbidden(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(answered)
    }

    /// Shows a handler's `answer` to the room's command `stored` as Slack shows it: `in_channel`
    /// posted through the one door as the command's bot (its own author, and its own rate),
    /// anything else as HTML for the caller alone.
    async fn show(&self, room: &RoomId, room_row: Room, stored: &StoredSlash, answer: Answer) -> Result<Shown> {
        if answer.text.is_empty() {
            return Ok(Shown::Nothing);
        }
        let payload = WebhookPayload {
            text: Some(answer.text),
            username: None,
            icon_url: None,
        }
        .checked()?;
        if !answer.in_channel {
            return Ok(Shown::ToCaller(payload.html));
        }
        let name = &stored.command.name;
        let bot = Webhook {
            id: format!("slash-{room}-{name}"),
            room_id: room.to_string(),
            name: format!("/{name}"),
            created_by: stored.command.created_by.clone(),
            created_at: stored.command.created_at,
            automation: false,
            token_hash: String::new(),
        };
        let submission = Submission::Webhook {
            access: bot.access(room_row)?,
            hook: bot,
            payload,
            client_id: None,
        };
        Ok(Shown::Posted(self.sending.submit(room, submission).await?.message))
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

    /// Markdown `text` by `who` as HTML, `@id` of the room's members as mentions and its own
    /// emoji marked (as a send renders it).
    async fn rendered(&self, who: &Principal, room: &RoomId, text: &str) -> Result<String> {
        let names = self
            .sending
            .room_names(room, &who.user_id, Some(text), TextFormat::Markdown)
            .await?;
        crate::markdown::render(text, &names).ok_or_else(|| Error::validation("the text is too long to show"))
    }
}

/// What the command `name` did, `result` saying it.
fn outcome(name: &str, result: String) -> CommandOutcome {
    CommandOutcome {
        command: name.to_owned(),
        result,
        message: None,
        scheduled: None,
        ephemeral: None,
        repeated: false,
    }
}

/// What a command's sealed secret is bound to: a sealed secret copied onto another row does not
/// open.
fn sealed_for(room: &RoomId, name: &str) -> String {
    format!("{room}/slash:{name}")
}
