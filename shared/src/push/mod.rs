//! Web Push: users' subscriptions (`subscriptions`) and sending one push (`sender`). Who gets a
//! push for a message is decided in `notifications`.

pub mod sender;
pub mod subscriptions;

/// A new VAPID key pair, base64url: the 32-byte private key and the 65-byte public key.
pub fn generate_vapid_key() -> crate::Result<(String, String)> {
    use base64::Engine as _;
    let failed = |e: openssl::error::ErrorStack| crate::Error::Internal(format!("key generation: {e}"));
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).map_err(failed)?;
    let key = openssl::ec::EcKey::generate(&group).map_err(failed)?;
    let private = key.private_key().to_vec_padded(32).map_err(failed)?;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(private);
    let public = sender::PushSender::new(&encoded, "mailto:unused@localhost")?
        .public_key()
        .to_owned();
    Ok((encoded, public))
}

/// How push is configured for this deployment.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// The sender, when a VAPID key is configured; without one no push is sent.
    pub sender: Option<sender::PushSender>,
    /// Development only: accept `http` and loopback/private endpoints.
    pub allow_private_endpoints: bool,
    /// How long a notification run's claim on an event holds off other runs unless renewed
    /// (`notifications`).
    pub claim_lease: std::time::Duration,
    /// The longest one subscription's delivery may take, all its attempts and waits included.
    pub delivery_deadline: std::time::Duration,
}

/// The default [`PushSettings::claim_lease`].
pub const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(180);

impl Default for PushSettings {
    fn default() -> PushSettings {
        PushSettings {
            sender: None,
            allow_private_endpoints: false,
            claim_lease: CLAIM_LEASE,
            delivery_deadline: crate::notifications::DELIVERY_DEADLINE,
        }
    }
}
