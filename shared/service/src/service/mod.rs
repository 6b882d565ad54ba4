//! The service: one component per use-case family (`RoomAccess`, `Sending`, `Rooms`, …), each
//! a struct in the first of its files here holding what it uses, built bottom-up by
//! [`Chat::assemble`] from the [`Wiring`] (the store, the adapters and the settings the
//! composition root gave). `Chat` bundles them with the builders, the accessors and the
//! housekeeping run that spans components; `impl Chat` appears nowhere else.

pub mod access;
pub mod attachments;
pub mod changes;
pub mod commands;
pub mod direct;
pub mod directory;
pub mod erasure;
pub mod feed;
pub mod follows;
pub mod forward;
pub mod housekeeping;
pub mod invitations;
pub mod limits;
pub mod live;
pub mod members;
pub mod moderation;
pub mod moderation_log;
pub mod notices;
pub mod outbox;
pub mod outgoing;
pub mod pins;
pub mod polls;
pub mod presence;
pub mod previews;
pub mod reactions;
pub mod read;
pub mod reports;
pub mod roles;
pub mod room_deletion;
pub mod room_emoji;
pub mod room_settings;
pub mod rooms;
pub mod scheduled;
pub mod search;
pub mod send;
pub mod subscriptions;
pub mod threads;
pub mod thumbnails;
pub mod webhooks;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use self::attachments::AttachmentSettings;
use self::limits::{LimitSettings, WriteLimits};
use self::presence::PresenceGate;
use self::previews::Previews;
use crate::adapters::link_preview::PreviewFetcher;
use crate::erasure::ErasureSettings;

use crate::adapters::events::{EventGrid, EventSink};
use crate::adapters::live::LiveChannel;
use crate::adapters::live::local_hub::LocalHub;
use crate::adapters::push::PushSender;
use crate::adapters::tasks::Supervisor;
use crate::error::Result;
use crate::notify::{Notifier, PushSettings};
use crate::storage::Tables;
use crate::store::{Schema, Store};

use self::live::TypingGate;

/// What the service's components are built from: the store, the adapters and the settings,
/// as the builders of [`Chat`] leave them.
#[derive(Clone)]
pub(crate) struct Wiring {
    /// Every table and row the service reads and writes.
    pub(crate) store: Store,
    /// Where sends take their ticks; tests freeze it to force key collisions.
    pub(crate) ticks: Arc<crate::keys::TickSource>,
    /// The workspace id the change feed answers for.
    pub(crate) workspace_id: Arc<str>,
    /// Where live signals go; none in a Functions app without Web PubSub.
    pub(crate) live: Option<Arc<dyn LiveChannel>>,
    /// This process's own hub, when it is one (the self-hosted server): its WebSocket
    /// transport needs it.
    pub(crate) local_hub: Option<Arc<LocalHub>>,
    /// How push is configured: the notifier's settings, also read by subscriptions.
    pub(crate) push: Arc<PushSettings>,
    /// The notification consumer (push settings, presence through the live channel).
    pub(crate) notifier: Notifier,
    /// The Event Grid topic events go to, when one is configured.
    pub(crate) event_grid: Option<Arc<EventGrid>>,
    /// Where message events go: the topic, else the notifier in this process when push is
    /// configured, else nowhere (and sends record none).
    pub(crate) events: Option<Arc<dyn EventSink>>,
    /// Who typed when, to rate-limit typing signals.
    pub(crate) typing: Arc<TypingGate>,
    /// When each user's last presence signal went, to coalesce them.
    pub(crate) presence: Arc<presence::PresenceGate>,
    /// The keys Web PubSub signs its upstream events with, when it is configured.
    pub(crate) upstream: Option<Arc<crate::adapters::live::upstream::Upstream>>,
    /// Publish each event before the send answers instead of in the background.
    pub(crate) inline_events: bool,
    /// How erasures run: batch size, pause, lease.
    pub(crate) erasure: crate::erasure::ErasureSettings,
    /// The limits against abuse, when they apply (`with_limits`; the composition root turns
    /// them on unless configured off).
    pub(crate) limits: Option<Arc<limits::WriteLimits>>,
    /// Where attachments are stored and what may be uploaded (`with_attachments`).
    pub(crate) attachments: Option<Arc<attachments::AttachmentSettings>>,
    /// What time it is for scheduled messages (when one is due); tests move it.
    pub(crate) time: Arc<dyn crate::adapters::clock::Clock>,
    /// Link previews, when this process makes them (`with_previews`).
    pub(crate) previews: Option<Arc<previews::Previews>>,
    /// Where outgoing webhooks are posted from, when they are configured (a sealing key).
    pub(crate) outgoing: Option<Arc<crate::adapters::outgoing::HookSender>>,
    /// The Event Grid topic automation events go to, when one is configured.
    pub(crate) automation: Option<Arc<EventGrid>>,
    /// The base URL this server is reached at, when known (`with_public_url`): a room's own
    /// commands are given a `response_url` under it.
    pub(crate) public_url: Option<Arc<str>>,
    /// Which members last held roles, so their access reads the roles at once.
    pub(crate) role_hints: Arc<access::RoleHints>,
    /// The room rows sends are admitted on, with the room stamp each was read under.
    pub(crate) room_rows: Arc<access::RoomRows>,
    /// Every task that runs on after the call that started it.
    pub(crate) tasks: Supervisor,
}

