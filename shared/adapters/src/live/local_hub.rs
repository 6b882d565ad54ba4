//! A Web PubSub-compatible hub inside the self-hosted server, used when no Azure Web PubSub is
//! configured: `negotiate` hands out a URL on the server itself, and the connection speaks
//! `json.webpubsub.azure.v1` or `json.reliable.webpubsub.azure.v1` (the official client's
//! default), so a front-end works unchanged against either (the
//! Web PubSub client protocols as Microsoft documents them).
//!
//! It verifies the same JWT the service would (HS256 with this process's random key, so a
//! restart invalidates old URLs and clients negotiate again), answers joinGroup/leaveGroup
//! with role checks and acks, and delivers group signals as server messages — numbered with
//! `sequenceId` on the reliable protocol. Connections are never recovered: the `connected`
//! message carries no reconnection token, so after a drop the official client opens a fresh
//! connection and rejoins its groups; live signals are nudges and the change feed fills any
//! gap. A client too slow to take its frames is disconnected rather than buffered without end.
//!
//! The transport (the WebSocket itself) belongs to the HTTP layer; this module is the protocol
//! and the registry of connections and groups.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tabletalk_clock::{Clock as _, SystemClock};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;

use tabletalk_domain::error::{Error, Result};

pub const JSON_PROTOCOL: &str = "json.webpubsub.azure.v1";
pub const RELIABLE_PROTOCOL: &str = "json.reliable.webpubsub.azure.v1";
/// Frames waiting for one connection before it counts as too slow and is dropped.
const QUEUE_FRAMES: usize = 256;
/// Ack ids remembered per connection to answer `Duplicate`.
const REMEMBERED_ACKS: usize = 10_000;

/// The hub: its signing key and who is connected to which group. A std mutex, never held
/// across an await.
pub struct LocalHub {
    hub: String,
    key: String,
    state: Mutex<State>,
    next_connection: AtomicU64,
}

impl std::fmt::Debug for LocalHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalHub")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// What this hub's connection ids start with, `local-<random tag>-`: ids of two processes
    /// on one store never meet (who looks at a room is kept by connection id in the store).
    prefix: String,
    connections: HashMap<u64, Connection>,
    groups: HashMap<String, HashSet<u64>>,
    /// When each (user, group) was revoked (unix seconds): a token issued before then may no
    /// longer join that group.
    revoked: HashMap<(String, String), i64>,
    /// Open connections per user, for presence.
    users: HashMap<String, usize>,
    /// Where connection openings and closings of users go, once someone watches
    /// ([`LocalHub::watch`]): the service keeps presence from them.
    watcher: Option<mpsc::UnboundedSender<HubEvent>>,
}

/// A user's connection opened or closed, as [`LocalHub::watch`] reports it. `connection` is
/// unique in this hub (not across processes: the watcher qualifies it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    Opened { user: String, connection: String },
    Closed { user: String, connection: String },
}

struct Connection {
    user: Option<String>,
    frames: mpsc::Sender<Arc<str>>,
    groups: HashSet<String>,
}

/// The claims a Web PubSub client token carries.
#[derive(Deserialize)]
struct Claims {
    aud: Option<String>,
    #[serde(default)]
    iat: i64,
    sub: Option<String>,
    #[serde(default)]
    role: Vec<String>,
    #[serde(default, rename = "webpubsub.group")]
    groups: Vec<String>,
}

/// What a client sends (the subprotocol's messages). Anything else is ignored.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
enum Request {
    JoinGroup { group: String, ack_id: Option<u64> },
    LeaveGroup { group: String, ack_id: Option<u64> },
    SendToGroup { ack_id: Option<u64> },
    Event { ack_id: Option<u64> },
    SequenceAck {},
    Ping {},
    Invoke { invocation_id: String },
}

impl LocalHub {
    pub fn new(hub: &str) -> LocalHub {
        let key: [u8; 32] = rand::random();
        LocalHub {
            hub: hub.to_owned(),
            key: key.iter().map(|b| format!("{b:02x}")).collect(),
            state: Mutex::new(State {
                prefix: format!("local-{:08x}-", rand::random::<u32>()),
                ..State::default()
            }),
            next_connection: AtomicU64::new(1),
        }
    }

