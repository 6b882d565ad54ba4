//! Search: messages of the caller's rooms that answer a query, newest first.
//!
//! A page looks in a window of the caller's rooms (`search::page`). Each round reads, in every
//! room of the window with rows left, each word's bucket of the word index on from where that
//! room's last round stopped ([`ROWS_PER_READ`] rows per word and room, more each round), and
//! keeps the messages every word found. A room whose rows ran out has answered fully; one with
//! more only as far as it read, so a round decides the candidates up to the newest point any
//! such room reached, and keeps the rest for a later round. Each decided candidate is checked
//! against the message itself (`SearchQuery::matches`), in a room the caller is a member of
//! now: the index proposes, the message decides.
//!
//! A page costs at most three rounds × rooms × words range reads (525 rows per word and room in
//! all), the membership checks of the rooms with candidates, and one read per candidate
//! checked (at most [`MAX_CHECKED`]) and one per result shown (its reactions and votes); it may
//! answer fewer results than asked (or none) with `hasMore`, and the next page goes on where it
//! stopped. A room the query names is read only once the caller is known to be a member.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use futures::StreamExt as _;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::keys::MessageKey;
use crate::messages::Message;
use crate::rooms::MAX_ROOMS_PER_USER;
use crate::search::SearchQuery;
use crate::search::matching::Lookup;
use crate::search::page::{Position, ROOMS_PER_PAGE, SearchCursor, SearchPage, SearchParams, SearchResult};
use crate::store::words::{Posting, indexed_buckets};

/// Index rows one read of one word's bucket in one room takes, round by round: a page of the
/// newest results of common words needs few, a rare pair reads on further each round. The
/// rounds a page makes before it answers with what it found.
const ROWS_PER_READ: [usize; 3] = [25, 100, 400];
/// Rooms read at once, and candidates checked at once.
const AT_ONCE: usize = 8;
/// Candidates a page checks at most: a page of common words that most messages fail (a
/// filter, an exclusion) ends there, and the next goes on after the last one checked.
const MAX_CHECKED: usize = 200;

/// Search. Holds what it uses: the store, and the components it calls.
pub struct Searching {
    pub(crate) store: crate::store::Store,
    pub(crate) access: std::sync::Arc<crate::service::access::RoomAccess>,
    pub(crate) reading: std::sync::Arc<crate::service::read::Reading>,
}

/// What one round found in one room.
struct Scan {
    room: RoomId,
    /// Messages every word found, newest first, with the rows that found them.
    hits: Vec<(MessageKey, Vec<Posting>)>,
    /// Where the room's reads stopped when it has more rows: nothing older is decided.
    reached: Option<MessageKey>,
}

/// A room's standing for this search: the caller's member row is there, and its name.
type Standing = Option<String>;