/// The chat service: one component per use-case family, each holding exactly what it uses
/// and the components below it, built bottom-up from the [`Wiring`] in [`Chat::assemble`]
/// (so a circle between them cannot be built). A caller reaches a use case through its
/// component: `chat.sending.send_message(…)`. Cloning is cheap (handles and `Arc`s).
#[derive(Clone)]
pub struct Chat {
    wiring: Arc<Wiring>,
    pub limiter: Arc<limits::Limiter>,
    pub access: Arc<access::RoomAccess>,
    pub reading: Arc<read::Reading>,
    pub signals: Arc<live::Signals>,
    pub presence_keeper: Arc<presence::PresenceKeeper>,
    pub files: Arc<attachments::Files>,
    pub reactions: Arc<reactions::Reactions>,
    pub previewer: Arc<previews::Previewer>,
    pub accounts: Arc<subscriptions::Accounts>,
    pub outbox: Arc<outbox::Outbox>,
    pub sending: Arc<send::Sending>,
    pub editing: Arc<changes::Editing>,
    pub moderation: Arc<moderation::Moderation>,
    pub members: Arc<members::Members>,
    pub rooms: Arc<rooms::Rooms>,
    pub scheduler: Arc<scheduled::Scheduler>,
    pub eraser: Arc<erasure::Eraser>,
    pub searching: Arc<search::Searching>,
    pub commands: Arc<commands::Commands>,
    pub room_emoji: Arc<room_emoji::RoomEmoji>,
}

impl Chat {
    /// A service over `tables`, creating any missing table first: no live channel, no push,
    /// no events.
    pub async fn open(tables: Tables, schema: Schema) -> Result<Chat> {
        let store = Store::open(tables, schema).await?;
        let push = Arc::new(PushSettings::default());
        let tasks = Supervisor::default();
        Ok(Chat::assemble(Wiring {
            notifier: Notifier::new(store.clone(), push.clone(), None, tasks.clone()),
            tasks,
            store,
            ticks: Arc::default(),
            workspace_id: Arc::from("default"),
            live: None,
            local_hub: None,
            push,
            event_grid: None,
            events: None,
            typing: Arc::default(),
            presence: Arc::default(),
            upstream: None,
            inline_events: false,
            erasure: crate::erasure::ErasureSettings::default(),
            limits: None,
            attachments: None,
            time: Arc::new(crate::adapters::clock::SystemClock),
            previews: None,
            outgoing: None,
            automation: None,
            public_url: None,
            role_hints: Arc::default(),
            room_rows: Arc::default(),
        }))
    }

