//! The tables tabletalk uses and what each partition holds. Names are configuration: a prefix
//! lets deployments share one storage account.
//!
//! - `Messages` (partition = room): message rows keyed by reverse tick (all digits, newest
//!   first), and, after them in key order, the idempotency records of the room's sends
//!   (`idem:<user>:<clientId>`), so a message and its record commit in one transaction.
//!   Replies add a thread index row in the same transaction (`thread:<root>:<reply ascending
//!   key>`), so a thread is one range read, oldest reply first.
//!   The room's version counter (`seq`) and one change-feed row per message at its newest
//!   version (`v:<version>`) live here too, so a change and its version commit together.
//!   Each follower of a thread has a row `follow:<root>:<user>`, so a reply's push reads its
//!   thread's followers in one range read, and a replier's own row commits with their reply.
//!   Each pinned message has a pin index row `pin:<message key>`, written and deleted in the
//!   transaction that sets and clears its pin flag, so the room's pins are one range read.
//!   The room's activity row (`!activity`: the newest message's preview) sorts before every
//!   message, so the room list reads it in the same range read as a member's unread messages,
//!   and it is written in the transaction of the message it shows (`store::activity`).
//!   Each member's tally (`tally:<user>`: messages sent, days active) is here too, counted
//!   in the transaction of each message they send (`store::tally`).
//!   The word index lives here too: one row per term bucket and message
//!   (`w:<bucket> <message key>`), written in the transaction of the message (`store::words`).
//! - `MessagesAscending` (partition = room): key-only index rows keyed by forward tick.
//! - `MessagesMetadata` (partition = room): per-user companion rows of a message, keyed
//!   `<message key>:r:<emoji>:<user>` (a reaction) and `<message key>:v:<user>` (a poll vote),
//!   so one range read covers a page of messages and concurrent voters never write the same
//!   row; and each message's notification claim, `<message key>:n`.
//! - `Rooms` (partition = room): the room row (`room`), one row per member (`m:<user>`), role
//!   (`r:<role id>`) and ban (`ban:<user>`), so a room and its owner are created in one
//!   transaction. The moderation log lives here too (`log:<entry id>`, newest first), so a
//!   moderation action on these rows and its log line commit together; and reports: one row
//!   per member's report (`report:<message id>:<user>`) and one per reported message, while
//!   its reports are open (`reports:open:<message id>`) and once resolved
//!   (`reports:closed:<message id>`). Invitations are rows there too (`inv:<invitation id>`),
//!   so accepting one can check it next to the member and ban rows it concerns. Inbound
//!   webhooks are rows there too (`hook:<webhook id>`), so a room's deletion takes them along.
//! - `UserRooms` (partition = user): one row per room the user belongs to, for "my rooms"
//!   (keyed by room id, a UUID), and after them one row per invitation waiting for the user
//!   (`inv:<room id>`) and one per thread they follow (`thr:<room id>:<root id>`, with their
//!   read position in it), so "my threads" is one range read.
//! - `UserHistory` (partition = user): one row per room the user has ever been a member of,
//!   with their first join, written once when they first join and kept when they leave, so an
//!   erasure finds every room that can hold their messages without a write per send.
//! - `PushSubscriptions` (partition = user, row = SHA-256 of the endpoint): Web Push
//!   subscriptions, and after them the user's do-not-disturb (`~dnd`), so the notifier reads
//!   both in the one partition read it makes per recipient.
//! - `Housekeeping`: partition `rooms` has one row per room, so the housekeeping timer finds
//!   every room without scanning the room-partitioned tables; partition `outbox` one row per
//!   room that may hold pending events (`outbox:<message id>` rows in its `Messages` partition,
//!   and `outbox:<message id>:fanout` for a fan-out still running); partition `directory` one
//!   row per public room (`<sort key>:<room id>`, see `store::directory`); partition `erasures`
//!   one row per user who asked to be erased (the job's state and checkpoint), so the timer
//!   finds every unfinished erasure in one partition read; partition `uploads` one row per
//!   upload link handed out (`store::uploads`), so housekeeping finds unattached uploads;
//!   partition `scheduled` every scheduled message (`item:<room>:<user>:<id>`) and, while it
//!   is pending, its due-time index row (`due:<Unix ms>:<id>`), so a timer run reads only what
//!   is due, and an item and its index row change in one transaction; once finished, an
//!   expiry row (`done:<Unix ms>:<id>`) by which housekeeping removes it a week later.
//! - `MessagesMetadata` also holds each upload of the room (`upload:<id>`, see
//!   `store::uploads`).
//! - `MessagesMetadata` also holds a message's link preview (`<message key>:p`, a companion
//!   row: one range read with the reactions, deleted with them), or the author's removal of it.
//!   `Housekeeping` partition `previews` holds one row per preview still to be fetched
//!   (`<room>:<message key>`), so a fetch a crash interrupted is made again by the timer, and
//!   partition `linkcache` one row per fetched URL (the SHA-256 of the URL, with when it was
//!   fetched and what it gave, nothing for a failed fetch), so a URL is fetched once a while.
//! - `Limits`: the state of the limits against abuse (`crate::service::limits`). Partition
//!   `user:<user>` holds that user's write bucket (`writes`); partition `room:<room>` the room's
//!   send ceiling (`sends`), each member's own bucket below the top trust level (`member:<user>`) and the repeat-text
//!   records (`text:<user>:<SHA-256 of the normalised text>`, with when it was sent).
//!   Housekeeping expires the room's records; deleting a room deletes its partition.
//! - Tiered live delivery (`store::live`): in a room's `Rooms` partition, one row per live
//!   connection showing the room (`live:v:<connection id>`) and one per member due a notice
//!   (`live:a:<user>`), so a send finds everyone it must tell in one range read; in a user's
//!   `UserRooms` partition, the room each of their connections shows (`view:<connection id>`).
//! - `Presence` (partition = user): one row per open live connection (`c:<connection id>`,
//!   on the local hub `<process>.<number>`, on Azure the service's id), so two processes or
//!   duplicate events never share a counter; and the user's presence row (`state`: online or
//!   away, last seen, custom status), which changes only by a conditional write after the
//!   connection rows were read, so of two processes settling at once the one that flips the
//!   state announces it (`store::presence`). `Housekeeping`'s partition `hubs` holds one
//!   heartbeat row per running local hub (a process's random tag, `aliveUntil`), and
//!   partition `hub:<tag>` one row per connection open on that hub, so the connections of a
//!   process that died are found and closed without scanning every user.
//!
//! Every row key is made by a function here; user ids go into keys through [`user_key`].

