//! Versions: every change to a message row (create, text edit, tombstone delete) takes the
//! next number of its room's counter, and the counter moves in the same entity group
//! transaction as the change, conditional on the counter's ETag. A commit that lost the
//! counter to another writer is re-numbered and retried (through the shared conditional-write
//! helper), so versions become visible strictly in order: a reader never sees N+1 while N can
//! still appear.
//!
//! Each message also keeps exactly one feed row, `v:<version>`, a copy of the message at its
//! newest version: a change deletes the old feed row and writes the new one in the same
//! transaction. The change feed is therefore one range read per conversation.
//!
//! One counter per room would serialise a busy room's sends, so changes are committed in
//! groups: each change joins its room's queue, and whoever holds the room's turn takes every
//! queued change that fits one transaction (100 operations, a few MiB), numbers them with one
//! counter step and commits them together. The counter row as last written is kept with the
//! turn, so a commit in a quiet process costs no extra read; a stale copy (another process
//! wrote) costs one lost race. Across processes the helper's randomised backoff spreads
//! colliding writers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::sync::oneshot;

use super::schema::{COUNTER_ROW, OUTGOING_PARTITION, feed_key};
use tabletalk_domain::ids::RoomId;
use tabletalk_tables::conditional::{ConditionalError, ReadAlong, update_conditionally_reading_along};
use tabletalk_tables::rules::MAX_BATCH_OPS;
use tabletalk_tables::{BatchOp, ETag, Entity, ErrorKind, IfMatch, StoreError, UpdateMode, Value};

/// Bytes of entities one group may carry, well under Azure's 4 MiB per transaction (which
/// also counts the multipart framing).
const MAX_GROUP_BYTES: usize = 3 * 1024 * 1024;

/// Rooms whose queues are kept in memory before idle ones are forgotten.
const MAX_IDLE_ROOMS: usize = 1024;
/// A room's counter: the last version handed out, and the retention floor (every version at
/// or below it may have been purged).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    pub version: u64,
    pub floor: u64,
    /// The ticks of the message the room's activity row shows (`store::activity`): kept on
    /// the counter so that of two commits racing, the one that wins the counter decides, and
    /// the newest message stays shown whatever order they commit in.
    pub activity: Option<u64>,
    /// Whether the room's changes commit an event row for its outgoing webhooks (none when
    /// the row predates the flag: then the listing of rooms with endpoints tells, once).
    pub hooked: Option<bool>,
    /// Moves after every change to the room row ([`LedgerStore::note_room_changed`]): a send
    /// admitted on a copy of the room row read under this stamp commits only while it is
    /// still the counter's, so once a change's stamp has moved, no copy of the row before it
    /// admits a send.
    pub room_stamp: u64,
}

impl Counter {
    pub fn from_entity(entity: &Entity) -> Counter {
        let number = |name| entity.i64(name).and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
        Counter {
            version: number("version"),
            floor: number("floor"),
            activity: entity.i64(ACTIVITY_PROPERTY).and_then(|v| u64::try_from(v).ok()),
            hooked: entity.bool(HOOKED_PROPERTY),
            room_stamp: number(ROOM_STAMP_PROPERTY),
        }
    }

    fn write(self, mut entity: Entity) -> Entity {
        entity.set("version", Value::Int64(self.version as i64));
        entity.set("floor", Value::Int64(self.floor as i64));
        if let Some(ticks) = self.activity {
            entity.set(ACTIVITY_PROPERTY, Value::Int64(ticks as i64));
        }
        if let Some(hooked) = self.hooked {
            entity.set(HOOKED_PROPERTY, Value::Bool(hooked));
        }
        entity.set(ROOM_STAMP_PROPERTY, Value::Int64(self.room_stamp as i64));
        entity
    }
}

/// The counter row's property saying whether changes commit outgoing webhook event rows.
const HOOKED_PROPERTY: &str = "hooked";
/// The counter row's property holding the room row's stamp.
const ROOM_STAMP_PROPERTY: &str = "roomStamp";

/// The counter row's property naming the message the activity row shows.
const ACTIVITY_PROPERTY: &str = "activityTicks";

/// What a change does to the room's activity row: the row showing its message, written in the
/// change's transaction when that message is (or stays) the one shown.
#[derive(Debug, Clone)]
pub struct ActivityChange {
    /// The ticks of the change's message.
    pub ticks: u64,
    /// The activity row showing it.
    pub row: Entity,
    /// A new message becomes the one shown if it is the newest; an edit or a delete only
    /// rewrites the row if it shows that message already.
    pub new: bool,
}

/// What a change's operations are built for: its version, and whether the room's changes
/// commit an outgoing webhook event row, both as of the counter the transaction moves (so a
/// webhook registered through another process is never missed by a change that commits
/// after it).
#[derive(Debug, Clone, Copy)]
pub struct Numbered {
    pub version: u64,
    pub hooked: bool,
}

/// A change waiting for its version: the operations it commits, given that version. It may
/// need fewer operations at some versions than at others (an edit deletes its old feed row
/// only when it had one), but never more than at [`SIZING`].
pub type Build = Box<dyn Fn(Numbered) -> Vec<BatchOp> + Send + Sync>;