    /// Builds every component from `wiring`, each from the ones below it.
    fn assemble(wiring: Wiring) -> Chat {
        let limiter = Arc::new(limits::Limiter {
            store: wiring.store.clone(),
            limits: wiring.limits.clone(),
        });
        let access = Arc::new(access::RoomAccess {
            store: wiring.store.clone(),
            role_hints: wiring.role_hints.clone(),
            room_rows: wiring.room_rows.clone(),
        });
        let reading = Arc::new(read::Reading {
            store: wiring.store.clone(),
            workspace_id: wiring.workspace_id.clone(),
            access: access.clone(),
        });
        let signals = Arc::new(live::Signals {
            store: wiring.store.clone(),
            live: wiring.live.clone(),
            typing: wiring.typing.clone(),
            access: access.clone(),
            limiter: limiter.clone(),
        });
        let presence_keeper = Arc::new(presence::PresenceKeeper {
            store: wiring.store.clone(),
            live: wiring.live.clone(),
            local_hub: wiring.local_hub.clone(),
            presence: wiring.presence.clone(),
            upstream: wiring.upstream.clone(),
            tasks: wiring.tasks.clone(),
            signals: signals.clone(),
        });
        let files = Arc::new(attachments::Files {
            store: wiring.store.clone(),
            attachments: wiring.attachments.clone(),
            access: access.clone(),
            limiter: limiter.clone(),
        });
        let reactions = Arc::new(reactions::Reactions {
            store: wiring.store.clone(),
            access: access.clone(),
            limiter: limiter.clone(),
            reading: reading.clone(),
            signals: signals.clone(),
        });
        let previewer = Arc::new(previews::Previewer {
            store: wiring.store.clone(),
            inline_events: wiring.inline_events.clone(),
            time: wiring.time.clone(),
            previews: wiring.previews.clone(),
            tasks: wiring.tasks.clone(),
            access: access.clone(),
            reading: reading.clone(),
            signals: signals.clone(),
        });
        let accounts = Arc::new(subscriptions::Accounts {
            store: wiring.store.clone(),
            push: wiring.push.clone(),
            access: access.clone(),
        });
        let outbox = Arc::new(outbox::Outbox {
            store: wiring.store.clone(),
            push: wiring.push.clone(),
            notifier: wiring.notifier.clone(),
            events: wiring.events.clone(),
            inline_events: wiring.inline_events.clone(),
            automation: wiring.automation.clone(),
            tasks: wiring.tasks.clone(),
        });
        // What happens after a message is committed: the send path's subscribers.
        let (nudge, nudged) = outgoing::OutgoingNudge::new(wiring.store.clone(), wiring.outgoing.is_some());
        let nudge = Arc::new(nudge);
        let thumbnailer = Arc::new(thumbnails::Thumbnailer {
            store: wiring.store.clone(),
            attachments: wiring.attachments.clone(),
            inline: wiring.inline_events,
            tasks: wiring.tasks.clone(),
            signals: signals.clone(),
        });
        let publisher = send::publish::Publisher::new(vec![
            reading.clone(),
            signals.clone(),
            outbox.clone(),
            previewer.clone(),
            thumbnailer,
            nudge.clone(),
        ]);
        let sending = Arc::new(send::Sending {
            store: wiring.store.clone(),
            ticks: wiring.ticks.clone(),
            time: wiring.time.clone(),
            outgoing: wiring.outgoing.clone(),
            automation: wiring.automation.clone(),
            tasks: wiring.tasks.clone(),
            access: access.clone(),
            files: files.clone(),
            limiter: limiter.clone(),
            outbox: outbox.clone(),
            reading: reading.clone(),
            signals: signals.clone(),
            publisher,
        });
        if let Some(nudged) = nudged {
            send::Sending::deliver_when_nudged(Arc::downgrade(&sending), nudged, &wiring.tasks);
        }
        let editing = Arc::new(changes::Editing {
            store: wiring.store.clone(),
            nudge,
            access: access.clone(),
            files: files.clone(),
            limiter: limiter.clone(),
            reading: reading.clone(),
            sending: sending.clone(),
            signals: signals.clone(),
        });
        let moderation = Arc::new(moderation::Moderation {
            store: wiring.store.clone(),
            access: access.clone(),
            sending: sending.clone(),
            signals: signals.clone(),
        });
        let members = Arc::new(members::Members {
            store: wiring.store.clone(),
            access: access.clone(),
            limiter: limiter.clone(),
            presence_keeper: presence_keeper.clone(),
            reading: reading.clone(),
            signals: signals.clone(),
        });
        let rooms = Arc::new(rooms::Rooms {
            store: wiring.store.clone(),
            access: access.clone(),
            files: files.clone(),
            limiter: limiter.clone(),
            sending: sending.clone(),
            signals: signals.clone(),
        });
        let scheduler = Arc::new(scheduled::Scheduler {
            store: wiring.store.clone(),
            time: wiring.time.clone(),
            access: access.clone(),
            files: files.clone(),
            sending: sending.clone(),
            signals: signals.clone(),
        });
        let eraser = Arc::new(erasure::Eraser {
            store: wiring.store.clone(),
            erasure: wiring.erasure.clone(),
            tasks: wiring.tasks.clone(),
            access: access.clone(),
            editing: editing.clone(),
            rooms: rooms.clone(),
            scheduler: scheduler.clone(),
            signals: signals.clone(),
        });
        let commands = Arc::new(commands::Commands {
            store: wiring.store.clone(),
            access: access.clone(),
            limiter: limiter.clone(),
            sending: sending.clone(),
            moderation: moderation.clone(),
            members: members.clone(),
            rooms: rooms.clone(),
            scheduler: scheduler.clone(),
            signals: signals.clone(),
            outgoing: wiring.outgoing.clone(),
            workspace_id: wiring.workspace_id.clone(),
            public_url: wiring.public_url.clone(),
        });
        let room_emoji = Arc::new(room_emoji::RoomEmoji {
            store: wiring.store.clone(),
            access: access.clone(),
            files: files.clone(),
        });
        let searching = Arc::new(search::Searching {
            store: wiring.store.clone(),
            access: access.clone(),
            reading: reading.clone(),
        });
        Chat {
            wiring: Arc::new(wiring),
            limiter,
            access,
            reading,
            signals,
            presence_keeper,
            files,
            reactions,
            previewer,
            accounts,
            outbox,
            sending,
            editing,
            moderation,
            members,
            rooms,
            scheduler,
            eraser,
            searching,
            commands,
            room_emoji,
        }
    }

