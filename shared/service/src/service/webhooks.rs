//! Inbound webhooks: members with ManageWebhooks create, list, rename, rotate and delete a
//! room's webhooks; whoever holds a webhook's secret URL posts `Webhook` lines with it, through
//! the one door (`service::send`, [`Submission::Webhook`]).
//!
//! A deleted webhook, a rotated-away token, a wrong token and an id that names nothing all
//! answer the same 404, so the URL tells its holder nothing once it is no longer theirs.
//!
//! Making, renaming, rotating and deleting a webhook are moderation actions: each commits
//! with its moderation log line (the webhook's id and name, never its URL or token).
//!
//! A webhook, inbound or outgoing, acts with its maker's standing: it works only while its
//! maker is a member of the room who may manage its webhooks ([`Sending::maker_may_manage_webhooks`],
//! checked at every post and every delivery run). A kick, ban, leave, erasure or lost role
//! stops the maker's webhooks at once, with no sweep that could miss one; a maker given the
//! right back finds them working again, and any other manager can delete or replace them.

use super::send::Sending;
use crate::service::send::Submission;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::ids::{ClientId, RoomId, UserId};
use crate::messages::send::Sent;
use crate::moderation::{ModerationAction, ModerationEntry};
use crate::permissions::Permission;
use crate::store::stored_time;
use crate::webhooks::{self, MAX_WEBHOOKS_PER_ROOM, Webhook, WebhookName, WebhookPayload, WebhookWithUrl, missing};

impl Sending {
    /// Creates a webhook; its secret URL is in this answer only.
    pub async fn create_webhook(&self, who: &Principal, room: &RoomId, input: WebhookName) -> Result<WebhookWithUrl> {
        let name = input.checked()?;
        self.webhook_manager(room, who).await?;
        if self.store.webhooks.webhooks(room).await?.len() >= MAX_WEBHOOKS_PER_ROOM {
            return Err(Error::Conflict(format!(
                "a room has at most {MAX_WEBHOOKS_PER_ROOM} webhooks; delete one first"
            )));
        }
        let (token, token_hash) = webhooks::new_token();
        let hook = Webhook {
            id: webhooks::new_id(room),
            room_id: room.to_string(),
            name,
            created_by: who.user_id.to_string(),
            created_at: stored_time(self.store.now()),
            automation: input.automation.unwrap_or(false),
            token_hash,
        };
        let logged =
            webhook_entry(ModerationAction::WebhookCreated, who, &hook.id, self.store.now()).detail("name", &hook.name);
        self.store.webhooks.insert_webhook(&hook, &logged).await?;
        Ok(WebhookWithUrl {
            url: webhooks::url(&hook.id, &token),
            webhook: hook,
        })
    }

    pub async fn list_webhooks(&self, who: &Principal, room: &RoomId) -> Result<Vec<Webhook>> {
        self.webhook_manager(room, who).await?;
        Ok(self.store.webhooks.webhooks(room).await?)
    }

    pub async fn rename_webhook(
        &self,
        who: &Principal,
        room: &RoomId,
        id: &str,
        input: WebhookName,
    ) -> Result<Webhook> {
        let name = input.checked()?;
        self.webhook_manager(room, who).await?;
        webhooks::check_id_of(room, id)?;
        let logged = webhook_entry(ModerationAction::WebhookRenamed, who, id, self.store.now()).detail("name", &name);
        Ok(self
            .store
            .webhooks
            .update_webhook(room, id, |hook| hook.name = name.clone(), &logged)
            .await?)
    }

    /// A new token for the webhook; the old URL answers 404 from now on.
    pub async fn rotate_webhook(&self, who: &Principal, room: &RoomId, id: &str) -> Result<WebhookWithUrl> {
        self.webhook_manager(room, who).await?;
        webhooks::check_id_of(room, id)?;
        let (token, token_hash) = webhooks::new_token();
        let logged = webhook_entry(ModerationAction::WebhookRotated, who, id, self.store.now());
        let hook = self
            .store
            .webhooks
            .update_webhook(room, id, |hook| hook.token_hash = token_hash.clone(), &logged)
            .await?;
        Ok(WebhookWithUrl {
            url: webhooks::url(&hook.id, &token),
            webhook: hook,
        })
    }

    pub async fn delete_webhook(&self, who: &Principal, room: &RoomId, id: &str) -> Result<()> {
        self.webhook_manager(room, who).await?;
        webhooks::check_id_of(room, id)?;
        let logged = webhook_entry(ModerationAction::WebhookDeleted, who, id, self.store.now());
        Ok(self.store.webhooks.delete_webhook(room, id, &logged).await?)
    }

    /// A message posted to a webhook's secret URL. `key` (an `Idempotency-Key`) makes a retry
    /// safe: a repeat answers with the message the first stored.
    pub async fn post_to_webhook(
        &self,
        id: &str,
        token: &str,
        payload: WebhookPayload,
        key: Option<&str>,
    ) -> Result<Sent> {
        let room = webhooks::parse_id(id)?;
        let hook = match self.store.webhooks.webhook(&room, id).await? {
            Some(hook) if hook.accepts(token) => hook,
            _ => return Err(missing()),
        };
        let room_row = self.store.rooms.room(&room).await?.ok_or_else(missing)?;
        if !self.maker_may_manage_webhooks(&room, &hook.created_by).await? {
            return Err(Error::Forbidden(
                "this webhook's maker may no longer manage the room's webhooks; a manager can make a new one".into(),
            ));
        }
        let checked = payload.checked()?;
        let client_id = key.map(ClientId::parse).transpose()?;
        let author = UserId::parse(&hook.author_id())?;
        if let Some(client_id) = &client_id
            && let Some(first) = self
                .store
                .messages
                .sent_with_client_id(&room, &author, client_id)
                .await?
        {
            return Ok(Sent::repeat(first));
        }
        let access = hook.access(room_row)?;
        let webhook = Submission::Webhook {
            hook,
            access,
            payload: checked,
            client_id,
        };
        self.submit(&room, webhook).await
    }

    /// Whether a webhook made by `maker` may still act: they are a member of `room` who may
    /// manage its webhooks. A store failure is an error, never a yes.
    pub(crate) async fn maker_may_manage_webhooks(&self, room: &RoomId, maker: &str) -> Result<bool> {
        let Ok(maker) = UserId::parse(maker) else {
            return Ok(false);
        };
        match self.access.access(room, &maker).await {
            Ok(access) => Ok(access.require(Permission::ManageWebhooks).is_ok()),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The caller's access, if they may manage the room's webhooks (a non-member: 404).
    async fn webhook_manager(&self, room: &RoomId, who: &Principal) -> Result<()> {
        self.access
            .access(room, &who.user_id)
            .await?
            .require(Permission::ManageWebhooks)
    }
}

/// The log line of a change to webhook `id` by `who`.
fn webhook_entry(
    action: ModerationAction,
    who: &Principal,
    id: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> ModerationEntry {
    ModerationEntry::by(action, &who.user_id, at).detail("webhookId", id)
}
