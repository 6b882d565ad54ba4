//! The event sink: where a send's notification event goes once it is committed with its
//! message (the outbox). An Event Grid custom topic ([`EventGrid`], `aeg-sas-key`,
//! the Event Grid publishing API) in the cloud, which delivers to the notification function;
//! without one, the notification consumer in this process (the service's `notify::Notifier`).
//! Accepted means the outbox row can go; a failure leaves it for the timer.

use std::time::Duration;

use async_trait::async_trait;

use tabletalk_domain::error::{Error, Result};
use tabletalk_domain::events::{AutomationEvent, CloudEvent, MessageEvent};

/// The Event Grid publishing API's version.
const API_VERSION: &str = "2018-01-01";
/// How long Event Grid may take to accept an event.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Something that takes message events.
#[async_trait]
pub trait EventSink: Send + Sync + std::fmt::Debug {
    /// Hands one event over; `Ok` once it is accepted.
    async fn publish(&self, event: &MessageEvent) -> Result<()>;
}

/// An Event Grid custom topic.
#[derive(Clone)]
pub struct EventGrid {
    endpoint: String,
    key: String,
    /// The workspace the events come from (their CloudEvents `source`).
    workspace: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for EventGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventGrid")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl EventGrid {
    /// The topic at `endpoint` (`https://<topic>.<region>-1.eventgrid.azure.net/api/events`)
    /// with access key `key`, for the events of `workspace`.
    pub fn new(endpoint: &str, key: &str, workspace: &str) -> Result<EventGrid> {
        let parsed = url::Url::parse(endpoint)
            .map_err(|e| Error::Internal(format!("the Event Grid endpoint {endpoint:?}: {e}")))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(Error::Internal("the Event Grid endpoint is not an http(s) URL".into()));
        }
        let mut parsed = parsed;
        if !parsed.query_pairs().any(|(name, _)| name == "api-version") {
            parsed.query_pairs_mut().append_pair("api-version", API_VERSION);
        }
        let http = reqwest::Client::builder()
            .timeout(PUBLISH_TIMEOUT)
            .build()
            .map_err(|e| Error::Internal(format!("Event Grid client: {e}")))?;
        Ok(EventGrid {
            endpoint: parsed.to_string(),
            key: key.to_owned(),
            workspace: workspace.to_owned(),
            http,
        })
    }
}

#[async_trait]
impl EventSink for EventGrid {
    /// Publishes one event as CloudEvents JSON; `Ok` once the topic has accepted it (200).
    async fn publish(&self, event: &MessageEvent) -> Result<()> {
        self.post(&CloudEvent::of(event, &self.workspace), "Event Grid").await
    }
}

impl EventGrid {
    /// Publishes `event`'s automation event (docs/AUTOMATION_EVENTS.md) as CloudEvents JSON;
    /// `Ok` once the topic has accepted it.
    pub async fn publish_automation(&self, event: &MessageEvent) -> Result<()> {
        self.post(&AutomationEvent::of(event, &self.workspace), "the automation topic")
            .await
    }

    /// Posts one CloudEvent to the topic; `topic` names it in errors.
    async fn post(&self, cloud_event: &impl serde::Serialize, topic: &str) -> Result<()> {
        let body = serde_json::to_vec(cloud_event).map_err(|e| Error::Internal(format!("an event: {e}")))?;
        let response = self
            .http
            .post(&self.endpoint)
            .header("aeg-sas-key", &self.key)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/cloudevents+json; charset=utf-8",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| Error::Unavailable(format!("{topic}: {e}")))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(Error::Unavailable(format!("{topic} answered {}", response.status())))
        }
    }
}