    pub fn hub(&self) -> &str {
        &self.hub
    }

    /// A client URL on `endpoint` (`http(s)://host[:port]` of this server) for `user`.
    pub fn client_url(
        &self,
        endpoint: &str,
        user: &str,
        rooms: &[String],
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>)> {
        super::web_pubsub::client_url(&self.key, endpoint, &self.hub, user, rooms, now)
    }

    /// Opens a connection for a client token: the session that answers its frames, and the
    /// queue of group messages for it.
    pub fn connect(self: &Arc<Self>, token: &str, protocol: &str) -> Result<(Session, mpsc::Receiver<Arc<str>>)> {
        let claims = self.verify(token)?;
        let number = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let (frames, queue) = mpsc::channel(QUEUE_FRAMES);
        let mut state = self.state.lock().expect("hub lock");
        if let Some(user) = &claims.sub {
            *state.users.entry(user.clone()).or_default() += 1;
            let connection = state.connection_id(number);
            state.report(HubEvent::Opened {
                user: user.clone(),
                connection,
            });
        }
        state.connections.insert(
            number,
            Connection {
                user: claims.sub.clone(),
                frames,
                groups: HashSet::new(),
            },
        );
        for group in claims.groups.iter().filter(|g| valid_group(g)) {
            state.join(number, group);
        }
        let id = state.connection_id(number);
        drop(state);
        let session = Session {
            hub: Arc::clone(self),
            number,
            id,
            user: claims.sub,
            issued_at: claims.iat,
            roles: claims.role,
            reliable: protocol == RELIABLE_PROTOCOL,
            sequence: 0,
            acks: HashSet::new(),
        };
        Ok((session, queue))
    }

    fn verify(&self, token: &str) -> Result<Claims> {
        let unauthorized = || Error::Unauthorized("invalid or expired access token".into());
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp"]);
        let key = jsonwebtoken::DecodingKey::from_secret(self.key.as_bytes()).map_err(|_| unauthorized())?;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|_| unauthorized())?
            .claims;
        let suffix = format!("/client/hubs/{}", self.hub);
        match &claims.aud {
            Some(aud) if !aud.ends_with(&suffix) => Err(unauthorized()),
            _ => Ok(claims),
        }
    }

    /// Queues `data` (JSON) for every connection in `group`; a connection whose queue is full
    /// is dropped.
    pub fn send_to_group(&self, group: &str, data: &[u8]) {
        let Ok(data) = std::str::from_utf8(data) else {
            return;
        };
        let data: Arc<str> = Arc::from(data);
        let mut state = self.state.lock().expect("hub lock");
        let members: Vec<u64> = state.groups.get(group).into_iter().flatten().copied().collect();
        for number in members {
            let full = state
                .connections
                .get(&number)
                .is_some_and(|c| c.frames.try_send(Arc::clone(&data)).is_err());
            if full {
                tracing::info!(connection = number, "a live connection fell behind and is dropped");
                state.remove(number);
            }
        }
    }

    /// Queues `data` (JSON) for every connection of `user`; a connection whose queue is full
    /// is dropped.
    pub fn send_to_user(&self, user: &str, data: &[u8]) {
        let Ok(data) = std::str::from_utf8(data) else {
            return;
        };
        let data: Arc<str> = Arc::from(data);
        let mut state = self.state.lock().expect("hub lock");
        let theirs: Vec<u64> = state
            .connections
            .iter()
            .filter(|(_, c)| c.user.as_deref() == Some(user))
            .map(|(number, _)| *number)
            .collect();
        for number in theirs {
            let full = state
                .connections
                .get(&number)
                .is_some_and(|c| c.frames.try_send(Arc::clone(&data)).is_err());
            if full {
                state.remove(number);
            }
        }
    }

    /// Takes `user`'s connections out of `group` and keeps tokens issued until now from joining
    /// it again (a member who left or was removed).
    pub fn revoke(&self, user: &str, group: &str) {
        let mut state = self.state.lock().expect("hub lock");
        let now = SystemClock.now().timestamp();
        if state.revoked.len() > 10_000 {
            let horizon = now - super::web_pubsub::CLIENT_TOKEN_TTL.num_seconds();
            state.revoked.retain(|_, at| *at > horizon);
        }
        state.revoked.insert((user.to_owned(), group.to_owned()), now);
        let theirs: Vec<u64> = state
            .connections
            .iter()
            .filter(|(_, c)| c.user.as_deref() == Some(user))
            .map(|(number, _)| *number)
            .collect();
        for number in theirs {
            state.leave(number, group);
        }
    }

    /// Puts the connection `connection` (its id as the `connected` message gave it) in
    /// `group`, when it is open and `user`'s: the server's own doing after it checked the
    /// membership, so no revocation applies (a member who rejoined is let in again).
    pub fn add_connection(&self, connection: &str, user: &str, group: &str) -> bool {
        let mut state = self.state.lock().expect("hub lock");
        let Some(number) = state.connection_number(connection) else {
            return false;
        };
        let theirs = state
            .connections
            .get(&number)
            .is_some_and(|c| c.user.as_deref() == Some(user));
        if theirs && valid_group(group) {
            state.join(number, group);
        }
        theirs
    }

    /// Whether the connection `connection` is open and `user`'s.
    pub fn is_open(&self, connection: &str, user: &str) -> bool {
        let state = self.state.lock().expect("hub lock");
        state
            .connection_number(connection)
            .and_then(|number| state.connections.get(&number))
            .is_some_and(|c| c.user.as_deref() == Some(user))
    }

    /// Takes the connection `connection` out of `group`.
    pub fn remove_connection(&self, connection: &str, group: &str) {
        let mut state = self.state.lock().expect("hub lock");
        if let Some(number) = state.connection_number(connection) {
            state.leave(number, group);
        }
    }

    /// Every user connection opened or closed from now on, in order (under the hub's lock,
    /// so a close never overtakes its open). A second watcher replaces the first.
    pub fn watch(&self) -> mpsc::UnboundedReceiver<HubEvent> {
        let (events, receiver) = mpsc::unbounded_channel();
        self.state.lock().expect("hub lock").watcher = Some(events);
        receiver
    }

    /// Whether `user` has a connection open.
    pub fn user_connected(&self, user: &str) -> bool {
        let state = self.state.lock().expect("hub lock");
        state.users.contains_key(user)
    }
}

