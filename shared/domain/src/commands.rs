//! Slash commands: a line a member types starting with `/`, parsed into what it does. They act
//! when they run and are never sent as text; each does what its HTTP route does, through the
//! same checks (`service/commands.rs`).

use chrono::Duration;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::ids::UserId;
use crate::messages::Message;
use crate::permissions::Permission;
use crate::scheduled::Scheduled;

/// The commands, with what each takes, as the web client suggests them.
pub const COMMANDS: [(&str, &str); 10] = [
    ("me", "<text>: says it as an action, in italics"),
    ("shrug", "[text]: adds ¯\\_(ツ)_/¯"),
    ("topic", "<text>: sets the room's description (ManageRoom)"),
    ("invite", "@user: invites them into the room"),
    ("kick", "@user [reason]: removes them (ManageMembers)"),
    ("ban", "@user [reason]: bans them (ManageMembers)"),
    ("timeout", "@user <duration> [reason]: e.g. 10m, 2h, 1d (ManageMembers)"),
    ("mute", ": mutes the room's notifications for you"),
    ("unmute", ": unmutes them"),
    (
        "remind",
        "<duration> <text>: posts your text in this room then, e.g. /remind 1h stand-up",
    ),
];

/// Characters of a command's name at most (a room's own commands' too).
pub const MAX_NAME_CHARS: usize = 32;

/// The longest line a command takes: a message's text and a little more.
pub const MAX_LINE_CHARS: usize = 10_100;

/// `POST /api/rooms/{roomId}/commands`: a command line to run.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandLine {
    /// What was typed, from the `/`: `/shrug`, `/topic Launch on Friday`, `/kick @bob spam`.
    pub text: String,
    /// Runs the command at most once: a repeat with the same id runs nothing and answers
    /// `repeated`. The web client sends one with every command and never repeats it itself.
    #[serde(default)]
    pub client_id: Option<String>,
}

/// A command a member may run in a room, as the composer suggests it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    /// Without the `/`.
    pub name: String,
    /// What it takes and does: a built-in's usage, a room's own command's description.
    pub usage: String,
    /// True for a command of the room's own (its handler answers it).
    pub own: bool,
}

/// The permission a built-in command needs beyond membership, if any (its route checks it).
pub fn needs(name: &str) -> Option<Permission> {
    match name {
        "topic" => Some(Permission::ManageRoom),
        "invite" => Some(Permission::CreateInvites),
        "kick" | "ban" | "timeout" => Some(Permission::ManageMembers),
        _ => None,
    }
}

/// The built-in commands `may` run (given what each [`needs`]), then `own` (the room's own, as
/// name and description), by name.
pub fn command_list(
    may: impl Fn(Permission) -> bool,
    own: impl IntoIterator<Item = (String, String)>,
) -> Vec<CommandInfo> {
    let builtin = COMMANDS
        .iter()
        .filter(|(name, _)| needs(name).is_none_or(&may))
        .map(|(name, usage)| CommandInfo {
            name: (*name).to_owned(),
            usage: (*usage).to_owned(),
            own: false,
        });
    let mut all: Vec<CommandInfo> = builtin
        .chain(
            own.into_iter()
                .map(|(name, usage)| CommandInfo { name, usage, own: true }),
        )
        .collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// What a command did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandOutcome {
    /// The command's name, without the `/`.
    pub command: String,
    /// What it did, in a sentence for the caller.
    pub result: String,
    /// The message it posted (`/me`, `/shrug`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The message it scheduled (`/remind`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<Scheduled>,
    /// What a room's own command answered only to the caller (sanitized HTML): shown to them,
    /// stored nowhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<String>,
    /// The client id had run already: nothing ran again.
    pub repeated: bool,
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Me(String),
    Shrug(String),
    Topic(String),
    Invite(UserId),
    Kick {
        user: UserId,
        reason: Option<String>,
    },
    Ban {
        user: UserId,
        reason: Option<String>,
    },
    Timeout {
        user: UserId,
        lasting: Duration,
        reason: Option<String>,
    },
    Mute,
    Unmute,
    Remind {
        after: Duration,
        text: String,
    },
    /// A name no built-in command has: the room's own, if it has one (`crate::slash`).
    Custom {
        name: String,
        text: String,
    },
}