    /// The same service with its components built again from its wiring as it is now.
    fn reassembled(self) -> Chat {
        Chat::assemble(Arc::unwrap_or_clone(self.wiring))
    }

    /// The wiring, for a builder to change (the components are built again after it).
    fn wiring_mut(&mut self) -> &mut Wiring {
        Arc::make_mut(&mut self.wiring)
    }

    /// The same service calling outgoing webhooks through `sender`.
    pub fn with_outgoing_webhooks(mut self, sender: crate::adapters::outgoing::HookSender) -> Chat {
        self.wiring_mut().outgoing = Some(Arc::new(sender));
        self.reassembled()
    }

    /// The same service publishing automation events (docs/AUTOMATION_EVENTS.md) to `topic`.
    pub fn with_automation_topic(mut self, topic: EventGrid) -> Chat {
        self.wiring_mut().automation = Some(Arc::new(topic));
        self.reassembled()
    }

    /// The same service reached at `url` (no trailing `/`), which a room's own commands'
    /// `response_url` is under.
    pub fn with_public_url(mut self, url: &str) -> Chat {
        self.wiring_mut().public_url = Some(Arc::from(url.trim_end_matches('/')));
        self.reassembled()
    }

    /// The same service answering the change feed for `workspace`.
    pub fn with_workspace(mut self, workspace: &str) -> Chat {
        self.wiring_mut().workspace_id = Arc::from(workspace);
        self.reassembled()
    }