/// What a change is sized at before it has a version: above any real version, so every
/// operation a change can need is in it (an edit's `Delete v:<old>` among them), and hooked.
const SIZING: Numbered = Numbered {
    version: u64::MAX,
    hooked: true,
};

/// Why a change was not committed.
#[derive(Debug)]
pub enum Unnumbered {
    /// The store failed it (its own operation's index kept).
    Store(StoreError),
    /// The room row changed since the copy the change was admitted on: admit it again.
    RoomChanged,
}

/// A counter step that met a room stamp other than the one its changes were admitted under:
/// the counter row as read.
#[derive(Debug)]
pub struct RoomChanged(pub Entity);

/// Commits the counter row remembers, newest last: enough to tell, after an ambiguous answer,
/// whether a commit landed even when others committed after it.
const RECENT_COMMITS: usize = 32;
/// The counter row's property holding those commits' ids, space-separated.
const RECENT_COMMITS_PROPERTY: &str = "commits";

/// A committed change: its version and the ETags of its operations, in order (`None` where
/// the commit was confirmed by looking after an ambiguous answer, which tells no ETags).
#[derive(Debug, Clone)]
pub struct Committed {
    pub version: u64,
    pub etags: Vec<Option<ETag>>,
    /// Whether it was built with the outgoing webhooks' event row.
    pub hooked: bool,
}

/// A counter step that committed: the counter row as now known (a stale copy only costs the
/// next writer a lost race), the counter the step wrote, and the ETags of its operations.
pub struct Stepped {
    pub row: Entity,
    pub counter: Counter,
    pub etags: Vec<Option<ETag>>,
}

struct Pending {
    build: Build,
    /// Operations at most (built at [`SIZING`]), for fitting a group into one transaction.
    ops: usize,
    bytes: usize,
    /// The rows it writes (its feed row aside, which is unique by version): a transaction may
    /// touch a row once, so changes to the same row go in different groups.
    rows: Vec<String>,
    activity: Option<ActivityChange>,
    /// The room stamp it was admitted under, if its admission read the room row under one.
    admitted_under: Option<u64>,
    reply: oneshot::Sender<Result<Committed, Unnumbered>>,
}

/// Every room's queue of changes, in this process. Cloning the service shares it.
#[derive(Default)]
pub struct Ledger {
    rooms: Mutex<HashMap<String, Arc<RoomLog>>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

#[derive(Default)]
struct RoomLog {
    /// Changes waiting for the turn. A std mutex: held only to push or drain, never across
    /// an await.
    queue: Mutex<VecDeque<Pending>>,
    /// The turn to commit, holding the counter row as this process last wrote it.
    turn: Arc<tokio::sync::Mutex<Option<Entity>>>,
    /// Until when the counter is taken for one other processes move too: its commits read it
    /// along (`ReadAlong::Always`) since a commit last lost a race to another writer.
    contended_until: Mutex<Option<std::time::Instant>>,
    /// The room stamp of the counter row this process saw last.
    stamp: Mutex<Option<u64>>,
}

impl Ledger {
    fn log(&self, room: &RoomId) -> Arc<RoomLog> {
        let mut rooms = self.rooms.lock().expect("ledger lock");
        // Forget idle rooms (no change queued or committing) once many are known. A room
        // forgotten while a straggler still holds its log only costs a lost counter race.
        if rooms.len() >= MAX_IDLE_ROOMS {
            rooms.retain(|_, log| Arc::strong_count(log) > 1);
        }
        rooms.entry(room.to_string()).or_default().clone()
    }
}

/// The longest pause a commit makes before taking its group while other processes move the
/// room's counter too.
const CONTENDED_PAUSE: std::time::Duration = std::time::Duration::from_millis(4);

/// How long after a lost race a room's commits keep reading its counter along.
const CONTENDED_FOR: std::time::Duration = std::time::Duration::from_secs(30);

impl RoomLog {
    /// How a commit reads the counter along: with every write while other processes were
    /// seen moving it lately, else only once a write lost (a quiet room's commit reads
    /// nothing but the transaction).
    fn read_along(&self) -> ReadAlong {
        let until = *self.contended_until.lock().unwrap_or_else(|e| e.into_inner());
        match until {
            Some(until) if std::time::Instant::now() < until => ReadAlong::Always,
            _ => ReadAlong::AfterALoss,
        }
    }

    /// Notes the counter row as last read or written.
    fn remember(&self, row: &Entity) {
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) = Some(Counter::from_entity(row).room_stamp);
    }

    /// Notes that a commit lost the counter to another writer.
    fn note_lost_race(&self) {
        *self.contended_until.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(std::time::Instant::now() + CONTENDED_FOR);
    }