impl State {
    fn join(&mut self, number: u64, group: &str) {
        if let Some(connection) = self.connections.get_mut(&number) {
            connection.groups.insert(group.to_owned());
            self.groups.entry(group.to_owned()).or_default().insert(number);
        }
    }

    fn leave(&mut self, number: u64, group: &str) {
        if let Some(connection) = self.connections.get_mut(&number) {
            connection.groups.remove(group);
        }
        if let Some(members) = self.groups.get_mut(group) {
            members.remove(&number);
            if members.is_empty() {
                self.groups.remove(group);
            }
        }
    }

    /// Tells the watcher, if any (a watcher gone away is forgotten).
    fn report(&mut self, event: HubEvent) {
        if let Some(watcher) = &self.watcher
            && watcher.send(event).is_err()
        {
            self.watcher = None;
        }
    }

    fn remove(&mut self, number: u64) {
        if let Some(connection) = self.connections.remove(&number) {
            if let Some(user) = &connection.user {
                let connection = self.connection_id(number);
                self.report(HubEvent::Closed {
                    user: user.clone(),
                    connection,
                });
            }
            if let Some(user) = &connection.user
                && let Some(count) = self.users.get_mut(user)
            {
                *count -= 1;
                if *count == 0 {
                    self.users.remove(user);
                }
            }
            for group in &connection.groups {
                if let Some(members) = self.groups.get_mut(group) {
                    members.remove(&number);
                    if members.is_empty() {
                        self.groups.remove(group);
                    }
                }
            }
        }
    }
}

impl State {
    /// The id of this hub's connection `number`: `local-<tag>-<n>`.
    fn connection_id(&self, number: u64) -> String {
        format!("{}{number}", self.prefix)
    }

    /// The number of one of this hub's connection ids (another hub's is none).
    fn connection_number(&self, connection: &str) -> Option<u64> {
        connection.strip_prefix(self.prefix.as_str())?.parse().ok()
    }
}