    /// The same service sending live signals to `live` (Azure Web PubSub).
    pub fn with_live(mut self, live: Arc<dyn LiveChannel>) -> Chat {
        self.wiring_mut().live = Some(live);
        self.wiring_mut().local_hub = None;
        self.rewired()
    }

    /// The same service publishing message events to an Event Grid topic.
    pub fn with_event_grid(mut self, topic: EventGrid) -> Chat {
        self.wiring_mut().event_grid = Some(Arc::new(topic));
        self.rewired()
    }

    /// The same service with `push` configured.
    pub fn with_push(mut self, push: PushSettings) -> Chat {
        self.wiring_mut().push = Arc::new(push);
        self.rewired()
    }

    /// The same service with its own live hub, when no Web PubSub is configured (the
    /// self-hosted server; a Functions host cannot carry WebSockets).
    pub fn with_local_hub(mut self, hub: &str) -> Chat {
        if self.wiring.live.is_none() {
            let hub = Arc::new(LocalHub::new(hub));
            self.wiring_mut().live = Some(Arc::new(hub.clone()));
            self.wiring_mut().local_hub = Some(hub);
        }
        self.rewired()
    }

    /// The notifier and the event sink for the adapters as they are now.
    fn rewired(mut self) -> Chat {
        self.wiring_mut().notifier = Notifier::new(
            self.wiring.store.clone(),
            self.wiring.push.clone(),
            self.wiring.live.clone(),
            self.wiring.tasks.clone(),
        );
        self.wiring_mut().events = match (&self.wiring.event_grid, &self.wiring.push.sender) {
            (Some(topic), _) => Some(topic.clone() as Arc<dyn EventSink>),
            (None, Some(_)) => Some(Arc::new(self.wiring.notifier.clone()) as Arc<dyn EventSink>),
            (None, None) => None,
        };
        self.reassembled()
    }

    /// The local live hub, when this process runs one.
    pub fn local_hub(&self) -> Option<&Arc<LocalHub>> {
        self.wiring.local_hub.as_ref()
    }

    /// The same service publishing each event before the send answers: for hosts that freeze
    /// the process once it has answered (AWS Lambda), where background work would not run.
    pub fn with_inline_events(mut self) -> Chat {
        self.wiring_mut().inline_events = true;
        self.reassembled()
    }

    /// The same service taking its sends' ticks from `ticks` (tests: frozen ticks make every
    /// send collide).
    pub fn with_ticks(mut self, ticks: crate::keys::TickSource) -> Chat {
        self.wiring_mut().ticks = Arc::new(ticks);
        self.reassembled()
    }

    /// The same service, its store and its notification consumer reading the time from
    /// `clock`: the one clock of the process.
    pub fn with_time(mut self, clock: Arc<dyn crate::adapters::clock::Clock>) -> Chat {
        self.wiring_mut().store = self.wiring.store.with_clock(clock.clone());
        self.wiring_mut().time = clock;
        self.rewired()
    }