use sha2::{Digest, Sha256};

use tabletalk_domain::ids::{ClientId, RoomId, UserId};
use tabletalk_domain::keys::{AscendingKey, MessageKey};
use tabletalk_domain::limits::BucketId;
use tabletalk_tables::rules::is_forbidden_key_char;
use tabletalk_tables::{Result, TableName, Tables};

/// The `Housekeeping` partition listing every room.
pub const HOUSEKEEPING_PARTITION: &str = "rooms";
/// The `Housekeeping` partition marking rooms that may hold pending outbox events.
pub const OUTBOX_PARTITION: &str = "outbox";
/// The `Housekeeping` partition listing public rooms by name.
pub const DIRECTORY_PARTITION: &str = "directory";
/// The `Housekeeping` partition listing every upload link handed out, oldest first.
pub const UPLOADS_PARTITION: &str = "uploads";
/// The prefix of upload rows in a room's `MessagesMetadata` partition.
pub const UPLOAD_PREFIX: &str = "upload:";
/// Prefix of invitation rows, in a `Rooms` partition and in a `UserRooms` partition. Sorts
/// after every room id (a UUID), so "my rooms" reads end before it.
pub const INVITATION_PREFIX: &str = "inv:";
/// The `Housekeeping` partition holding one erasure job per user.
pub const ERASURE_PARTITION: &str = "erasures";
/// The `Housekeeping` partition holding every scheduled message and its due-time index row.
pub const SCHEDULED_PARTITION: &str = "scheduled";
/// Prefix of scheduled message rows (`item:<room>:<user>:<id>`) in [`SCHEDULED_PARTITION`].
pub const SCHEDULED_ITEM_PREFIX: &str = "item:";
/// Prefix of due-time index rows (`due:<20-digit Unix ms>:<id>`) in [`SCHEDULED_PARTITION`].
pub const SCHEDULED_DUE_PREFIX: &str = "due:";
/// Prefix of expiry rows of finished scheduled messages (`done:<20-digit Unix ms>:<id>`).
pub const SCHEDULED_DONE_PREFIX: &str = "done:";
/// Prefix of word index rows in a `Messages` partition (`store::words`).
pub const WORD_PREFIX: &str = "w:";
/// Prefix of outbox rows (a send's pending event) in a `Messages` partition.
pub const OUTBOX_PREFIX: &str = "outbox:";
/// The `Housekeeping` partition of link previews still to be fetched.
pub const PREVIEW_JOBS_PARTITION: &str = "previews";
/// The `Housekeeping` partition of fetched link previews, by URL.
pub const LINK_CACHE_PARTITION: &str = "linkcache";
/// The `Housekeeping` partition of where a sweep that reads a page per run goes on (row key:
/// the swept partition's name, e.g. [`LINK_CACHE_PARTITION`]).
pub const SWEEP_CURSORS_PARTITION: &str = "sweeps";
/// Row key of the room row in its `Rooms` partition.
pub const ROOM_ROW: &str = "room";
/// Prefix of member rows in a `Rooms` partition.
pub const MEMBER_PREFIX: &str = "m:";
/// Prefix of role rows in a `Rooms` partition.
pub const ROLE_PREFIX: &str = "r:";
/// Prefix of ban rows in a `Rooms` partition.
pub const BAN_PREFIX: &str = "ban:";
/// Prefix of the timeout a member had when their membership ended, in a `Rooms` partition: a
/// timeout outlives leaving and rejoining, as a ban does.
pub const TIMEOUT_PREFIX: &str = "timeout:";
/// Prefix of moderation log rows in a `Rooms` partition.
pub const LOG_PREFIX: &str = "log:";
/// Prefix of one member's report of a message in a `Rooms` partition.
pub const REPORT_PREFIX: &str = "report:";
/// Prefix of the open report groups (one per reported message) in a `Rooms` partition.
pub const OPEN_REPORTS_PREFIX: &str = "reports:open:";
/// Prefix of the resolved report groups in a `Rooms` partition.
pub const CLOSED_REPORTS_PREFIX: &str = "reports:closed:";
/// Prefix of outgoing webhook rows in a `Rooms` partition (`outhook:<webhook id>`).
pub const OUTGOING_PREFIX: &str = "outhook:";
/// Prefix of an outgoing webhook's pending deliveries in a `Rooms` partition
/// (`odp:<delivery id>`, the id starting with the webhook's id).
pub const DELIVERY_PENDING_PREFIX: &str = "odp:";
/// Prefix of finished deliveries (delivered or abandoned),
/// `odd:<webhook id>.<20-digit u64::MAX - version>.<message id>`: newest change first, so a
/// listing reads the newest and pruning finds the oldest by a range.
pub const DELIVERY_DONE_PREFIX: &str = "odd:";
/// Prefix of outgoing webhook events in a room's `Messages` partition
/// (`hookq:<20-digit version>:<message id>`), committed with their change.
pub const HOOK_EVENT_PREFIX: &str = "hookq:";
/// The `Housekeeping` partition of rooms with outgoing webhooks (row key: the room id).
pub const OUTGOING_PARTITION: &str = "outhooks";
/// Prefix of inbound webhook rows in a `Rooms` partition (`hook:<webhook id>`).
pub const WEBHOOK_PREFIX: &str = "hook:";
/// Prefix of a room's own slash commands in its `Rooms` partition.
pub const SLASH_PREFIX: &str = "slash:";
/// Prefix of a room's own emoji in its `Rooms` partition.
pub const EMOJI_PREFIX: &str = "emoji:";
/// Prefix of idempotency records in a `Messages` partition.
pub const IDEMPOTENCY_PREFIX: &str = "idem:";
/// Row key of a room's version counter in its `Messages` partition.
pub const COUNTER_ROW: &str = "seq";
/// Prefix of thread follower rows in a `Messages` partition.
pub const FOLLOW_PREFIX: &str = "follow:";
/// Prefix of followed-thread rows in a `UserRooms` partition (after the invitations).
pub const FOLLOWED_PREFIX: &str = "thr:";
/// Row key of a room's activity row in its `Messages` partition: before every message key
/// (all digits), so one range read from it covers the newest messages too.
pub const ACTIVITY_ROW: &str = "!activity";
/// Row key of a user's do-not-disturb in their `PushSubscriptions` partition: after every
/// subscription key (hex digits).
pub const DO_NOT_DISTURB_ROW: &str = "~dnd";
/// Prefix of change-feed rows in a `Messages` partition (`v:<20-digit version>`).
pub const FEED_PREFIX: &str = "v:";
/// Prefix of thread index rows in a `Messages` partition.
pub const THREAD_PREFIX: &str = "thread:";
/// Prefix of pin index rows in a `Messages` partition (`pin:<message key>`).
pub const PIN_PREFIX: &str = "pin:";
/// Prefix of a member's tally row in a `Messages` partition (`store::tally`).
pub const TALLY_PREFIX: &str = "tally:";
/// Row key of a user's write bucket in their `Limits` partition.
pub const USER_BUCKET_ROW: &str = "writes";
/// Row key of a room's send ceiling in its `Limits` partition.
pub const ROOM_BUCKET_ROW: &str = "sends";
/// Prefix of members' own buckets in a room's `Limits` partition (below the top trust level).
pub const MEMBER_BUCKET_PREFIX: &str = "member:";
/// Prefix of repeat-text records in a room's `Limits` partition.
pub const RECENT_TEXT_PREFIX: &str = "text:";
/// The rows of who looks at a room (`Rooms`, partition = room).
pub const LOOKER_PREFIX: &str = "live:";
/// A connection showing the room.
pub const VIEWER_PREFIX: &str = "live:v:";
/// A member due a notice.
pub const ARMED_PREFIX: &str = "live:a:";
/// The room a connection of the user shows (`UserRooms`, partition = user).
pub const VIEW_PREFIX: &str = "view:";
/// Row key of a user's presence row in their `Presence` partition.
pub const PRESENCE_ROW: &str = "state";
/// Prefix of connection rows in a `Presence` partition.
pub const CONNECTION_PREFIX: &str = "c:";
/// The `Housekeeping` partition of local hubs' heartbeats (row = a process's tag).
pub const HUBS_PARTITION: &str = "hubs";
/// Prefix of the `Housekeeping` partitions listing a local hub's open connections.
pub const HUB_CONNECTIONS_PREFIX: &str = "hub:";

