//! Invitation rows: `inv:<id>` in the room's `Rooms` partition (beside the member and ban rows
//! an acceptance concerns), and for a user's invitation a pointer row `inv:<room id>` in that
//! user's `UserRooms` partition, behind "my invitations". The pointer is written before the
//! invitation and removed after it, and every listing re-checks the invitation, so a pointer
//! left behind never shows an invitation that is gone.

use chrono::{DateTime, Utc};

use super::error::{Result, settle};
use super::moderation_log::log_op;
use super::schema::{INVITATION_PREFIX, invitation_key, pending_invitation_key, user_key};
use tabletalk_domain::error::Error;
use tabletalk_domain::ids::{RoomId, UserId};
use tabletalk_domain::moderation::ModerationEntry;
use tabletalk_domain::rooms::invitations::{Invitation, MAX_LISTED, MAX_PENDING_PER_USER};
use tabletalk_tables::conditional::update_conditionally;
use tabletalk_tables::{BatchOp, Entity, ErrorKind, IfMatch, RangeQuery, UpdateMode, Value};

fn invitation_row(invitation: &Invitation) -> Entity {
    let mut row = Entity::new(&invitation.room_id, invitation_key(&invitation.id))
        .with("createdBy", Value::String(invitation.created_by.clone()))
        .with("createdAt", Value::datetime(invitation.created_at))
        .with("uses", Value::Int64(i64::from(invitation.uses)));
    if let Some(user) = &invitation.user_id {
        row.set("userId", Value::String(user.clone()));
    }
    if let Some(at) = invitation.expires_at {
        row.set("expiresAt", Value::datetime(at));
    }
    if let Some(max) = invitation.max_uses {
        row.set("maxUses", Value::Int64(i64::from(max)));
    }
    row
}

fn parse_invitation(row: &Entity) -> Option<Invitation> {
    Some(Invitation {
        id: row.row_key.strip_prefix(INVITATION_PREFIX)?.to_owned(),
        room_id: row.partition_key.clone(),
        user_id: row.str("userId").map(str::to_owned),
        code: None,
        created_by: row.str("createdBy")?.to_owned(),
        created_at: row.datetime("createdAt")?,
        expires_at: row.datetime("expiresAt"),
        max_uses: row.i64("maxUses").and_then(|m| u32::try_from(m).ok()),
        uses: row.i64("uses").and_then(|u| u32::try_from(u).ok()).unwrap_or(0),
    })
}

/// Invitations and invitation codes. Holds the tables it uses and, as fields, the surfaces it
/// calls.
#[derive(Debug, Clone)]
pub struct InvitationStore {
    pub(crate) tables: tabletalk_tables::Tables,
    pub(crate) schema: std::sync::Arc<crate::Schema>,
}

impl InvitationStore {
    /// Writes an invitation (a user's replaces their earlier one into the same room), a
    /// user's pointer row first.
    pub async fn put_invitation(&self, invitation: &Invitation) -> Result<()> {
        if let Some(user) = &invitation.user_id {
            let room = RoomId::parse(&invitation.room_id)?;
            let user = UserId::parse(user)?;
            let pointer = Entity::new(user_key(&user), pending_invitation_key(&room))
                .with("invitationId", Value::String(invitation.id.clone()));
            self.tables
                .upsert(&self.schema.user_rooms, &pointer, UpdateMode::Replace)
                .await?;
        }
        self.tables
            .upsert(&self.schema.rooms, &invitation_row(invitation), UpdateMode::Replace)
            .await?;
        Ok(())
    }

    /// The invitation, open or not.
    pub async fn invitation(&self, room: &RoomId, id: &str) -> Result<Option<Invitation>> {
        let row = self
            .tables
            .get(&self.schema.rooms, room.as_str(), &invitation_key(id))
            .await?;
        Ok(row.as_ref().and_then(parse_invitation))
    }

    /// A room's invitations, open or not, up to [`MAX_LISTED`].
    pub async fn invitations(&self, room: &RoomId) -> Result<Vec<Invitation>> {
        let query = RangeQuery::prefix(room.as_str(), INVITATION_PREFIX, 1000);
        let (rows, _) = self.tables.query_up_to(&self.schema.rooms, &query, MAX_LISTED).await?;
        Ok(rows.iter().filter_map(parse_invitation).collect())
    }

    /// Counts one use of a code, conditionally on the row as read, if it is still open at
    /// `now`; a closed or missing invitation answers 404, as a missing one does.
    pub async fn use_invitation(&self, room: &RoomId, id: &str, now: DateTime<Utc>) -> Result<Invitation> {
        let row = update_conditionally(
            &self.tables,
            &self.schema.rooms,
            room.as_str(),
            &invitation_key(id),
            UpdateMode::Replace,
            |row| {
                let mut invitation = parse_invitation(&row)
                    .filter(|i| i.is_open(now))
                    .ok_or_else(|| Error::not_found("invitation not found"))?;
                invitation.uses += 1;
                Ok(invitation_row(&invitation))
            },
        )
        .await
        .map_err(|e| settle(e, "invitation not found"))?;
        parse_invitation(&row).ok_or_else(|| Error::Internal("an invitation row did not read back".into()).into())
    }

    /// Removes an invitation (with its revocation's log line, in one transaction), then a
    /// user's pointer row to it. One gone already is left so, and logs nothing.
    pub async fn remove_invitation(&self, invitation: &Invitation, revoked: Option<&ModerationEntry>) -> Result<()> {
        let room = RoomId::parse(&invitation.room_id)?;
        let mut ops = vec![BatchOp::Delete {
            partition_key: room.to_string(),
            row_key: invitation_key(&invitation.id),
            if_match: IfMatch::Any,
        }];
        ops.extend(revoked.map(|entry| log_op(&room, entry)));
        match self.tables.transact(&self.schema.rooms, room.as_str(), &ops).await {
            Ok(_) => {}
            Err(e) if e.is(ErrorKind::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(user) = &invitation.user_id {
            self.drop_pending_invitation(&UserId::parse(user)?, &room).await?;
        }
        Ok(())
    }

    /// Removes `user`'s pointer to an invitation into `room`.
    pub async fn drop_pending_invitation(&self, user: &UserId, room: &RoomId) -> Result<()> {
        crate::delete_if_present(
            &self.tables,
            &self.schema.user_rooms,
            &user_key(user),
            &pending_invitation_key(room),
        )
        .await
    }

    /// The rooms `user` has an invitation pointer for, up to [`MAX_LISTED`].
    pub async fn pending_invitations(&self, user: &UserId) -> Result<Vec<RoomId>> {
        let query = RangeQuery::prefix(user_key(user), INVITATION_PREFIX, 1000);
        let (rows, _) = self
            .tables
            .query_up_to(&self.schema.user_rooms, &query, MAX_PENDING_PER_USER)
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| RoomId::parse(row.row_key.strip_prefix(INVITATION_PREFIX)?).ok())
            .collect())
    }

    /// Removes the pointer rows of a room's user invitations (the room is being deleted; its
    /// own partition goes with it).
    pub async fn unlist_invitations(&self, room: &RoomId) -> Result<()> {
        for invitation in self.invitations(room).await? {
            if let Some(user) = invitation.user_id.as_deref().and_then(|u| UserId::parse(u).ok()) {
                self.drop_pending_invitation(&user, room).await?;
            }
        }
        Ok(())
    }
}