impl Command {
    /// Parses a line: `/name` and what the command takes. An unknown name, or what a command
    /// needs missing or malformed, is a 422 that says so.
    pub fn parse(line: &str) -> Result<Command> {
        if line.chars().count() > MAX_LINE_CHARS {
            return Err(Error::validation(format!(
                "a command is at most {MAX_LINE_CHARS} characters"
            )));
        }
        let line = line.trim();
        let Some(rest) = line.strip_prefix('/') else {
            return Err(Error::validation("a command starts with /"));
        };
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let args = args.trim();
        let usage = |name: &str| {
            let (_, takes) = COMMANDS.iter().find(|(n, _)| *n == name).expect("a known command");
            Error::validation(format!(
                "usage: /{name} {}",
                takes.split(':').next().unwrap_or("").trim()
            ))
        };
        let text = |name: &str| match args.is_empty() {
            true => Err(usage(name)),
            false => Ok(args.to_owned()),
        };
        // The first word of `args` as a user (`@id` or `id`), and the rest.
        let user = |name: &str| -> Result<(UserId, &str)> {
            let (first, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
            let id = first.strip_prefix('@').unwrap_or(first);
            let user = UserId::parse(id).map_err(|_| usage(name))?;
            Ok((user, rest.trim()))
        };
        let reason = |rest: &str| (!rest.is_empty()).then(|| rest.to_owned());
        Ok(match name {
            "me" => Command::Me(text("me")?),
            "shrug" => Command::Shrug(args.to_owned()),
            "topic" => Command::Topic(text("topic")?),
            "invite" => match user("invite")? {
                (user, "") => Command::Invite(user),
                _ => return Err(usage("invite")),
            },
            "kick" => {
                let (user, rest) = user("kick")?;
                Command::Kick {
                    user,
                    reason: reason(rest),
                }
            }
            "ban" => {
                let (user, rest) = user("ban")?;
                Command::Ban {
                    user,
                    reason: reason(rest),
                }
            }
            "timeout" => {
                let (user, rest) = user("timeout")?;
                let (lasting, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let lasting = duration(lasting).ok_or_else(|| usage("timeout"))?;
                Command::Timeout {
                    user,
                    lasting,
                    reason: reason(rest.trim()),
                }
            }
            "mute" | "unmute" if !args.is_empty() => return Err(usage(name)),
            "mute" => Command::Mute,
            "unmute" => Command::Unmute,
            "remind" => {
                let (after, text) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
                let after = duration(after).ok_or_else(|| usage("remind"))?;
                match text.trim() {
                    "" => return Err(usage("remind")),
                    text => Command::Remind {
                        after,
                        text: text.to_owned(),
                    },
                }
            }
            _ if is_name(name) => Command::Custom {
                name: name.to_owned(),
                text: args.to_owned(),
            },
            _ => return Err(unknown(name)),
        })
    }

    /// The command's name.
    pub fn name(&self) -> &str {
        match self {
            Command::Me(_) => "me",
            Command::Shrug(_) => "shrug",
            Command::Topic(_) => "topic",
            Command::Invite(_) => "invite",
            Command::Kick { .. } => "kick",
            Command::Ban { .. } => "ban",
            Command::Timeout { .. } => "timeout",
            Command::Mute => "mute",
            Command::Unmute => "unmute",
            Command::Remind { .. } => "remind",
            Command::Custom { name, .. } => name,
        }
    }
}

/// Whether `name` may name a command: 1-32 of `a-z`, `0-9`, `_`, `-` (a room's own commands
/// are named so; any other name is nobody's).
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// The answer to a command nobody has: what there is.
pub fn unknown(name: &str) -> Error {
    let known: Vec<String> = COMMANDS.iter().map(|(name, _)| format!("/{name}")).collect();
    Error::validation(format!(
        "there is no command /{name}; the commands are {} and the room's own",
        known.join(", ")
    ))
}

/// A duration written as numbers with units, `90s`, `10m`, `1h30m`, `2d`, `1w`: at most a
/// year, more than nothing.
pub fn duration(text: &str) -> Option<Duration> {
    let mut total = Duration::zero();
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().ok().filter(|n| *n <= 1_000_000)?;
        digits.clear();
        total += match c {
            's' => Duration::seconds(n),
            'm' => Duration::minutes(n),
            'h' => Duration::hours(n),
            'd' => Duration::days(n),
            'w' => Duration::weeks(n),
            _ => return None,
        };
    }
    (digits.is_empty() && total > Duration::zero() && total <= Duration::days(366)).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    #[test]
    fn each_command_parses_what_it_takes() {
        assert_eq!(Command::parse("/me waves").unwrap(), Command::Me("waves".into()));
        assert_eq!(Command::parse("/shrug").unwrap(), Command::Shrug(String::new()));
        assert_eq!(
            Command::parse("  /topic Launch  on Friday ").unwrap(),
            Command::Topic("Launch  on Friday".into())
        );
        assert_eq!(Command::parse("/invite @bob").unwrap(), Command::Invite(user("bob")));
        assert_eq!(
            Command::parse("/kick @bob for spam").unwrap(),
            Command::Kick {
                user: user("bob"),
                reason: Some("for spam".into())
            }
        );
        assert_eq!(
            Command::parse("/ban bob").unwrap(),
            Command::Ban {
                user: user("bob"),
                reason: None
            }
        );
        assert_eq!(
            Command::parse("/timeout @bob 1h30m cool off").unwrap(),
            Command::Timeout {
                user: user("bob"),
                lasting: Duration::minutes(90),
                reason: Some("cool off".into())
            }
        );
        assert_eq!(Command::parse("/mute").unwrap(), Command::Mute);
        assert_eq!(
            Command::parse("/deploy main now").unwrap(),
            Command::Custom {
                name: "deploy".into(),
                text: "main now".into()
            }
        );
        assert_eq!(
            Command::parse("/remind 2d stand-up notes").unwrap(),
            Command::Remind {
                after: Duration::days(2),
                text: "stand-up notes".into()
            }
        );
    }

    #[test]
    fn a_bad_line_says_what_is_wrong() {
        for (line, says) in [
            ("hello", "starts with /"),
            ("/", "there is no command /;"),
            ("/a#b", "there is no command /a#b"),
            ("/Deploy", "there is no command /Deploy"),
            ("/me", "usage: /me <text>"),
            ("/topic   ", "usage: /topic"),
            ("/invite", "usage: /invite @user"),
            ("/invite @bob @carol", "usage: /invite"),
            ("/timeout @bob", "usage: /timeout"),
            ("/timeout @bob soon", "usage: /timeout"),
            ("/remind 10m", "usage: /remind"),
            ("/remind 400d later", "usage: /remind"),
            ("/mute please", "usage: /mute"),
        ] {
            let error = Command::parse(line).unwrap_err();
            assert!(matches!(error, Error::Validation(_)), "{line}: {error:?}");
            assert!(error.to_string().contains(says), "{line}: {error}");
        }
        assert!(Command::parse(&format!("/me {}", "a".repeat(MAX_LINE_CHARS))).is_err());
    }

    #[test]
    fn durations_are_numbers_with_units() {
        assert_eq!(duration("90s"), Some(Duration::seconds(90)));
        assert_eq!(duration("1w2d"), Some(Duration::days(9)));
        for bad in ["", "10", "m", "0m", "5x", "367d", "99999999999999999999s"] {
            assert_eq!(duration(bad), None, "{bad}");
        }
    }
}
