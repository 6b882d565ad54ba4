//! Report rows in the room's `Rooms` partition: one per member's report of a message
//! (`report:<message id>:<user>`), kept for good so a member reports a message once; and one
//! group row per reported message — `reports:open:<message id>` while its reports are open,
//! moved to `reports:closed:<message id>` when they are resolved. The queue is one range read
//! of the open groups, whatever number were resolved before.
//!
//! A group counts resolution rounds: a report belongs to the round its group was in when it
//! was made, and the queue shows a group's reports of its current round. Every change to a
//! group commits in one transaction with the report that caused it, and a resolution with
//! its moderation log entries.

use chrono::{DateTime, Utc};

use super::error::Result;
use super::moderation_log::log_op;
use super::schema::{OPEN_REPORTS_PREFIX, REPORT_PREFIX, closed_reports_key, open_reports_key, report_key, reports_of};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::keys::MessageKey;
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::reports::{Report, Resolution};
use tabletalk_tables::conditional::{Attempt, retry_lost_races};
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

/// Rows of one message's reports read to find its current round's (older rounds' rows are
/// skipped).
const MAX_REPORT_ROWS: usize = 5_000;

/// A message's open reports, as its group row keeps them.
#[derive(Debug, Clone)]
pub struct OpenGroup {
    pub message: MessageKey,
    pub count: u32,
    pub round: u32,
    pub first_reported_at: DateTime<Utc>,
    pub last_reported_at: DateTime<Utc>,
}

/// How a report's write ended.
#[derive(Debug, Clone)]
pub enum Reported {
    New(Report),
    /// The member had reported the message before: this report, as it was.
    Repeat(Report),
}

fn group_row(room: &RoomId, group: &OpenGroup) -> Entity {
    Entity::new(room.as_str(), open_reports_key(&group.message))
        .with("count", Value::Int64(i64::from(group.count)))
        .with("round", Value::Int64(i64::from(group.round)))
        .with("firstReportedAt", Value::datetime(group.first_reported_at))
        .with("lastReportedAt", Value::datetime(group.last_reported_at))
}

fn number(row: &Entity, name: &str) -> u32 {
    row.i64(name).and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
}

fn parse_group(row: &Entity) -> Option<OpenGroup> {
    Some(OpenGroup {
        message: MessageKey::parse(row.row_key.strip_prefix(OPEN_REPORTS_PREFIX)?)?,
        count: number(row, "count"),
        round: number(row, "round"),
        first_reported_at: row.datetime("firstReportedAt")?,
        last_reported_at: row.datetime("lastReportedAt")?,
    })
}

fn report_row(room: &RoomId, message: &MessageKey, reporter: &UserId, report: &Report, round: u32) -> Entity {
    Entity::new(room.as_str(), report_key(message, reporter))
        .with("messageId", Value::String(report.message_id.clone()))
        .with("reporterId", Value::String(report.reporter_id.clone()))
        .with("reporterName", Value::String(report.reporter_name.clone()))
        .with("reason", Value::String(report.reason.clone()))
        .with("reportedAt", Value::datetime(report.reported_at))
        .with("round", Value::Int64(i64::from(round)))
}

fn parse_report(row: &Entity) -> Option<Report> {
    Some(Report {
        message_id: row.str("messageId")?.to_owned(),
        reporter_id: row.str("reporterId")?.to_owned(),
        reporter_name: row.str("reporterName").unwrap_or_default().to_owned(),
        reason: row.str("reason").unwrap_or_default().to_owned(),
        reported_at: row.datetime("reportedAt")?,
    })
}

/// True for a failed transaction that lost a race on one of the rows it read.
fn lost_race(e: &tabletalk_tables::StoreError) -> bool {
    e.is(ErrorKind::PreconditionFailed) || e.is(ErrorKind::AlreadyExists) || e.is(ErrorKind::NotFound)
}

fn conflict() -> super::error::Error {
    Error::Conflict("the reports of this message changed meanwhile; try again".into()).into()
}

/// Reports of messages and their groups. Holds the tables it uses and, as fields, the surfaces it
/// calls.
#[derive(Debug, Clone)]
pub struct ReportStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
    /// What time it is when a row is stamped.
    pub(crate) clock: std::sync::Arc<dyn tabletalk_clock::Clock>,
    pub(crate) moderation_log: crate::moderation_log::ModerationLogStore,
}

