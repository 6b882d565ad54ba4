//! Message events between a send and the notification function: CloudEvents 1.0 JSON, one
//! per message with a stable id, published to an Event Grid custom topic (`aeg-sas-key`,
//! the Event Grid publishing API) — and decoding whatever carries them back in: the
//! Functions host's invocation payload for an `eventGridTrigger` (where values are often JSON
//! strings holding JSON), or a webhook delivery in the CloudEvents or Event Grid schema.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::html;
use crate::messages::mentions::Mentions;
use crate::messages::{Message, MessageType};

/// Characters of the message shown in a notification.
pub const PREVIEW_CHARS: usize = 100;

/// What a send publishes for the notification function: one per message, with a stable id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageEvent {
    /// `<room id>/<message id>`: the same for every delivery of the event.
    pub id: String,
    pub room_id: String,
    pub message_id: String,
    pub sender_id: String,
    pub sender_name: String,
    pub preview: String,
    #[serde(default)]
    pub mentions: Mentions,
    /// Also publish an automation event ([`AutomationEvent`]): a person's message in a public
    /// room, when an automation topic is configured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub automation: bool,
}

impl MessageEvent {
    /// When its message was created: the time its key encodes (the epoch for a key that does
    /// not parse, which no stored message has).
    pub fn created_at(&self) -> DateTime<Utc> {
        crate::keys::MessageKey::parse(&self.message_id)
            .map(|key| key.ticks().to_datetime())
            .unwrap_or(DateTime::UNIX_EPOCH)
    }
}

impl MessageEvent {
    /// The event of a new message, for the kinds that notify (members' messages, polls and
    /// webhooks; not the server's own lines).
    pub fn of(message: &Message) -> Option<MessageEvent> {
        let preview = match message.kind {
            MessageType::Message | MessageType::Webhook => html::text_content(&message.text),
            MessageType::Poll => message.poll.as_ref()?.question.clone(),
            MessageType::Call | MessageType::EditRoom | MessageType::PinMessage | MessageType::System => {
                return None;
            }
        };
        Some(MessageEvent {
            id: format!("{}/{}", message.room_id, message.id),
            room_id: message.room_id.clone(),
            message_id: message.id.clone(),
            sender_id: message.author_id.clone(),
            sender_name: message.author_name.clone(),
            preview: preview
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(PREVIEW_CHARS)
                .collect(),
            mentions: message.mentions.clone(),
            automation: false,
        })
    }
}

/// The CloudEvents `type` of a new message.
pub const MESSAGE_CREATED: &str = "tabletalk.message.created";
/// Strings holding JSON are unwrapped at most this deep.
const MAX_NESTING: usize = 4;

/// A CloudEvents 1.0 event (JSON format) carrying a [`MessageEvent`].
#[derive(Debug, Clone, Serialize)]
pub struct CloudEvent<'a> {
    pub specversion: &'static str,
    pub id: &'a str,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub subject: String,
    pub time: DateTime<Utc>,
    pub datacontenttype: &'static str,
    pub data: &'a MessageEvent,
}

impl<'a> CloudEvent<'a> {
    /// The event of `event`, from the workspace `workspace`.
    pub fn of(event: &'a MessageEvent, workspace: &str) -> CloudEvent<'a> {
        CloudEvent {
            specversion: "1.0",
            id: &event.id,
            source: format!("/tabletalk/{workspace}"),
            kind: MESSAGE_CREATED,
            subject: format!("rooms/{}/messages/{}", event.room_id, event.message_id),
            time: event.created_at(),
            datacontenttype: "application/json",
            data: event,
        }
    }
}

/// The CloudEvents `type` of an automation event: a person's new message in a public room.
pub const AUTOMATION_MESSAGE_CREATED: &str = "tabletalk.automation.message.created";

/// What an automation event carries (docs/AUTOMATION_EVENTS.md). Its `origin` is always `user`:
/// messages of webhooks and automations make none, so nothing can loop.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomationData<'a> {
    pub room_id: &'a str,
    pub message_id: &'a str,
    pub sender_id: &'a str,
    pub sender_name: &'a str,
    /// The text, as plain text, cut to the notification preview's length.
    pub preview: &'a str,
    pub origin: crate::messages::Origin,
}

/// A CloudEvents 1.0 automation event, published to the automation topic.
#[derive(Debug, Clone, Serialize)]
pub struct AutomationEvent<'a> {
    pub specversion: &'static str,
    /// `automation/<room id>/<message id>`: the same on every publication, so a consumer
    /// dedupes by it.
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub subject: String,
    pub time: DateTime<Utc>,
    pub datacontenttype: &'static str,
    pub data: AutomationData<'a>,
}