#[derive(Debug, Clone)]
pub struct Schema {
    pub messages: TableName,
    pub ascending: TableName,
    pub metadata: TableName,
    pub rooms: TableName,
    pub user_rooms: TableName,
    pub user_history: TableName,
    pub housekeeping: TableName,
    pub push_subscriptions: TableName,
    pub limits: TableName,
    pub presence: TableName,
}

impl Schema {
    pub fn with_prefix(prefix: &str) -> Result<Schema> {
        let name = |base: &str| TableName::parse(format!("{prefix}{base}"));
        Ok(Schema {
            messages: name("Messages")?,
            ascending: name("MessagesAscending")?,
            metadata: name("MessagesMetadata")?,
            rooms: name("Rooms")?,
            user_rooms: name("UserRooms")?,
            user_history: name("UserHistory")?,
            housekeeping: name("Housekeeping")?,
            push_subscriptions: name("PushSubscriptions")?,
            limits: name("Limits")?,
            presence: name("Presence")?,
        })
    }

    pub fn all(&self) -> [&TableName; 10] {
        [
            &self.messages,
            &self.ascending,
            &self.metadata,
            &self.rooms,
            &self.user_rooms,
            &self.housekeeping,
            &self.push_subscriptions,
            &self.user_history,
            &self.limits,
            &self.presence,
        ]
    }

