//! Live delivery: the URL a browser connects to for its rooms' live signals (`negotiate`).
//! Signals themselves, typing and the local Web PubSub-compatible server are still to come
//! (issue 4).

pub mod web_pubsub;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::service::Chat;

/// What `negotiate` answers.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Negotiated {
    /// A Web PubSub client URL (`wss://…/client/hubs/<hub>?access_token=…`).
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

impl Chat {
    /// A client URL whose token lets the caller join the live groups of their rooms, and only
    /// those.
    pub async fn negotiate(&self, who: &Principal) -> Result<Negotiated> {
        let Some(web_pubsub) = &self.web_pubsub else {
            return Err(Error::Unavailable("live delivery is not configured here".into()));
        };
        let rooms: Vec<String> = self
            .my_rooms(who)
            .await?
            .into_iter()
            .map(|entry| entry.room.id)
            .collect();
        let (url, expires_at) = web_pubsub.client_url(who.user_id.as_str(), &rooms, Utc::now())?;
        Ok(Negotiated { url, expires_at })
    }
}