impl Searching {
    pub async fn search(&self, who: &Principal, params: SearchParams) -> Result<SearchPage> {
        let query = SearchQuery::parse(&params.q)?;
        let limit = params.limit()?;
        let named = params
            .room_id
            .as_deref()
            .map(|id| RoomId::parse(id).map_err(|_| Error::bad_request(format!("roomId {id} is no room id"))))
            .transpose()?;
        if let (Some(named), Some(within)) = (&named, &query.room)
            && named != within
        {
            return Err(Error::bad_request(
                "roomId and in: name different rooms; nothing can match",
            ));
        }
        let cursor = match params.cursor.as_deref().filter(|c| !c.is_empty()) {
            Some(text) => SearchCursor::decode(text)?,
            None => SearchCursor::default(),
        };
        let mut standing: HashMap<RoomId, Standing> = HashMap::new();
        let mut rooms = match named.or(query.room.clone()) {
            // A room the caller is no member of is not read at all: even what a page's
            // `hasMore` would say of it is not theirs to learn.
            Some(room) => {
                let name = self.standing(&room, who).await?;
                let member = name.is_some();
                standing.insert(room.clone(), name);
                match member {
                    true => vec![room],
                    false => Vec::new(),
                }
            }
            None => self.store.members.user_rooms(&who.user_id, MAX_ROOMS_PER_USER).await?,
        };
        rooms.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        rooms.dedup();
        let start = cursor
            .window
            .as_ref()
            .map_or(0, |first| rooms.partition_point(|room| room.as_str() < first.as_str()));
        let window: Vec<RoomId> = rooms.iter().skip(start).take(ROOMS_PER_PAGE).cloned().collect();
        let next_window = rooms.get(start + ROOMS_PER_PAGE).cloned();
        let lookups = query.lookups();

        let mut results = Vec::new();
        let mut checked = 0;
        // Each room reads on from where its last round stopped; what it found beyond the
        // round's boundary waits for a later round.
        let mut reading: Vec<(RoomId, Bound<MessageKey>)> = window
            .into_iter()
            .map(|room| {
                let from = match &cursor.after {
                    None => Bound::Unbounded,
                    Some(after) if after.room.as_ref().is_some_and(|done| room.as_str() > done.as_str()) => {
                        Bound::Included(after.key.clone())
                    }
                    Some(after) => Bound::Excluded(after.key.clone()),
                };
                (room, from)
            })
            .collect();
        let mut waiting: Vec<(MessageKey, RoomId, Vec<Posting>)> = Vec::new();
        // A window with no room left to read has nothing after it.
        let mut position = cursor.after.clone().filter(|_| !reading.is_empty());
        for rows in ROWS_PER_READ {
            if reading.is_empty() {
                break;
            }
            let lookups = &lookups;
            let scans: Vec<Scan> = futures::stream::iter(std::mem::take(&mut reading))
                .map(|(room, from)| async move { self.scan(room, lookups, from, rows).await })
                .buffer_unordered(AT_ONCE)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_>>()?;
            // Nothing older than the newest point a room with more rows reached is decided.
            let boundary = scans
                .iter()
                .filter_map(|scan| scan.reached.clone())
                .min_by(|a, b| a.as_str().cmp(b.as_str()));
            for scan in scans {
                if let Some(reached) = &scan.reached {
                    reading.push((scan.room.clone(), Bound::Excluded(reached.clone())));
                }
                let room = scan.room;
                waiting.extend(scan.hits.into_iter().map(|(key, rows)| (key, room.clone(), rows)));
            }
            waiting.sort_by(|a, b| (a.0.as_str(), a.1.as_str()).cmp(&(b.0.as_str(), b.1.as_str())));
            let decided = match &boundary {
                Some(b) => waiting.partition_point(|(key, _, _)| key.as_str() <= b.as_str()),
                None => waiting.len(),
            };
            let candidates: Vec<_> = waiting.drain(..decided).collect();
            for chunk in candidates.chunks(AT_ONCE) {
                for (_, room, _) in chunk {
                    if !standing.contains_key(room) {
                        standing.insert(room.clone(), self.standing(room, who).await?);
                    }
                }
                let found = futures::future::join_all(chunk.iter().map(|(key, room, rows)| {
                    let name = standing.get(room).cloned().flatten();
                    self.check(&query, who, room, key, rows, name)
                }))
                .await;
                for ((key, room, _), found) in chunk.iter().zip(found) {
                    if let Some(found) = found? {
                        results.push(found);
                    }
                    checked += 1;
                    if results.len() == limit || checked == MAX_CHECKED {
                        let next = SearchCursor {
                            window: cursor.window.clone(),
                            after: Some(Position {
                                key: key.clone(),
                                room: Some(room.clone()),
                            }),
                        };
                        return Ok(SearchPage {
                            results,
                            has_more: true,
                            next_cursor: Some(next.encode()),
                        });
                    }
                }
            }
            position = boundary.map(|key| Position { key, room: None });
            if position.is_none() {
                break;
            }
        }
        let next = match (position, next_window) {
            (Some(after), _) => Some(SearchCursor {
                window: cursor.window.clone(),
                after: Some(after),
            }),
            (None, Some(room)) => Some(SearchCursor {
                window: Some(room),
                after: None,
            }),
            (None, None) => None,
        };
        Ok(SearchPage {
            results,
            has_more: next.is_some(),
            next_cursor: next.map(|cursor| cursor.encode()),
        })
    }