    /// The tables partitioned by room: deleting a room empties its partition in each.
    pub fn room_partitioned(&self) -> [&TableName; 4] {
        [&self.messages, &self.ascending, &self.metadata, &self.rooms]
    }

    /// Creates every table that does not exist yet.
    pub async fn create_tables(&self, tables: &Tables) -> Result<()> {
        for table in self.all() {
            tables.create_table(table).await?;
        }
        Ok(())
    }
}

pub fn upload_key(id: &str) -> String {
    format!("{UPLOAD_PREFIX}{id}")
}

/// `<created, Unix ms, 13 digits>:<room>:<id>`: oldest first.
pub fn upload_index_key(created: chrono::DateTime<chrono::Utc>, room: &RoomId, id: &str) -> String {
    format!("{:013}:{room}:{id}", created.timestamp_millis().max(0))
}

pub fn claim_key(message: &MessageKey) -> String {
    format!("{}:n", message.as_str())
}

/// A message's link preview row (or its removal) in `MessagesMetadata`.
pub fn preview_key(message: &MessageKey) -> String {
    format!("{}:p", message.as_str())
}

/// A message's row for the thumbnail of its attachment `attachment`: a companion row.
pub fn thumbnail_row_key(message: &MessageKey, attachment: &str) -> String {
    format!("{}:t:{attachment}", message.as_str())
}

