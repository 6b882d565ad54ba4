//! Reading the moderation log: newest first, a page at a time, for members holding one of the
//! moderation permissions (`moderation::LOG_READERS`). Writing it is each action's own (see
//! `store::moderation_log`).

use super::read::Reading;
use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::RoomId;
use crate::moderation::{
    DEFAULT_LOG_LIMIT, LogCursor, MAX_LOG_LIMIT, ModerationLogPage, ReadModerationLog, require_log_reader,
};

impl Reading {
    pub async fn moderation_log(
        &self,
        who: &Principal,
        room: &RoomId,
        request: ReadModerationLog,
    ) -> Result<ModerationLogPage> {
        let limit = request.limit.unwrap_or(DEFAULT_LOG_LIMIT);
        if !(1..=MAX_LOG_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1..={MAX_LOG_LIMIT}")));
        }
        let after = request
            .cursor
            .as_deref()
            .map(|text| LogCursor::decode(text, room))
            .transpose()?;
        let access = self.access.access(room, &who.user_id).await?;
        require_log_reader(&access)?;
        let (entries, has_more) = self
            .store
            .moderation_log
            .moderation_log(room, after.as_ref().map(|c| c.0.as_str()), limit)
            .await?;
        let next_cursor = match (has_more, entries.last()) {
            (true, Some(last)) => Some(LogCursor(last.id.clone()).encode(room)),
            _ => None,
        };
        Ok(ModerationLogPage {
            entries,
            has_more,
            next_cursor,
        })
    }
}