impl ReportStore {
    /// Records `report` by `reporter`, unless they reported the message before: the report
    /// row and its group's new count (opening the group, in a new round, if it was closed)
    /// in one transaction, each conditional on the rows as read.
    pub async fn add_report(
        &self,
        room: &RoomId,
        message: &MessageKey,
        reporter: &UserId,
        report: &Report,
    ) -> Result<Reported> {
        let (table, partition) = (&self.schema.rooms, room.as_str());
        let attempt = move || async move {
            let (mine_key, open_key) = (report_key(message, reporter), open_reports_key(message));
            let (mine, open) = tokio::try_join!(
                self.tables.get(table, partition, &mine_key),
                self.tables.get(table, partition, &open_key),
            )?;
            if let Some(mine) = mine {
                let stored = parse_report(&mine)
                    .ok_or_else(|| Error::Internal(format!("report row {partition}/{} is broken", mine.row_key)))?;
                return Ok(Attempt::Done(Reported::Repeat(stored)));
            }
            let mut ops = Vec::new();
            let round = match open.as_ref().and_then(|row| Some((row, parse_group(row)?))) {
                Some((row, mut group)) => {
                    group.count += 1;
                    group.last_reported_at = report.reported_at;
                    ops.push(BatchOp::Update {
                        entity: group_row(room, &group),
                        mode: UpdateMode::Replace,
                        if_match: row.etag.clone().map_or(IfMatch::Any, IfMatch::Etag),
                    });
                    group.round
                }
                None => {
                    let closed = self.tables.get(table, partition, &closed_reports_key(message)).await?;
                    let round = closed.as_ref().map_or(0, |row| number(row, "round")) + 1;
                    let group = OpenGroup {
                        message: message.clone(),
                        count: 1,
                        round,
                        first_reported_at: report.reported_at,
                        last_reported_at: report.reported_at,
                    };
                    ops.push(BatchOp::Insert(group_row(room, &group)));
                    if let Some(closed) = closed {
                        ops.push(BatchOp::Delete {
                            partition_key: partition.to_owned(),
                            row_key: closed.row_key.clone(),
                            if_match: closed.etag.clone().map_or(IfMatch::Any, IfMatch::Etag),
                        });
                    }
                    round
                }
            };
            ops.push(BatchOp::Insert(report_row(room, message, reporter, report, round)));
            match self.tables.transact(table, partition, &ops).await {
                Ok(_) => Ok(Attempt::Done(Reported::New(report.clone()))),
                // Another report (perhaps this member's own, sent twice) or a resolution got
                // there first: look again.
                Err(e) if lost_race(&e) => Ok(Attempt::LostRace),
                Err(e) => Err(e.into()),
            }
        };
        retry_lost_races::<_, super::error::Error, _, _>(attempt)
            .await?
            .ok_or_else(conflict)
    }