/// A preview still to be fetched, in [`PREVIEW_JOBS_PARTITION`].
pub fn preview_job_key(room: &RoomId, message: &MessageKey) -> String {
    format!("{}:{}", room.as_str(), message.as_str())
}

/// A URL's row in [`LINK_CACHE_PARTITION`]: the SHA-256 of the URL, so any URL makes a key.
pub fn link_cache_key(url: &str) -> String {
    Sha256::digest(url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn vote_key(message: &MessageKey, user: &UserId) -> String {
    format!("{}:v:{}", message.as_str(), user_key(user))
}

pub fn reaction_key(message: &MessageKey, emoji: &str, user: &UserId) -> String {
    // The emoji part must not contain the separator, so `:` is encoded too.
    let emoji = encode_key_part(emoji).replace(':', "%3A");
    format!("{}:r:{emoji}:{}", message.as_str(), user_key(user))
}

/// The feed row key of a version: fixed width, so key order is version order.
pub fn feed_key(version: u64) -> String {
    format!("{FEED_PREFIX}{version:020}")
}

/// The first key after every feed row.
pub fn feed_end() -> String {
    let mut end = FEED_PREFIX.to_owned();
    end.pop();
    end.push(';');
    end
}

/// The version a feed row key names.
pub fn feed_version(key: &str) -> Option<u64> {
    key.strip_prefix(FEED_PREFIX)?.parse().ok()
}

/// A connection id is checked to hold only key-safe characters before it is used.
pub fn viewer_key(connection: &str) -> String {
    format!("{VIEWER_PREFIX}{connection}")
}

pub fn armed_key(user: &UserId) -> String {
    format!("{ARMED_PREFIX}{}", user_key(user))
}

pub fn view_key(connection: &str) -> String {
    format!("{VIEW_PREFIX}{connection}")
}

/// The row of one live connection in its user's `Presence` partition.
pub fn connection_key(connection: &str) -> String {
    format!("{CONNECTION_PREFIX}{}", encode_key_part(connection))
}

pub fn member_key(user: &UserId) -> String {
    format!("{MEMBER_PREFIX}{}", user_key(user))
}

pub fn ban_key(user: &UserId) -> String {
    format!("{BAN_PREFIX}{}", user_key(user))
}

pub fn timeout_key(user: &UserId) -> String {
    format!("{TIMEOUT_PREFIX}{}", user_key(user))
}

/// Row key of a send's idempotency record: scoped to the sender, so client ids of different
/// users never meet. The user part has its `:` encoded too (its `%` already is), so the first
/// `:` after it ends it: user `a:b` with client id `c` and user `a` with `b:c` get different
/// keys.
pub fn idempotency_key(user: &UserId, client_id: &ClientId) -> String {
    let user = user_key(user).replace(':', "%3A");
    format!("{IDEMPOTENCY_PREFIX}{user}:{}", client_id.as_str())
}

/// Row key of a command's run record: an idempotency record (so it expires with them) whose
/// client id starts with `~`, which no send's client id has (nor may a key hold a `/`).
pub fn command_key(user: &UserId, client_id: &ClientId) -> String {
    let user = user_key(user).replace(':', "%3A");
    format!("{IDEMPOTENCY_PREFIX}{user}:~{}", client_id.as_str())
}

/// Row key of the later answers a room's own command run may give at its `response_url`,
/// by the digest of the URL's token: an idempotency record (so it expires with them) whose
/// user part starts `%~`, which no encoded user id does (its `%` is always followed by two hex
/// digits).
pub fn later_answers_key(token_hash: &str) -> String {
    format!("{IDEMPOTENCY_PREFIX}%~answers:{token_hash}")
}

/// Row key of a reply's thread index row: its root, then its own ascending key, so a thread is
/// one range read, oldest reply first.
pub fn thread_key(root: &str, reply: &AscendingKey) -> String {
    format!("{THREAD_PREFIX}{root}:{}", reply.as_str())
}

/// Row key of a pinned message's pin index row: its message key, so the room's pins are one
/// range read, newest message first, and the row commits with the message's pin flag.
pub fn pin_key(message: &MessageKey) -> String {
    format!("{PIN_PREFIX}{}", message.as_str())
}

/// The prefix of every follower row of the thread rooted at `root`.
pub fn followers_of(root: &str) -> String {
    format!("{FOLLOW_PREFIX}{root}:")
}

/// The row key of `user`'s tally in a room's `Messages` partition.
pub fn tally_key(user: &UserId) -> String {
    format!("{TALLY_PREFIX}{}", user_key(user))
}

pub fn follow_key(root: &str, user: &UserId) -> String {
    format!("{}{}", followers_of(root), user_key(user))
}

/// The row key, in the follower's `UserRooms` partition, of the thread `root` of `room`.
pub fn followed_key(room: &RoomId, root: &str) -> String {
    format!("{FOLLOWED_PREFIX}{room}:{root}")
}

pub fn outbox_key(message_id: &str) -> String {
    format!("{OUTBOX_PREFIX}{message_id}")
}

/// The row of an event whose delivery was answered before its fan-out ended: apart from the
/// send's own row, which the send deletes once the event is published, whatever becomes of
/// the fan-out.
pub fn fan_out_key(message_id: &str) -> String {
    format!("{OUTBOX_PREFIX}{message_id}:fanout")
}

/// The row, among a room's outbox rows, of a change of a message whose index work did not
/// all fit its transaction (`store::words`): the timer finds it as it finds pending events.
/// `change` (when the message changed) keeps two changes' jobs apart.
pub fn words_job_key(message_id: &str, change: &str) -> String {
    format!("{}:{change}", words_jobs_prefix(message_id))
}

/// The prefix of every job row of a message (`words_job_key`).
pub fn words_jobs_prefix(message_id: &str) -> String {
    format!("{OUTBOX_PREFIX}{message_id}:words")
}

/// The prefix of a word index bucket's rows in a `Messages` partition: a space ends the
/// bucket, below any character a term has.
pub fn word_bucket_prefix(bucket: &str) -> String {
    format!("{WORD_PREFIX}{} ", encode_key_part(bucket))
}

/// A message's row in a word index bucket.
pub fn word_key(bucket: &str, message: &MessageKey) -> String {
    format!("{}{}", word_bucket_prefix(bucket), message.as_str())
}

/// A public room's directory row key: its name's sort key, then its id.
pub fn directory_key(name: &str, room: &str) -> String {
    let sort_key = tabletalk_domain::rooms::directory::sort_key(name);
    format!("{}:{room}", encode_key_part(&sort_key))
}

/// An invitation's row key in its room's `Rooms` partition.
pub fn invitation_key(id: &str) -> String {
    format!("{INVITATION_PREFIX}{id}")
}

/// The row key, in the invited user's `UserRooms` partition, of their invitation into `room`.
pub fn pending_invitation_key(room: &RoomId) -> String {
    format!("{INVITATION_PREFIX}{room}")
}

pub fn log_key(entry_id: &str) -> String {
    format!("{LOG_PREFIX}{entry_id}")
}

/// The prefix of every report of one message.
pub fn reports_of(message: &MessageKey) -> String {
    format!("{REPORT_PREFIX}{}:", message.as_str())
}

pub fn report_key(message: &MessageKey, user: &UserId) -> String {
    format!("{}{}", reports_of(message), user_key(user))
}

pub fn open_reports_key(message: &MessageKey) -> String {
    format!("{OPEN_REPORTS_PREFIX}{}", message.as_str())
}

pub fn closed_reports_key(message: &MessageKey) -> String {
    format!("{CLOSED_REPORTS_PREFIX}{}", message.as_str())
}

/// The `Limits` partition and row of a bucket.
pub fn bucket_key(bucket: &BucketId) -> (String, String) {
    match bucket {
        BucketId::User(user) => (format!("user:{}", user_key(user)), USER_BUCKET_ROW.to_owned()),
        BucketId::Room(room) => (limits_room_partition(room), ROOM_BUCKET_ROW.to_owned()),
        BucketId::Member(room, user) => (
            limits_room_partition(room),
            format!("{MEMBER_BUCKET_PREFIX}{}", user_key(user)),
        ),
    }
}

/// A room's partition in `Limits`.
pub fn limits_room_partition(room: &RoomId) -> String {
    format!("room:{}", room.as_str())
}

/// Row key of a repeat-text record: the sender (its `:` encoded, as in idempotency keys), then
/// a digest of the normalised text, so any text makes a short, valid key.
pub fn recent_text_key(user: &UserId, fingerprint: &str) -> String {
    let digest = Sha256::digest(fingerprint.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{hex}", recent_texts_of(user))
}

/// The prefix of every repeat-text record of `user` in a room's `Limits` partition.
pub fn recent_texts_of(user: &UserId) -> String {
    let user = user_key(user).replace(':', "%3A");
    format!("{RECENT_TEXT_PREFIX}{user}:")
}

pub fn emoji_key(name: &str) -> String {
    format!("{EMOJI_PREFIX}{name}")
}

pub fn slash_key(name: &str) -> String {
    format!("{SLASH_PREFIX}{name}")
}

pub fn webhook_key(id: &str) -> String {
    format!("{WEBHOOK_PREFIX}{id}")
}

/// The prefix of `user`'s scheduled messages in `room` (the user's `:` encoded, as in
/// idempotency keys, so the next `:` ends it).
pub fn scheduled_items_of(room: &RoomId, user: &UserId) -> String {
    let user = user_key(user).replace(':', "%3A");
    format!("{SCHEDULED_ITEM_PREFIX}{room}:{user}:")
}

pub fn scheduled_item_key(room: &RoomId, user: &UserId, id: &str) -> String {
    format!("{}{id}", scheduled_items_of(room, user))
}

/// A due-time index row: fixed width, so key order is time order and everything due by a
/// time is one range read from the start of the prefix.
pub fn scheduled_due_key(send_at: chrono::DateTime<chrono::Utc>, id: &str) -> String {
    format!("{SCHEDULED_DUE_PREFIX}{:020}:{id}", send_at.timestamp_millis().max(0))
}

/// The first due-row key after every item due at or before `now`.
pub fn scheduled_due_end(now: chrono::DateTime<chrono::Utc>) -> String {
    format!("{SCHEDULED_DUE_PREFIX}{:020};", now.timestamp_millis().max(0))
}

/// An expiry row of a finished scheduled message, in time order like the due rows.
pub fn scheduled_done_key(finished_at: chrono::DateTime<chrono::Utc>, id: &str) -> String {
    format!(
        "{SCHEDULED_DONE_PREFIX}{:020}:{id}",
        finished_at.timestamp_millis().max(0)
    )
}

/// The first expiry-row key after every item finished before `before`.
pub fn scheduled_done_end(before: chrono::DateTime<chrono::Utc>) -> String {
    format!("{SCHEDULED_DONE_PREFIX}{:020}:", before.timestamp_millis().max(0))
}

pub fn role_key(id: &str) -> String {
    format!("{ROLE_PREFIX}{id}")
}

pub fn subscription_key(endpoint: &str) -> String {
    let digest = Sha256::digest(endpoint.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A user id as a table key part: characters Azure forbids in keys, and `%` itself, are
/// percent-encoded, so any user id is a valid, reversible key.
pub fn user_key(user: &UserId) -> String {
    encode_key_part(user.as_str())
}

/// Percent-encodes `%` and every character forbidden in table keys.
pub fn encode_key_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '%' || is_forbidden_key_char(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// True for a room row that a delete has marked.
pub fn is_being_deleted(row: &tabletalk_tables::Entity) -> bool {
    row.bool("deleting").unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_feed_key_is_below_the_end() {
        assert!(feed_key(7) < feed_end() && feed_key(u64::MAX) < feed_end());
    }

    #[test]
    fn user_keys_are_valid_table_keys() {
        for id in ["alice", "a/b\\c#d?e", "100%", "tab\there", "日本"] {
            let key = encode_key_part(id);
            assert!(
                tabletalk_tables::rules::check_key("RowKey", &key).is_ok(),
                "{id} -> {key}"
            );
        }
        assert_eq!(encode_key_part("a/b%"), "a%2Fb%25");
        assert_ne!(
            encode_key_part("a/b"),
            encode_key_part("a%2Fb"),
            "the encoding is injective"
        );
    }
}

pub fn outgoing_key(id: &str) -> String {
    format!("{OUTGOING_PREFIX}{id}")
}

pub fn delivery_pending_key(delivery_id: &str) -> String {
    format!("{DELIVERY_PENDING_PREFIX}{delivery_id}")
}

pub fn delivery_done_key(webhook: &str, version: u64, message_id: &str) -> String {
    format!(
        "{DELIVERY_DONE_PREFIX}{webhook}.{:020}.{message_id}",
        u64::MAX - version
    )
}

pub fn hook_event_key(version: u64, message_id: &str) -> String {
    format!("{HOOK_EVENT_PREFIX}{version:020}:{message_id}")
}