    /// The oldest queued changes that fit one transaction with the counter (at least one),
    /// passing over any that touches a row already in the group.
    fn take_group(&self) -> Vec<Pending> {
        let mut queue = self.queue.lock().expect("queue lock");
        // The counter and the activity row.
        let (mut ops, mut bytes) = (2, 0);
        let mut rows: HashSet<String> = HashSet::new();
        let (mut group, mut later) = (Vec::new(), VecDeque::new());
        while let Some(next) = queue.pop_front() {
            let fits = ops + next.ops <= MAX_BATCH_OPS && bytes + next.bytes <= MAX_GROUP_BYTES;
            if !group.is_empty() && !fits {
                queue.push_front(next);
                break;
            }
            if next.rows.iter().any(|row| rows.contains(row)) {
                later.push_back(next);
                continue;
            }
            ops += next.ops;
            bytes += next.bytes;
            rows.extend(next.rows.iter().cloned());
            group.push(next);
        }
        // Passed-over changes keep their place at the front.
        while let Some(next) = later.pop_back() {
            queue.push_front(next);
        }
        group
    }
}

/// How long a group keeps trying for the counter while other processes win it, before it is
/// answered "busy". A lost race is never the store's failure — the winner committed — so a
/// loser waits its turn rather than failing after a fixed number of rounds; this bounds only
/// what one request can be made to wait.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

fn contended() -> StoreError {
    StoreError::new(ErrorKind::Unavailable, "the room is busy; try again")
}

/// A room's counter: every change to a message takes the room's next version here. Holds the tables
/// it uses and, as fields, the surfaces it calls.
#[derive(Debug, Clone)]
pub struct LedgerStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// Each room's queue of changes waiting for a version, in this process.
    pub(crate) ledger: std::sync::Arc<Ledger>,
}

impl LedgerStore {
    /// Commits one change with the next version of its room, possibly together with other
    /// changes queued at the same time. Errors carry the failing operation's index within
    /// this change.
    ///
    /// Queueing and committing run as their own task once they wait: a request dropped while
    /// its change waits (a client gone) neither strands the change in the queue nor the group
    /// it leads. Their first step runs in the caller's, so the transaction it sends goes to
    /// the store with the writes the caller makes alongside (`storage::together`: a send's
    /// message, index row and read position in one group commit); nothing can drop the
    /// change between that step and the spawn.
    pub async fn commit_change(
        &self,
        room: &RoomId,
        build: Build,
        activity: Option<ActivityChange>,
    ) -> Result<Committed, StoreError> {
        match self.commit_admitted(room, build, activity, None).await {
            Ok(committed) => Ok(committed),
            Err(Unnumbered::Store(e)) => Err(e),
            Err(Unnumbered::RoomChanged) => Err(StoreError::internal("a change admitted under no stamp was refused")),
        }
    }

    /// [`LedgerStore::commit_change`] for a change admitted on a copy of the room row read
    /// under the room stamp `admitted_under` ([`LedgerStore::room_stamp`]): it commits only
    /// while that stamp is the counter's, else it is answered [`Unnumbered::RoomChanged`].
    pub async fn commit_admitted(
        &self,
        room: &RoomId,
        build: Build,
        activity: Option<ActivityChange>,
        admitted_under: Option<u64>,
    ) -> Result<Committed, Unnumbered> {
        let (store, room) = (self.clone(), room.clone());
        let mut change = Box::pin(async move { store.queue_and_commit(&room, build, activity, admitted_under).await });
        if let Poll::Ready(done) = futures::poll!(change.as_mut()) {
            return done;
        }
        tokio::spawn(change)
            .await
            .map_err(|e| Unnumbered::Store(StoreError::internal(format!("a commit failed: {e}"))))?
    }