/// 1–1024 characters, not whitespace only (Web PubSub's rule for group names).
fn valid_group(group: &str) -> bool {
    !group.trim().is_empty() && group.chars().count() <= 1024
}

/// One open connection: answers its frames and numbers what it is sent. Leaving the hub when
/// dropped.
pub struct Session {
    hub: Arc<LocalHub>,
    number: u64,
    id: String,
    user: Option<String>,
    /// When the token was issued (unix seconds), against revocations.
    issued_at: i64,
    roles: Vec<String>,
    reliable: bool,
    sequence: u64,
    acks: HashSet<u64>,
}

impl Session {
    /// The connection's id, as its `connected` message gives it.
    pub fn connection_id(&self) -> &str {
        &self.id
    }

    /// The connection's user (the token's subject), if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The `connected` system message, sent first.
    pub fn connected(&self) -> String {
        json!({ "type": "system", "event": "connected", "userId": self.user, "connectionId": self.id }).to_string()
    }

    /// The frame delivering a group signal (`data`, JSON) to this connection.
    pub fn server_message(&mut self, data: &str) -> String {
        let sequence = if self.reliable {
            self.sequence += 1;
            format!(r#","sequenceId":{}"#, self.sequence)
        } else {
            String::new()
        };
        format!(r#"{{"type":"message","from":"server","dataType":"json","data":{data}{sequence}}}"#)
    }

    /// Answers one text frame from the client (an ack, a pong, or nothing).
    pub fn handle(&mut self, frame: &str) -> Option<String> {
        let Ok(request) = serde_json::from_str::<Request>(frame) else {
            tracing::debug!(connection = %self.id, "an unknown frame was ignored");
            return None;
        };
        match request {
            Request::JoinGroup { group, ack_id } | Request::LeaveGroup { group, ack_id } if !self.granted(&group) => {
                self.ack(
                    ack_id,
                    Err(("Forbidden", format!("not allowed to join or leave {group}"))),
                )
            }
            Request::JoinGroup { group, ack_id } => {
                let duplicate = ack_id.is_some_and(|id| self.acks.contains(&id));
                let joined = duplicate || {
                    // The revocation check and the join under one lock, so a revoke cannot
                    // land between them.
                    let mut state = self.hub.state.lock().expect("hub lock");
                    let revoked = self.user.as_ref().is_some_and(|user| {
                        state
                            .revoked
                            .get(&(user.clone(), group.clone()))
                            .is_some_and(|at| *at >= self.issued_at)
                    });
                    if !revoked {
                        state.join(self.number, &group);
                    }
                    !revoked
                };
                match joined {
                    true => self.ack(ack_id, Ok(())),
                    false => self.ack(ack_id, Err(("Forbidden", format!("no longer allowed to join {group}")))),
                }
            }
            Request::LeaveGroup { group, ack_id } => {
                let duplicate = ack_id.is_some_and(|id| self.acks.contains(&id));
                if !duplicate {
                    self.hub.state.lock().expect("hub lock").leave(self.number, &group);
                }
                self.ack(ack_id, Ok(()))
            }
            Request::SendToGroup { ack_id } => {
                self.ack(ack_id, Err(("Forbidden", "clients may not send to groups here".into())))
            }
            Request::Event { ack_id } => self.ack(ack_id, Err(("Forbidden", "this hub takes no events".into()))),
            Request::SequenceAck {} => None,
            Request::Ping {} => Some(json!({ "type": "pong" }).to_string()),
            Request::Invoke { invocation_id } => Some(
                json!({
                    "type": "invokeResponse",
                    "invocationId": invocation_id,
                    "success": false,
                    "error": { "name": "Forbidden", "message": "this hub takes no invocations" }
                })
                .to_string(),
            ),
        }
    }

    /// Whether the token's roles allow joining and leaving `group`.
    fn granted(&self, group: &str) -> bool {
        let scoped = format!("webpubsub.joinLeaveGroup.{group}");
        valid_group(group)
            && self
                .roles
                .iter()
                .any(|role| role == "webpubsub.joinLeaveGroup" || *role == scoped)
    }

    /// The ack for `ack_id` (none without one); a repeated id is answered `Duplicate`.
    fn ack(&mut self, ack_id: Option<u64>, outcome: std::result::Result<(), (&str, String)>) -> Option<String> {
        let ack_id = ack_id?;
        if !self.acks.insert(ack_id) {
            return Some(ack_failure(ack_id, "Duplicate", "the ackId was used before"));
        }
        if self.acks.len() > REMEMBERED_ACKS {
            self.acks.clear();
        }
        Some(match outcome {
            Ok(()) => json!({ "type": "ack", "ackId": ack_id, "success": true }).to_string(),
            Err((name, message)) => ack_failure(ack_id, name, &message),
        })
    }
}

fn ack_failure(ack_id: u64, name: &str, message: &str) -> String {
    json!({ "type": "ack", "ackId": ack_id, "success": false, "error": { "name": name, "message": message } })
        .to_string()
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(mut state) = self.hub.state.lock() {
            state.remove(self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_for(hub: &LocalHub, user: &str, rooms: &[&str]) -> String {
        let rooms: Vec<String> = rooms.iter().map(|r| r.to_string()).collect();
        let (url, _) = hub
            .client_url("http://localhost:7071", user, &rooms, Utc::now())
            .unwrap();
        url.split_once("access_token=").unwrap().1.to_owned()
    }

    fn ack(frame: Option<String>) -> serde_json::Value {
        serde_json::from_str(&frame.expect("an ack")).unwrap()
    }

    #[tokio::test]
    async fn joins_only_its_rooms_and_receives_their_signals_in_order() {
        let hub = Arc::new(LocalHub::new("chat"));
        let token = token_for(&hub, "bob", &["r1"]);
        let (mut session, mut queue) = hub.connect(&token, RELIABLE_PROTOCOL).unwrap();
        let connected: serde_json::Value = serde_json::from_str(&session.connected()).unwrap();
        assert_eq!(connected["userId"], "bob");
        assert!(connected.get("reconnectionToken").is_none());

        let joined = ack(session.handle(r#"{"type":"joinGroup","group":"room.r1","ackId":1}"#));
        assert_eq!(joined["success"], true);
        let refused = ack(session.handle(r#"{"type":"joinGroup","group":"room.r2","ackId":2}"#));
        assert_eq!(refused["error"]["name"], "Forbidden");
        let again = ack(session.handle(r#"{"type":"joinGroup","group":"room.r1","ackId":1}"#));
        assert_eq!(again["error"]["name"], "Duplicate");
        assert!(hub.user_connected("bob") && !hub.user_connected("carol"));

        hub.send_to_group("room.r1", br#"{"n":1}"#);
        hub.send_to_group("room.r2", br#"{"n":2}"#);
        hub.send_to_group("room.r1", br#"{"n":3}"#);
        let frames: Vec<serde_json::Value> = [queue.recv().await.unwrap(), queue.recv().await.unwrap()]
            .iter()
            .map(|data| serde_json::from_str(&session.server_message(data)).unwrap())
            .collect();
        assert_eq!(frames[0]["data"]["n"], 1);
        assert_eq!(frames[0]["from"], "server");
        assert_eq!(frames[0]["sequenceId"], 1);
        assert_eq!(frames[1]["data"]["n"], 3);
        assert_eq!(frames[1]["sequenceId"], 2);
        assert!(queue.try_recv().is_err(), "nothing from a room it is not in");

        let left = ack(session.handle(r#"{"type":"leaveGroup","group":"room.r1","ackId":3}"#));
        assert_eq!(left["success"], true);
        hub.send_to_group("room.r1", br#"{"n":4}"#);
        assert!(queue.try_recv().is_err());
        assert_eq!(
            session.handle(r#"{"type":"ping"}"#).as_deref(),
            Some(r#"{"type":"pong"}"#)
        );
        let sent = ack(session.handle(r#"{"type":"sendToGroup","group":"room.r1","ackId":4,"data":{}}"#));
        assert_eq!(sent["error"]["name"], "Forbidden");

        drop(session);
        assert!(!hub.user_connected("bob"));
    }

    /// A member who left is taken out of the group, and their old token cannot rejoin it.
    #[tokio::test]
    async fn a_revoked_member_leaves_the_group_and_cannot_rejoin() {
        let hub = Arc::new(LocalHub::new("chat"));
        let (mut session, mut queue) = hub.connect(&token_for(&hub, "bob", &["r1"]), JSON_PROTOCOL).unwrap();
        session.handle(r#"{"type":"joinGroup","group":"room.r1","ackId":1}"#);
        hub.revoke("bob", "room.r1");
        hub.send_to_group("room.r1", b"{}");
        assert!(queue.try_recv().is_err(), "no longer in the group");
        let again = ack(session.handle(r#"{"type":"joinGroup","group":"room.r1","ackId":2}"#));
        assert_eq!(again["error"]["name"], "Forbidden");
    }

    /// With no join roles the client cannot join any group itself; the server puts its
    /// connection in one, and only a connection of the user it names.
    #[tokio::test]
    async fn the_server_adds_a_connection_to_a_group_the_token_cannot_join() {
        let hub = Arc::new(LocalHub::new("chat"));
        let (mut session, mut queue) = hub.connect(&token_for(&hub, "bob", &[]), JSON_PROTOCOL).unwrap();
        let connected: serde_json::Value = serde_json::from_str(&session.connected()).unwrap();
        let id = connected["connectionId"].as_str().unwrap().to_owned();
        let refused = ack(session.handle(r#"{"type":"joinGroup","group":"room.r1","ackId":1}"#));
        assert_eq!(refused["error"]["name"], "Forbidden");
        assert!(!hub.add_connection(&id, "carol", "room.r1"), "not carol's connection");
        assert!(!hub.add_connection("local-999", "bob", "room.r1"), "no such connection");
        assert!(hub.add_connection(&id, "bob", "room.r1"));
        hub.send_to_group("room.r1", br#"{"n":1}"#);
        assert_eq!(&*queue.recv().await.unwrap(), r#"{"n":1}"#);
        hub.remove_connection(&id, "room.r1");
        hub.send_to_group("room.r1", br#"{"n":2}"#);
        assert!(queue.try_recv().is_err(), "out of the group again");
    }

    #[test]
    fn foreign_and_expired_tokens_are_refused() {
        let hub = Arc::new(LocalHub::new("chat"));
        let other = LocalHub::new("chat");
        assert!(hub.connect(&token_for(&other, "bob", &[]), JSON_PROTOCOL).is_err());
        let (url, _) = hub
            .client_url("http://localhost", "bob", &[], Utc::now() - chrono::Duration::hours(2))
            .unwrap();
        let expired = url.split_once("access_token=").unwrap().1;
        assert!(hub.connect(expired, JSON_PROTOCOL).is_err());
        assert!(hub.connect("not-a-token", JSON_PROTOCOL).is_err());
    }

    /// The watcher hears each user connection open and close, in order; tabs are separate.
    #[tokio::test]
    async fn a_watcher_hears_every_user_connection_open_and_close() {
        let hub = Arc::new(LocalHub::new("chat"));
        let mut events = hub.watch();
        let first = hub.connect(&token_for(&hub, "bob", &[]), JSON_PROTOCOL).unwrap();
        let second = hub.connect(&token_for(&hub, "bob", &[]), JSON_PROTOCOL).unwrap();
        drop(first);
        drop(second);
        let heard: Vec<HubEvent> = std::iter::from_fn(|| events.try_recv().ok()).collect();
        let [
            HubEvent::Opened { connection: a, .. },
            HubEvent::Opened { connection: b, .. },
            HubEvent::Closed { connection: c, .. },
            HubEvent::Closed { connection: d, user },
        ] = heard.as_slice()
        else {
            panic!("open, open, close, close: {heard:?}");
        };
        assert_ne!(a, b);
        assert_eq!((a, b, user.as_str()), (c, d, "bob"));
    }

    #[tokio::test]
    async fn a_connection_that_falls_behind_is_dropped() {
        let hub = Arc::new(LocalHub::new("chat"));
        let (mut session, queue) = hub.connect(&token_for(&hub, "bob", &["r1"]), JSON_PROTOCOL).unwrap();
        session.handle(r#"{"type":"joinGroup","group":"room.r1"}"#);
        for _ in 0..=QUEUE_FRAMES {
            hub.send_to_group("room.r1", b"{}");
        }
        assert!(!hub.user_connected("bob"));
        drop(queue);
    }
}