    /// Withdraws every report `user` made in `room` (an erasure): each report row goes, with
    /// its open group's count lowered (the group closed, unlogged, when it was the last), in
    /// one transaction conditional on both rows as read. Answers how many went.
    pub async fn withdraw_reports_by(&self, room: &RoomId, user: &UserId) -> Result<u64> {
        let (table, partition) = (&self.schema.rooms, room.as_str());
        let query = RangeQuery::prefix(partition, REPORT_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(table, &query, MAX_REPORT_ROWS * 20).await?;
        let mut withdrawn = 0;
        for row in rows.iter().filter(|row| row.str("reporterId") == Some(user.as_str())) {
            let Some(message) = row.str("messageId").and_then(MessageKey::parse) else {
                continue;
            };
            let open_key = open_reports_key(&message);
            let open_key = &open_key;
            let attempt = move || async move {
                let (mine, open) = tokio::try_join!(
                    self.tables.get(table, partition, &row.row_key),
                    self.tables.get(table, partition, &open_key),
                )?;
                let Some(mine) = mine else {
                    return Ok(Attempt::Done(false));
                };
                let mut ops = vec![BatchOp::Delete {
                    partition_key: partition.to_owned(),
                    row_key: mine.row_key.clone(),
                    if_match: mine.etag.clone().map_or(IfMatch::Any, IfMatch::Etag),
                }];
                let group = open.as_ref().and_then(|row| Some((row, parse_group(row)?)));
                if let Some((open, mut group)) = group.filter(|(_, g)| g.round == number(&mine, "round")) {
                    let if_match = open.etag.clone().map_or(IfMatch::Any, IfMatch::Etag);
                    ops.push(match group.count > 1 {
                        true => {
                            group.count -= 1;
                            BatchOp::Update {
                                entity: group_row(room, &group),
                                mode: UpdateMode::Replace,
                                if_match,
                            }
                        }
                        false => BatchOp::Delete {
                            partition_key: partition.to_owned(),
                            row_key: open.row_key.clone(),
                            if_match,
                        },
                    });
                }
                match self.tables.transact(table, partition, &ops).await {
                    Ok(_) => Ok(Attempt::Done(true)),
                    Err(e) if lost_race(&e) => Ok(Attempt::LostRace),
                    Err(e) => Err(e.into()),
                }
            };
            if retry_lost_races::<_, super::error::Error, _, _>(attempt)
                .await?
                .ok_or_else(conflict)?
            {
                withdrawn += 1;
            }
        }
        Ok(withdrawn)
    }

    /// The open group of a message, if its reports are open.
    pub async fn open_reports(&self, room: &RoomId, message: &MessageKey) -> Result<Option<OpenGroup>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &open_reports_key(message))
            .await?;
        Ok(row.as_ref().and_then(parse_group))
    }

    /// Every open group of a room, up to `max`.
    pub async fn open_report_groups(&self, room: &RoomId, max: usize) -> Result<Vec<OpenGroup>> {
        let query = RangeQuery::prefix(room.as_str(), OPEN_REPORTS_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, max).await?;
        Ok(rows.iter().filter_map(parse_group).collect())
    }

    /// The reports of `group`'s current round, oldest first, up to `max`.
    pub async fn group_reports(&self, room: &RoomId, group: &OpenGroup, max: usize) -> Result<Vec<Report>> {
        let query = RangeQuery::prefix(room.as_str(), &reports_of(&group.message), 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.rooms, &query, MAX_REPORT_ROWS)
            .await?;
        let mut reports: Vec<Report> = rows
            .iter()
            .filter(|row| number(row, "round") == group.round)
            .filter_map(parse_report)
            .collect();
        reports.sort_by_key(|r| r.reported_at);
        reports.truncate(max);
        Ok(reports)
    }

    /// Closes a message's open reports as `resolution` by `by`, with `entries` and the entry
    /// `resolved` makes of the group as closed, in one transaction (again after a report that
    /// raced in). With no reports open, writes `entries` alone and answers `None`.
    pub async fn close_reports(
        &self,
        room: &RoomId,
        message: &MessageKey,
        resolution: Resolution,
        by: Option<&UserId>,
        entries: &[ModerationEntry],
        resolved: impl Fn(&OpenGroup) -> ModerationEntry,
    ) -> Result<Option<OpenGroup>> {
        let (table, partition) = (&self.schema.rooms, room.as_str());
        let resolved = &resolved;
        let attempt = move || async move {
            let row = self.tables.get(table, partition, &open_reports_key(message)).await?;
            let Some((row, group)) = row.as_ref().and_then(|row| Some((row, parse_group(row)?))) else {
                self.moderation_log.append_log(room, entries).await?;
                return Ok(Attempt::Done(None));
            };
            let mut closed = Entity::new(partition, closed_reports_key(message))
                .with("round", Value::Int64(i64::from(group.round)))
                .with("count", Value::Int64(i64::from(group.count)))
                .with("resolution", Value::String(resolution.as_str().into()))
                .with("resolvedAt", Value::datetime(self.clock.now()));
            if let Some(by) = by {
                closed.set("resolvedBy", Value::String(by.to_string()));
            }
            let mut ops = vec![
                BatchOp::Delete {
                    partition_key: partition.to_owned(),
                    row_key: row.row_key.clone(),
                    if_match: row.etag.clone().map_or(IfMatch::Any, IfMatch::Etag),
                },
                BatchOp::Upsert {
                    entity: closed,
                    mode: UpdateMode::Replace,
                },
            ];
            ops.extend(entries.iter().map(|e| log_op(room, e)));
            ops.push(log_op(room, &resolved(&group)));
            match self.tables.transact(table, partition, &ops).await {
                Ok(_) => Ok(Attempt::Done(Some(group))),
                Err(e) if lost_race(&e) => Ok(Attempt::LostRace),
                Err(e) => Err(e.into()),
            }
        };
        retry_lost_races::<_, super::error::Error, _, _>(attempt)
            .await?
            .ok_or_else(conflict)
    }
}