    /// The room stamp of the counter this process saw last, if it saw one: a copy of the
    /// room row read after this was taken may admit sends under it.
    pub fn room_stamp(&self, room: &RoomId) -> Option<u64> {
        let log = self.ledger.log(room);
        *log.stamp.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn queue_and_commit(
        &self,
        room: &RoomId,
        build: Build,
        activity: Option<ActivityChange>,
        admitted_under: Option<u64>,
    ) -> Result<Committed, Unnumbered> {
        let sample = build(SIZING);
        let (tx, mut rx) = oneshot::channel();
        let log = self.ledger.log(room);
        let unnumbered = feed_key(SIZING.version);
        log.queue.lock().expect("queue lock").push_back(Pending {
            ops: sample.len(),
            bytes: sample.iter().map(op_bytes).sum(),
            rows: sample
                .iter()
                .map(|op| op.keys().1.to_owned())
                .filter(|row| *row != unnumbered)
                .collect(),
            build,
            activity,
            admitted_under,
            reply: tx,
        });
        loop {
            let mut counter = log.turn.clone().lock_owned().await;
            // The holder of the turn before us may have committed this change already.
            match rx.try_recv() {
                Ok(done) => return done,
                Err(oneshot::error::TryRecvError::Closed) => {
                    return Err(Unnumbered::Store(StoreError::internal(
                        "a group commit ended without an answer",
                    )));
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            // Where other processes move the counter too, the turn first lets them in for a
            // moment (the winner of the last race holds a current copy and would otherwise
            // win again and again) and gathers what queues meanwhile into one transaction.
            if log.read_along() == ReadAlong::Always {
                let pause = rand::random_range(0..=CONTENDED_PAUSE.as_micros() as u64);
                tokio::time::sleep(std::time::Duration::from_micros(pause)).await;
            }
            let group = log.take_group();
            self.commit_group(room, &mut counter, group).await;
        }
    }

    /// Commits a group: one counter step for all of it. A change whose own operation fails
    /// is answered with that failure and the rest are committed without it. Sizes and blame
    /// come from the operations as built for the versions assigned, not from the estimate
    /// the group was formed with.
    async fn commit_group(&self, room: &RoomId, counter: &mut Option<Entity>, mut group: Vec<Pending>) {
        let waiting_since = std::time::Instant::now();
        let log = self.ledger.log(room);
        while !group.is_empty() {
            let known = match counter.take() {
                Some(entity) => entity,
                None => match self.counter_row(room).await {
                    Ok(entity) => entity,
                    Err(e) => return answer_all(group, e),
                },
            };
            log.remember(&known);
            let current = Counter::from_entity(&known);
            // Changes admitted on a room row older than the counter's stamp go back to be
            // admitted again; the step below checks the stamp once more against the counter it
            // moves.
            let (admitted, stale): (Vec<Pending>, Vec<Pending>) = group
                .into_iter()
                .partition(|p| p.admitted_under.is_none_or(|s| s == current.room_stamp));
            for pending in stale {
                let _ = pending.reply.send(Err(Unnumbered::RoomChanged));
            }
            group = admitted;
            if group.is_empty() {
                *counter = Some(known);
                return;
            }
            let stamped = group
                .iter()
                .any(|p| p.admitted_under.is_some())
                .then_some(current.room_stamp);
            // A counter from before the hooked flag: the listing of rooms with endpoints
            // decides, and the step writes the flag.
            let listed = match current.hooked {
                Some(_) => None,
                None => match self.listed_for_hooks(room).await {
                    Ok(listed) => Some(listed),
                    Err(e) => return answer_all(group, e),
                },
            };
            let n = group.len() as u64;
            let builds: Vec<&Build> = group.iter().map(|p| &p.build).collect();
            let activities: Vec<&ActivityChange> = group.iter().filter_map(|p| p.activity.as_ref()).collect();
            let newest = activities.iter().filter(|a| a.new).map(|a| a.ticks).max();
            // Each change's operation count in the transaction last built.
            let sizes = Mutex::new(Vec::new());
            let outcome = self
                .step_counter(
                    room,
                    known,
                    |counter| Counter {
                        version: counter.version + n,
                        activity: counter.activity.max(newest),
                        hooked: counter.hooked.or(listed),
                        ..counter
                    },
                    |after| {
                        let first = after.version - n + 1;
                        let hooked = after.hooked.unwrap_or(false);
                        let built: Vec<Vec<BatchOp>> = (0..)
                            .zip(&builds)
                            .map(|(i, build)| {
                                build(Numbered {
                                    version: first + i,
                                    hooked,
                                })
                            })
                            .collect();
                        *sizes.lock().expect("sizes lock") = built.iter().map(Vec::len).collect();
                        let mut ops: Vec<BatchOp> = built.into_iter().flatten().collect();
                        // Last, after every change's operations, so a failure's index still
                        // names its change.
                        if let Some(shown) = after.activity
                            && let Some(change) = activities.iter().find(|a| a.ticks == shown)
                        {
                            ops.push(BatchOp::Upsert {
                                entity: change.row.clone(),
                                mode: UpdateMode::Replace,
                            });
                        }
                        ops
                    },
                    stamped,
                )
                .await;
            let sizes = sizes.into_inner().expect("sizes lock");
            match outcome {
                Ok(stepped) => {
                    let last = stepped.counter.version;
                    let hooked = stepped.counter.hooked.unwrap_or(false);
                    log.remember(&stepped.row);
                    *counter = Some(stepped.row);
                    let mut at = 0;
                    for (i, (pending, size)) in group.into_iter().zip(&sizes).enumerate() {
                        let mine = match stepped.etags.get(at..at + size) {
                            Some(etags) => etags.to_vec(),
                            None => vec![None; *size],
                        };
                        at += size;
                        let version = last - n + 1 + i as u64;
                        let _ = pending.reply.send(Ok(Committed {
                            version,
                            etags: mine,
                            hooked,
                        }));
                    }
                    return;
                }
                // One change's own operation failed: answer it, commit the others.
                Err(ConditionalError::Store(e)) if e.batch_index.is_some_and(|i| i > 0) => {
                    let mut index = e.batch_index.unwrap_or(0) - 1;
                    let culprit = sizes.iter().position(|size| {
                        let inside = index < *size;
                        if !inside {
                            index -= size;
                        }
                        inside
                    });
                    // The activity row is no change's own: the group fails as a whole.
                    let Some(culprit) = culprit else {
                        return answer_all(group, e);
                    };
                    let pending = group.remove(culprit);
                    let _ = pending.reply.send(Err(Unnumbered::Store(StoreError {
                        batch_index: Some(index),
                        ..e
                    })));
                }
                Err(ConditionalError::Store(e)) => return answer_all(group, e),
                Err(ConditionalError::NotFound) => {
                    return answer_all(
                        group,
                        StoreError::new(ErrorKind::NotFound, "the room's counter is gone"),
                    );
                }
                // Other processes kept winning the counter for every attempt the helper makes:
                // each loss was another commit's progress, so the group waits its turn, reading
                // the counter afresh, for as long as a request may wait.
                Err(ConditionalError::Conflict) if waiting_since.elapsed() < PATIENCE => {}
                Err(ConditionalError::Conflict) => return answer_all(group, contended()),
                // The room row changed meanwhile: the changes admitted on the old one go back.
                Err(ConditionalError::Rejected(RoomChanged(row))) => *counter = Some(row),
            }
        }
    }

    /// Moves the room's counter conditionally, through the shared helper (starting from
    /// `known`, the copy believed current), with `ops` committed in the same transaction:
    /// `apply` gives the new counter from the current one, `ops` the rows that go with that
    /// new counter. A failure keeps the failing operation's index in the whole transaction
    /// (the counter is operation 0).
    ///
    /// Every step stamps the counter row with a fresh commit id (the row keeps the last
    /// [`RECENT_COMMITS`]). A transaction answered ambiguously — a timeout or a 500 after the
    /// request went out — may have committed; the row then tells whether it did. A commit
    /// that landed is answered as one; one that did not (and, fenced out, never will) is
    /// answered as the failure it was — `Unavailable`, safe for the sender to retry — and not
    /// retried here, as the conditional helper never re-applies a write that may have been
    /// applied; one that cannot be told is [`ErrorKind::Indeterminate`].
    pub async fn step_counter(
        &self,
        room: &RoomId,
        known: Entity,
        apply: impl Fn(Counter) -> Counter,
        ops: impl Fn(Counter) -> Vec<BatchOp>,
        admitted_under: Option<u64>,
    ) -> Result<Stepped, ConditionalError<RoomChanged>> {
        // What the attempt being written carries: its commit id, the newest commit of the row
        // it was computed from, the counter it writes; after it lands, the rows' ETags and, if
        // confirmed by looking, the counter row as read.
        let attempt = Mutex::new(Attempt::default());
        // Other processes write the counter too: reading it along with a commit makes a lost
        // race cost one more round trip, not two, where races are being lost.
        let log = self.ledger.log(room);
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let stepped = update_conditionally_reading_along(
            &self.tables,
            &self.schema.messages,
            room.as_str(),
            COUNTER_ROW,
            Some(known),
            log.read_along(),
            |entity| {
                tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let before = Counter::from_entity(&entity);
                if admitted_under.is_some_and(|stamp| stamp != before.room_stamp) {
                    return Err(RoomChanged(entity));
                }
                let counter = apply(before);
                let mut attempt = attempt.lock().expect("attempt lock");
                attempt.id = format!("{:016x}", rand::random::<u64>());
                attempt.seen_newest = recent_commits(&entity).last().map(|id| id.to_string());
                attempt.counter = counter;
                let stamped = stamp_commit(counter.write(entity), &attempt.id);
                Ok(stamped)
            },
            |next, seen| {
                let mut batch = ops(Counter::from_entity(&next));
                batch.insert(
                    0,
                    BatchOp::Update {
                        entity: next,
                        mode: UpdateMode::Replace,
                        if_match: IfMatch::Etag(seen.clone()),
                    },
                );
                let attempt = &attempt;
                async move {
                    match self.tables.transact(&self.schema.messages, room.as_str(), &batch).await {
                        Ok(mut etags) => {
                            let counter = etags
                                .remove(0)
                                .ok_or_else(|| StoreError::internal("no ETag for the counter"))?;
                            attempt.lock().expect("attempt lock").etags = etags;
                            Ok(counter)
                        }
                        Err(e) if e.may_have_applied() => {
                            let (id, seen_newest) = {
                                let attempt = attempt.lock().expect("attempt lock");
                                (attempt.id.clone(), attempt.seen_newest.clone())
                            };
                            let row = self.confirm_commit(room, &id, seen_newest.as_deref(), &seen, e).await?;
                            let etag = row
                                .etag
                                .clone()
                                .ok_or_else(|| StoreError::internal("no ETag for the counter"))?;
                            let mut attempt = attempt.lock().expect("attempt lock");
                            attempt.etags = vec![None; batch.len() - 1];
                            attempt.confirmed = Some(row);
                            Ok(etag)
                        }
                        Err(e) => Err(e),
                    }
                }
            },
        )
        .await;
        if tries.into_inner() > 1 {
            log.note_lost_race();
        }
        let entity = stepped?;
        let attempt = attempt.into_inner().expect("attempt lock");
        Ok(Stepped {
            row: attempt.confirmed.unwrap_or(entity),
            counter: attempt.counter,
            etags: attempt.etags,
        })
    }

    /// After an ambiguous answer to the commit stamped `id`, which was conditional on the
    /// counter's ETag `seen`: the counter row as it is now if the commit landed, `failure` (as
    /// a failure of the whole transaction, not of one change in its group) if it did not and never
    /// will, and an [`ErrorKind::Indeterminate`] error if that cannot be told.
    ///
    /// A commit still in flight may land after a look that did not find it, as long as the
    /// counter is still at `seen`. So while it is, the counter is first written again on that
    /// same condition (the fence): once that lands, the attempt cannot any more. Once the
    /// ETag has moved, the attempt has either landed — its id is in the row's list of recent
    /// commits — or never will.
    async fn confirm_commit(
        &self,
        room: &RoomId,
        id: &str,
        seen_newest: Option<&str>,
        seen: &ETag,
        failure: StoreError,
    ) -> Result<Entity, StoreError> {
        let unknown = |why: &str| {
            tracing::warn!(%room, %failure, why, "a commit's outcome is unknown");
            StoreError::new(
                ErrorKind::Indeterminate,
                format!("the store did not confirm a commit ({failure}), and {why}"),
            )
        };
        let never_landed = || StoreError {
            batch_index: None,
            ..failure.clone()
        };
        let read = || async {
            match self.tables.get(&self.schema.messages, room.as_str(), COUNTER_ROW).await {
                Ok(row) => Ok(row),
                Err(_) => Err(unknown("the counter could not be read")),
            }
        };
        let Some(mut row) = read().await? else {
            return Err(never_landed());
        };
        if row.etag.as_ref() == Some(seen) {
            let fence = stamp_commit(row.clone(), &format!("{:016x}", rand::random::<u64>()));
            match self
                .tables
                .update(
                    &self.schema.messages,
                    &fence,
                    UpdateMode::Replace,
                    &IfMatch::Etag(seen.clone()),
                )
                .await
            {
                Ok(_) => return Err(never_landed()),
                Err(e) if e.is(ErrorKind::PreconditionFailed) => {
                    row = read().await?.ok_or_else(never_landed)?;
                }
                Err(_) => return Err(unknown("the counter could not be fenced")),
            }
        }
        let recent = recent_commits(&row);
        if recent.contains(&id) {
            tracing::info!(%room, %failure, "a commit answered with an error had landed");
            return Ok(row);
        }
        // The row remembers every commit since the one this attempt was computed from when
        // that one is still in its list (or, for a row that had none, while the list is
        // not full): then this attempt, missing from it, never landed.
        let covered = match seen_newest {
            Some(newest) => recent.contains(&newest),
            None => recent.len() < RECENT_COMMITS,
        };
        match covered {
            true => Err(never_landed()),
            false => Err(unknown("too many commits followed it to tell")),
        }
    }

    /// The room's counter row, created at zero if the room has none yet.
    async fn counter_row(&self, room: &RoomId) -> Result<Entity, StoreError> {
        if let Some(row) = self
            .tables
            .get(&self.schema.messages, room.as_str(), COUNTER_ROW)
            .await?
        {
            return Ok(row);
        }
        let fresh = Counter::default().write(Entity::new(room.as_str(), COUNTER_ROW));
        match self.tables.insert(&self.schema.messages, &fresh).await {
            Ok(_) => {}
            Err(e) if e.is(ErrorKind::AlreadyExists) => {}
            Err(e) => return Err(e),
        }
        self.tables
            .get(&self.schema.messages, room.as_str(), COUNTER_ROW)
            .await?
            .ok_or_else(|| StoreError::new(ErrorKind::NotFound, "the room's counter is gone"))
    }

    /// The room's counter as stored now (zero for a room without changes).
    pub async fn counter(&self, room: &RoomId) -> Result<Counter, StoreError> {
        let row = self
            .tables
            .get(&self.schema.messages, room.as_str(), COUNTER_ROW)
            .await?;
        Ok(row.as_ref().map(Counter::from_entity).unwrap_or_default())
    }

    /// Runs `commit` holding the room's turn, with the counter row, so that a change to the
    /// counter outside the feed (the retention floor) never races this process's groups.
    pub async fn with_counter<T, F>(&self, room: &RoomId, commit: impl FnOnce(Entity) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<(T, Entity), StoreError>>,
    {
        let log = self.ledger.log(room);
        let mut counter = log.turn.clone().lock_owned().await;
        let current = match counter.take() {
            Some(entity) => entity,
            None => self.counter_row(room).await?,
        };
        let (result, written) = commit(current).await?;
        log.remember(&written);
        *counter = Some(written);
        Ok(result)
    }

    /// Moves the room stamp after a change to the room row, holding the room's turn (so this
    /// process's next commit does not lose a race to it): a send admitted on the row as it
    /// was commits no more and is admitted again. The room row is written first, so a copy
    /// read under the new stamp is the new row.
    pub async fn note_room_changed(&self, room: &RoomId) -> Result<(), StoreError> {
        self.change_counter(room, |counter| Counter {
            room_stamp: counter.room_stamp + 1,
            ..counter
        })
        .await
    }

    /// Sets whether the room's changes commit outgoing webhook event rows.
    pub async fn set_hooked(&self, room: &RoomId, hooked: bool) -> Result<(), StoreError> {
        self.change_counter(room, |counter| Counter {
            hooked: Some(hooked),
            ..counter
        })
        .await
    }

    /// Changes the counter row holding the room's turn, waiting its turn against other
    /// processes as a group does (`PATIENCE`). A room without a counter is left without one:
    /// no send has committed there for a stamp to retire (a deleted room's swept partition
    /// stays empty), and its first commit reads whether it is hooked from the listing.
    async fn change_counter(
        &self,
        room: &RoomId,
        change: impl Fn(Counter) -> Counter + Send,
    ) -> Result<(), StoreError> {
        let log = self.ledger.log(room);
        let mut turn = log.turn.clone().lock_owned().await;
        let mut known = match turn.take() {
            Some(entity) => entity,
            None => match self
                .tables
                .get(&self.schema.messages, room.as_str(), COUNTER_ROW)
                .await?
            {
                Some(entity) => entity,
                None => return Ok(()),
            },
        };
        let waiting_since = std::time::Instant::now();
        loop {
            match self.step_counter(room, known, &change, |_| Vec::new(), None).await {
                Ok(stepped) => {
                    log.remember(&stepped.row);
                    *turn = Some(stepped.row);
                    return Ok(());
                }
                Err(ConditionalError::Conflict) if waiting_since.elapsed() < PATIENCE => {
                    known = self.counter_row(room).await?;
                }
                Err(e) => return Err(step_failed(e)),
            }
        }
    }

    /// Whether the room is listed as having outgoing webhook endpoints (`store::outgoing`):
    /// read once for a counter from before its hooked flag, and after an unlisting.
    pub(crate) async fn listed_for_hooks(&self, room: &RoomId) -> Result<bool, StoreError> {
        let listing = self
            .tables
            .get(&self.schema.housekeeping, OUTGOING_PARTITION, room.as_str())
            .await?;
        Ok(listing.is_some())
    }
}

/// One write attempt of [`Store::step_counter`].
#[derive(Default)]
struct Attempt {
    id: String,
    seen_newest: Option<String>,
    counter: Counter,
    etags: Vec<Option<ETag>>,
    confirmed: Option<Entity>,
}

/// The ids of the commits a counter row remembers, oldest first.
fn recent_commits(row: &Entity) -> Vec<&str> {
    row.str(RECENT_COMMITS_PROPERTY)
        .map(|ids| ids.split(' ').filter(|id| !id.is_empty()).collect())
        .unwrap_or_default()
}

/// The counter row with `id` as its newest commit, forgetting the oldest beyond
/// [`RECENT_COMMITS`].
fn stamp_commit(mut row: Entity, id: &str) -> Entity {
    let mut recent: Vec<String> = recent_commits(&row).into_iter().map(str::to_owned).collect();
    recent.push(id.to_owned());
    let excess = recent.len().saturating_sub(RECENT_COMMITS);
    let kept = recent[excess..].join(" ");
    row.set(RECENT_COMMITS_PROPERTY, Value::String(kept));
    row
}

fn answer_all(group: Vec<Pending>, error: StoreError) {
    for pending in group {
        let _ = pending.reply.send(Err(Unnumbered::Store(error.clone())));
    }
}

/// A counter step's failure as a store error, for a step no change was admitted to.
pub fn step_failed(e: ConditionalError<RoomChanged>) -> StoreError {
    match e {
        ConditionalError::Store(e) => e,
        ConditionalError::NotFound => StoreError::new(ErrorKind::NotFound, "the room's counter is gone"),
        ConditionalError::Conflict => contended(),
        ConditionalError::Rejected(_) => StoreError::internal("a step admitted under no stamp met one"),
    }
}

/// An operation's share of the request: its stored size, tripled, because JSON may escape a
/// character into six bytes where storage counts two.
fn op_bytes(op: &BatchOp) -> usize {
    match op {
        BatchOp::Insert(e) | BatchOp::Update { entity: e, .. } | BatchOp::Upsert { entity: e, .. } => {
            e.stored_size() * 3
        }
        BatchOp::Delete { .. } => 256,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tabletalk_domain::members::{Member, MemberRole};
    use tabletalk_domain::permissions::Permissions;
    use tabletalk_domain::principal::Principal;
    use tabletalk_domain::rooms::{Room, Visibility};
    use tabletalk_tables::Tables;
    use tabletalk_tables::faults::FaultyTables;
    use tabletalk_tables::sqlite::{Durability, SqliteTables};

    /// A scratch embedded store.
    fn store() -> SqliteTables {
        let dir = std::env::temp_dir().join(format!("tt-ledger-{}", rand::random::<u64>()));
        SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap()
    }

    /// The ledger over `tables`, with a room (and its counter) alice owns.
    async fn store_with_room(tables: Tables) -> (LedgerStore, RoomId) {
        let store = crate::Store::open(tables, crate::Schema::with_prefix("").unwrap())
            .await
            .unwrap();
        let room = RoomId::generate();
        let alice = Principal {
            user_id: tabletalk_domain::ids::UserId::parse("alice").unwrap(),
            name: "alice".into(),
        };
        let now = crate::stored_time(chrono::Utc::now());
        let settings = Room {
            id: room.to_string(),
            name: "r".into(),
            description: String::new(),
            owner_id: "alice".into(),
            created_at: now,
            read_only: false,
            replies_only: false,
            slowmode_seconds: 0,
            word_filter: Default::default(),
            everyone_permissions: Permissions::DEFAULT_EVERYONE,
            retention_seconds: None,
            visibility: Visibility::Public,
            direct: false,
            max_sends_per_second: 0,
            trust_thresholds: None,
        };
        let owner = Member::new(&alice, MemberRole::Owner, now);
        store.rooms.create_room(&settings, &owner).await.unwrap();
        (store.ledger.clone(), room)
    }

    /// A change inserting one row, `key`, stamped with its version.
    fn insert(room: &RoomId, key: &'static str) -> Build {
        let room = room.to_string();
        Box::new(move |numbered: Numbered| {
            vec![BatchOp::Insert(
                Entity::new(room.clone(), key).with("v", Value::Int64(numbered.version as i64)),
            )]
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_failing_inside_a_group_is_answered_alone_and_the_rest_commit() {
        let faults = FaultyTables::new(store());
        let (chat, room) = store_with_room(Tables::new(faults.clone())).await;
        let taken = Entity::new(room.as_str(), "taken");
        chat.tables.insert(&chat.schema.messages, &taken).await.unwrap();
        let start = chat.counter(&room).await.unwrap().version;

        // A slow first commit holds the turn while three more changes queue up behind it, in
        // order; they then commit as one group, in which the middle one fails.
        faults.set_latency(Some(Duration::from_millis(50)));
        let mut changes = Vec::new();
        for key in ["lead", "a", "taken", "b"] {
            let (chat, room) = (chat.clone(), room.clone());
            changes.push(tokio::spawn(async move {
                chat.commit_change(&room, insert(&room, key), None).await
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut outcomes = Vec::new();
        for change in changes {
            outcomes.push(change.await.unwrap());
        }
        faults.set_latency(None);

        let versions: Vec<Option<u64>> = outcomes.iter().map(|o| o.as_ref().ok().map(|c| c.version)).collect();
        assert_eq!(versions, [Some(start + 1), Some(start + 2), None, Some(start + 3)]);
        let failed = outcomes[2].as_ref().unwrap_err();
        assert_eq!((failed.kind, failed.batch_index), (ErrorKind::AlreadyExists, Some(0)));
        assert_eq!(
            chat.counter(&room).await.unwrap().version,
            start + 3,
            "no version skipped"
        );
        for (key, version) in [("lead", start + 1), ("a", start + 2), ("b", start + 3)] {
            let row = chat
                .tables
                .get(&chat.schema.messages, room.as_str(), key)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row.i64("v"), Some(version as i64), "{key}");
        }
    }

    /// A change that writes more rows once it has a version than before (as an edit deletes
    /// its old feed row): the change after it in the group that fails is the one blamed, with
    /// its own operation's index, and the bigger change commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failure_is_blamed_on_its_own_change_behind_a_change_that_grew() {
        let faults = FaultyTables::new(store());
        let (chat, room) = store_with_room(Tables::new(faults.clone())).await;
        let taken = Entity::new(room.as_str(), "taken");
        chat.tables.insert(&chat.schema.messages, &taken).await.unwrap();
        let grows: Build = {
            let room = room.to_string();
            Box::new(move |numbered: Numbered| {
                let mut ops = vec![BatchOp::Insert(Entity::new(room.clone(), "grown"))];
                if numbered.version > 0 {
                    ops.push(BatchOp::Insert(Entity::new(room.clone(), "grown-extra")));
                }
                ops
            })
        };
        faults.set_latency(Some(Duration::from_millis(50)));
        let mut changes = Vec::new();
        for build in [insert(&room, "lead"), grows, insert(&room, "taken")] {
            let (chat, room) = (chat.clone(), room.clone());
            changes.push(tokio::spawn(
                async move { chat.commit_change(&room, build, None).await },
            ));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut outcomes = Vec::new();
        for change in changes {
            outcomes.push(change.await.unwrap());
        }
        faults.set_latency(None);
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok(), "{outcomes:?}");
        let failed = outcomes[2].as_ref().unwrap_err();
        assert_eq!((failed.kind, failed.batch_index), (ErrorKind::AlreadyExists, Some(0)));
        for key in ["grown", "grown-extra"] {
            let row = chat
                .tables
                .get(&chat.schema.messages, room.as_str(), key)
                .await
                .unwrap();
            assert!(row.is_some(), "{key} committed");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_whose_request_is_dropped_still_commits() {
        let faults = FaultyTables::new(store());
        let (chat, room) = store_with_room(Tables::new(faults.clone())).await;
        faults.set_latency(Some(Duration::from_millis(50)));
        let lead = {
            let (chat, room) = (chat.clone(), room.clone());
            tokio::spawn(async move { chat.commit_change(&room, insert(&room, "lead"), None).await })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let dropped = {
            let (chat, room) = (chat.clone(), room.clone());
            tokio::spawn(async move { chat.commit_change(&room, insert(&room, "dropped"), None).await })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        dropped.abort(); // the client went away while its change waited for the turn
        lead.await.unwrap().unwrap();
        faults.set_latency(None);
        for _ in 0..100 {
            if chat
                .tables
                .get(&chat.schema.messages, room.as_str(), "dropped")
                .await
                .unwrap()
                .is_some()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("a queued change was stranded when its request was dropped");
    }
}