    /// The time as the service's clock tells it: the system's, or the one a test moves
    /// (`with_time`). The timers read it, so a test moves time instead of sleeping.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.wiring.time.now()
    }

    /// The supervisor of this service's background work: a stopping server shuts it down
    /// (`Supervisor::shut_down`) once it has answered its last request.
    pub fn supervisor(&self) -> &Supervisor {
        &self.wiring.tasks
    }

    /// The notification consumer: what the notification function (Event Grid's trigger and
    /// webhook) hands its events to.
    pub fn notifier(&self) -> &Notifier {
        &self.wiring.notifier
    }

    /// The store, for tests and tools that inspect what is stored.
    pub fn store(&self) -> &Store {
        &self.wiring.store
    }

    /// The VAPID public key browsers subscribe with, when push is configured.
    pub fn vapid_public_key(&self) -> Option<&str> {
        self.wiring.push.sender.as_ref().map(PushSender::public_key)
    }

    /// The same service storing attachments as `settings` says.
    pub fn with_attachments(mut self, settings: AttachmentSettings) -> Chat {
        self.wiring_mut().attachments = Some(Arc::new(settings));
        self.reassembled()
    }

    /// The same service running erasures with `settings`.
    pub fn with_erasure(mut self, settings: ErasureSettings) -> Chat {
        self.wiring_mut().erasure = settings;
        self.reassembled()
    }

    /// The same service writing no word index rows (`TABLETALK_SEARCH_INDEX=off`).
    pub fn without_search_index(mut self) -> Chat {
        self.wiring_mut().store = self.wiring.store.without_word_index();
        self.rewired()
    }

    /// The same service applying the limits to members' writes.
    pub fn with_limits(mut self, settings: LimitSettings) -> Chat {
        self.wiring_mut().limits = Some(Arc::new(WriteLimits::new(settings)));
        self.reassembled()
    }

    /// The same service sending at most one presence signal per user every `interval` (tests
    /// shorten it).
    pub fn with_presence_interval(mut self, interval: Duration) -> Chat {
        self.wiring_mut().presence = Arc::new(PresenceGate::new(interval));
        self.reassembled()
    }

    /// The same service believing upstream events signed with `upstream`'s keys (Azure Web
    /// PubSub's event handler).
    pub fn with_upstream(mut self, upstream: crate::adapters::live::upstream::Upstream) -> Chat {
        self.wiring_mut().upstream = Some(Arc::new(upstream));
        self.reassembled()
    }

    /// The same service fetching link previews with `fetcher`; without it, none are made.
    pub fn with_previews(mut self, fetcher: PreviewFetcher) -> Chat {
        self.wiring_mut().previews = Some(Arc::new(Previews::new(fetcher)));
        self.reassembled()
    }
}

/// Runs one request's work so that the store calls it makes in one step reach the store
/// together (`storage::together`): on the embedded store a send's writes are one group commit,
/// one fsync. The HTTP layer wraps every handler in it.
pub fn one_request<F: std::future::Future>(work: F) -> crate::storage::Together<F> {
    crate::storage::together(work)
}

/// What the service-level tests share: a scratch embedded store and a room in it.
#[cfg(test)]
pub(crate) mod testing {
    use super::Chat;
    use crate::auth::Principal;
    use crate::ids::{RoomId, UserId};
    use crate::rooms::NewRoom;
    use crate::storage::Tables;
    use crate::storage::sqlite::{Durability, SqliteTables};
    use crate::store::Schema;

    pub fn user(id: &str) -> Principal {
        Principal {
            user_id: UserId::parse(id).unwrap(),
            name: id.to_uppercase(),
        }
    }

    pub fn alice() -> Principal {
        user("alice")
    }

    pub fn store() -> SqliteTables {
        let dir = std::env::temp_dir().join(format!("tt-svc-{}", uuid::Uuid::new_v4()));
        SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap()
    }

    /// The service over `tables`, with a room alice owns.
    pub async fn chat_on(tables: Tables) -> (Chat, RoomId) {
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let room = chat
            .rooms
            .create_room(
                &alice(),
                NewRoom {
                    name: "r".into(),
                    description: None,
                    visibility: crate::rooms::Visibility::Public,
                },
            )
            .await
            .unwrap();
        (chat, RoomId::parse(&room.id).unwrap())
    }
}
