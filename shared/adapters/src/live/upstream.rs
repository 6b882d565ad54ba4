//! Azure Web PubSub's upstream event handler, as far as presence needs it: the service posts
//! a client's `connected` and `disconnected` system events to our function, and this module
//! says whether a posted event really comes from our hub.
//!
//! What this relies on (Microsoft's "CloudEvents extension for Azure Web PubSub event handler
//! with HTTP protocol", learn.microsoft.com/azure/azure-web-pubsub/reference-cloud-events):
//! - Events come in CloudEvents binary mode: the attributes are headers, `ce-type`
//!   (`azure.webpubsub.sys.connected` / `azure.webpubsub.sys.disconnected`), `ce-hub`,
//!   `ce-connectionId`, `ce-userId`, `ce-eventName`, and the body is `{}` or `{"reason":…}`.
//! - `ce-signature` is `sha256=<hex>` once per access key, comma separated (primary, then
//!   secondary): `Hex_encoded(HMAC_SHA256(accessKey, connectionId))`, the key's UTF-8 bytes as
//!   the HMAC key. The upstream must check it before processing. One match with any key we hold
//!   suffices, so a key rotation (the app holding either key) keeps working.
//! - The abuse-protection preflight is an `OPTIONS` with `WebHook-Request-Origin:
//!   <name>.webpubsub.azure.com`, answered with `WebHook-Allowed-Origin` (that host or `*`);
//!   the HTTP layer answers it.
//! - `connected` and `disconnected` are non-blocking: the service only logs a non-2xx answer
//!   and does not retry, so presence may miss an event; the next event of that user settles it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use tabletalk_domain::error::{Error, Result};

pub const CONNECTED: &str = "azure.webpubsub.sys.connected";
pub const DISCONNECTED: &str = "azure.webpubsub.sys.disconnected";

/// The CloudEvents attributes of one posted event, as the headers carried them.
#[derive(Debug, Clone, Default)]
pub struct EventHeaders {
    pub ce_type: Option<String>,
    pub hub: Option<String>,
    pub connection_id: Option<String>,
    pub user_id: Option<String>,
    pub signature: Option<String>,
}

/// What a verified event says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEvent {
    Connected {
        user: String,
        connection: String,
    },
    Disconnected {
        user: String,
        connection: String,
    },
    /// Another event, or one of a connection with no user: nothing for presence.
    Other,
}

/// The keys events are signed with, and the hub they must name.
#[derive(Clone)]
pub struct Upstream {
    keys: Vec<String>,
    hub: String,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    pub fn new(keys: Vec<String>, hub: &str) -> Upstream {
        Upstream {
            keys,
            hub: hub.to_owned(),
        }
    }

    /// The event, if its signature matches one of our keys over its connection id (else
    /// `Unauthorized`, before anything of it is believed) and it names our hub.
    pub fn verify(&self, headers: &EventHeaders) -> Result<ConnectionEvent> {
        let refused = || Error::Unauthorized("the event's ce-signature does not match the hub's access key".into());
        let connection = headers
            .connection_id
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(refused)?;
        let signature = headers.signature.as_deref().ok_or_else(refused)?;
        if !self.signed(connection, signature) {
            return Err(refused());
        }
        if headers
            .hub
            .as_deref()
            .is_some_and(|hub| !hub.eq_ignore_ascii_case(&self.hub))
        {
            return Err(Error::bad_request("the event names another hub"));
        }
        let user = headers.user_id.clone().filter(|u| !u.is_empty());
        Ok(match (headers.ce_type.as_deref(), user) {
            (Some(CONNECTED), Some(user)) => ConnectionEvent::Connected {
                user,
                connection: connection.to_owned(),
            },
            (Some(DISCONNECTED), Some(user)) => ConnectionEvent::Disconnected {
                user,
                connection: connection.to_owned(),
            },
            (None, _) => return Err(Error::bad_request("ce-type is missing")),
            _ => ConnectionEvent::Other,
        })
    }

    /// Whether one of the `sha256=<hex>` values of `header` is the HMAC of `connection` with
    /// one of our keys (compared in constant time by the HMAC crate).
    fn signed(&self, connection: &str, header: &str) -> bool {
        let candidates: Vec<Vec<u8>> = header
            .split(',')
            .filter_map(|part| part.trim().strip_prefix("sha256="))
            .filter_map(decode_hex)
            .collect();
        self.keys.iter().any(|key| {
            candidates.iter().any(|candidate| {
                let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
                    return false;
                };
                mac.update(connection.as_bytes());
                mac.verify_slice(candidate).is_ok()
            })
        })
    }
}

/// `ce-signature` for `connection` as the service writes it, one value per key: for tests
/// and stand-ins that post events as the service would.
pub fn signature(keys: &[&str], connection: &str) -> String {
    keys.iter()
        .map(|key| {
            let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("any key length");
            mac.update(connection.as_bytes());
            let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256={hex}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(ce_type: &str, signature: &str) -> EventHeaders {
        EventHeaders {
            ce_type: Some(ce_type.into()),
            hub: Some("chat".into()),
            connection_id: Some("conn-1".into()),
            user_id: Some("bob".into()),
            signature: Some(signature.into()),
        }
    }

    #[test]
    fn an_event_signed_with_either_key_is_believed_and_a_forged_one_is_not() {
        let upstream = Upstream::new(vec!["secondary".into()], "chat");
        let both = signature(&["primary", "secondary"], "conn-1");
        assert_eq!(
            upstream.verify(&headers(CONNECTED, &both)).unwrap(),
            ConnectionEvent::Connected {
                user: "bob".into(),
                connection: "conn-1".into()
            }
        );
        let other = signature(&["primary"], "conn-1");
        assert!(matches!(
            upstream.verify(&headers(DISCONNECTED, &other)),
            Err(Error::Unauthorized(_))
        ));
        let another_connection = signature(&["secondary"], "conn-2");
        assert!(upstream.verify(&headers(CONNECTED, &another_connection)).is_err());
        assert!(upstream.verify(&headers(CONNECTED, "sha256=zz")).is_err());
        assert!(upstream.verify(&EventHeaders::default()).is_err());
        let foreign_hub = EventHeaders {
            hub: Some("other".into()),
            ..headers(CONNECTED, &both)
        };
        assert!(matches!(upstream.verify(&foreign_hub), Err(Error::BadRequest(_))));
    }
}
