//! Web Push: users' subscriptions (`subscriptions`) and sending one push (`sender`). Who gets a
//! push for a message is decided in `notifications`.

pub mod sender;
pub mod subscriptions;

/// How push is configured for this deployment.
#[derive(Debug, Clone, Default)]
pub struct PushSettings {
    /// The sender, when a VAPID key is configured; without one no push is sent.
    pub sender: Option<sender::PushSender>,
    /// Development only: accept `http` and loopback/private endpoints.
    pub allow_private_endpoints: bool,
}