impl<'a> AutomationEvent<'a> {
    pub fn of(event: &'a MessageEvent, workspace: &str) -> AutomationEvent<'a> {
        AutomationEvent {
            specversion: "1.0",
            id: format!("automation/{}", event.id),
            source: format!("/tabletalk/{workspace}"),
            kind: AUTOMATION_MESSAGE_CREATED,
            subject: format!("rooms/{}/messages/{}", event.room_id, event.message_id),
            time: event.created_at(),
            datacontenttype: "application/json",
            data: AutomationData {
                room_id: &event.room_id,
                message_id: &event.message_id,
                sender_id: &event.sender_id,
                sender_name: &event.sender_name,
                preview: &event.preview,
                origin: crate::messages::Origin::User,
            },
        }
    }
}

/// Unwraps JSON strings that hold JSON (the host double-encodes), a few levels deep.
fn unwrap_strings(mut value: Value) -> Result<Value> {
    for _ in 0..MAX_NESTING {
        match value {
            Value::String(text) => {
                value = serde_json::from_str(&text).map_err(|_| Error::validation("an event is not JSON"))?;
            }
            other => return Ok(other),
        }
    }
    Err(Error::validation("an event is nested too deep"))
}

/// The message events in `value`: an invocation payload (`{"Data":{"<binding>":…}}`), one
/// event, or an array of them, in the CloudEvents or the Event Grid schema. Events of other
/// types are skipped; anything unreadable is a validation error.
pub fn decode(value: Value) -> Result<Vec<MessageEvent>> {
    decode_at(value, 0)
}

fn decode_at(value: Value, depth: usize) -> Result<Vec<MessageEvent>> {
    if depth > MAX_NESTING {
        return Err(Error::validation("an event is nested too deep"));
    }
    match unwrap_strings(value)? {
        Value::Array(items) => {
            let mut events = Vec::new();
            for item in items {
                events.extend(decode_at(item, depth + 1)?);
            }
            Ok(events)
        }
        Value::Object(mut object) => {
            if let Some(Value::Object(data)) = object.remove("Data") {
                let mut events = Vec::new();
                for (_binding, value) in data {
                    events.extend(decode_at(value, depth + 1)?);
                }
                return Ok(events);
            }
            let kind = object
                .get("type")
                .or_else(|| object.get("eventType"))
                .and_then(Value::as_str)
                .ok_or_else(|| Error::validation("an event has no type"))?;
            if kind != MESSAGE_CREATED {
                return Ok(Vec::new());
            }
            let data = match (object.remove("data"), object.remove("data_base64")) {
                (Some(data), _) => unwrap_strings(data)?,
                (None, Some(Value::String(encoded))) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map_err(|_| Error::validation("an event's data_base64 is not base64"))?;
                    serde_json::from_slice(&bytes).map_err(|_| Error::validation("an event's data is not JSON"))?
                }
                _ => return Err(Error::validation("an event has no data")),
            };
            let event: MessageEvent =
                serde_json::from_value(data).map_err(|e| Error::validation(format!("an event's data: {e}")))?;
            Ok(vec![event])
        }
        _ => Err(Error::validation("an event is not a JSON object")),
    }
}

/// The validation code of an Event Grid subscription handshake, if `value` is one.
pub fn validation_code(value: &Value) -> Option<String> {
    let first = match value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    (first.get("eventType")?.as_str()? == "Microsoft.EventGrid.SubscriptionValidationEvent")
        .then(|| first.get("data")?.get("validationCode")?.as_str().map(str::to_owned))
        .flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event() -> MessageEvent {
        MessageEvent {
            id: "r/1".into(),
            room_id: "r".into(),
            message_id: "1".into(),
            sender_id: "alice".into(),
            sender_name: "Alice".into(),
            preview: "hi".into(),
            mentions: Default::default(),
            automation: false,
        }
    }

    /// Every way the event reaches the function decodes to the same event.
    #[test]
    fn events_decode_from_every_envelope() {
        let event = event();
        let cloud = serde_json::to_value(CloudEvent::of(&event, "default")).unwrap();
        assert_eq!(cloud["specversion"], "1.0");
        assert_eq!(cloud["id"], "r/1");
        let grid = json!({ "id": "r/1", "eventType": MESSAGE_CREATED, "subject": "s", "dataVersion": "1",
            "eventTime": "2026-01-01T00:00:00Z", "data": cloud["data"] });
        let encoded = base64::engine::general_purpose::STANDARD.encode(cloud["data"].to_string());
        let binary = json!({ "specversion": "1.0", "id": "r/1", "source": "s", "type": MESSAGE_CREATED,
            "data_base64": encoded });
        let envelopes = [
            cloud.clone(),
            json!([cloud.clone()]),
            grid.clone(),
            binary,
            json!({ "Data": { "eventGridEvent": cloud.clone() }, "Metadata": {} }),
            json!({ "Data": { "eventGridEvent": cloud.to_string() }, "Metadata": {} }),
            // A string holding a string holding the event, and data itself a string.
            json!({ "Data": { "eventGridEvent": Value::String(cloud.to_string()).to_string() } }),
            json!({ "id": "r/1", "type": MESSAGE_CREATED, "source": "s", "specversion": "1.0",
                "data": cloud["data"].to_string() }),
        ];
        for envelope in envelopes {
            assert_eq!(decode(envelope.clone()).unwrap(), vec![event.clone()], "{envelope}");
        }
        let other = json!({ "specversion": "1.0", "id": "x", "source": "s", "type": "something.else", "data": {} });
        assert!(decode(other).unwrap().is_empty());
        for bad in [
            json!("not json {"),
            json!(42),
            json!({ "specversion": "1.0" }),
            json!({ "type": MESSAGE_CREATED }),
            json!({ "type": MESSAGE_CREATED, "data": { "id": 1 } }),
        ] {
            assert!(decode(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_subscription_handshake_is_recognised() {
        let handshake = json!([{ "id": "1", "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
            "data": { "validationCode": "abc", "validationUrl": "https://x" } }]);
        assert_eq!(validation_code(&handshake).as_deref(), Some("abc"));
        assert_eq!(validation_code(&json!([{ "eventType": MESSAGE_CREATED }])), None);
    }
}