    /// One round in one room: each lookup's rows from `from` on, and the messages all of them
    /// found within the span every lookup covered.
    async fn scan(&self, room: RoomId, lookups: &[Lookup], from: Bound<MessageKey>, rows: usize) -> Result<Scan> {
        let room = &room;
        let from = from.as_ref();
        let reads = futures::future::try_join_all(lookups.iter().map(|lookup| async move {
            let (rows, more) = self.store.words.postings(room, &lookup.bucket, from, rows).await?;
            Ok::<_, Error>((lookup, rows, more))
        }))
        .await?;
        let reached = reads
            .iter()
            .filter(|(_, _, more)| *more)
            .filter_map(|(_, rows, _)| rows.last().map(|row| row.message.clone()))
            .min_by(|a, b| a.as_str().cmp(b.as_str()));
        let mut found: HashMap<MessageKey, (usize, Vec<Posting>)> = HashMap::new();
        for (lookup, rows, _) in reads {
            let mut counted = BTreeSet::new();
            for row in rows {
                if row.terms.is_empty() {
                    // Emptied by a change of its message whose job has not run: nothing
                    // finds it any more.
                    self.store.words.drop(room, &row).await;
                    continue;
                }
                if row.terms.iter().any(|term| lookup.finds(term)) && counted.insert(row.message.clone()) {
                    let entry = found.entry(row.message.clone()).or_default();
                    entry.0 += 1;
                    entry.1.push(row);
                }
            }
        }
        let mut hits: Vec<(MessageKey, Vec<Posting>)> = found
            .into_iter()
            .filter(|(key, (count, _))| {
                *count == lookups.len() && reached.as_ref().is_none_or(|r| key.as_str() <= r.as_str())
            })
            .map(|(key, (_, rows))| (key, rows))
            .collect();
        hits.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        Ok(Scan {
            room: room.clone(),
            hits,
            reached,
        })
    }

    /// The room's name when the caller is a member of it now (a room they left, were removed
    /// or banned from shows nothing, and nor does one being deleted).
    async fn standing(&self, room: &RoomId, who: &Principal) -> Result<Standing> {
        match self.access.access(room, &who.user_id).await {
            Ok(access) => Ok(Some(access.room.name)),
            Err(Error::NotFound(_) | Error::Forbidden(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A candidate as a result, shown as the caller sees it (reactions, votes, a forwarded
    /// copy's source only to its members), if its message as it is now answers the query in a
    /// room the caller belongs to.
    async fn check(
        &self,
        query: &SearchQuery,
        who: &Principal,
        room: &RoomId,
        key: &MessageKey,
        rows: &[Posting],
        room_name: Option<String>,
    ) -> Result<Option<SearchResult>> {
        let Some(room_name) = room_name else {
            return Ok(None);
        };
        let message: Option<Message> = self.store.messages.message(room, key).await?;
        // Rows of a message that is gone, or of buckets it no longer has, find nothing again.
        let buckets = message.as_ref().map(indexed_buckets).unwrap_or_default();
        let stale = rows.iter().filter(|row| !buckets.contains(&row.bucket));
        futures::future::join_all(stale.map(|row| self.store.words.drop(room, row))).await;
        let Some(message) = message.filter(|message| query.matches(message)) else {
            return Ok(None);
        };
        let mut shown = [message];
        self.reading.decorate(room, &who.user_id, &mut shown).await?;
        let [message] = shown;
        Ok(Some(SearchResult {
            highlights: query.highlights(&message),
            room_id: room.to_string(),
            room_name,
            message,
        }))
    }
}
