//! Azure Web PubSub: the connection string, and the client URL `negotiate` hands out.
//!
//! The client URL is `wss://<host>/client/hubs/<hub>?access_token=<jwt>`. The JWT is HS256,
//! signed with the access key's UTF-8 bytes (not base64-decoded), `aud` the https hub URL,
//! `sub` the user, expiring within an hour. `negotiate` grants no join roles: the server puts
//! a connection in a room's group itself (REST, [`WebPubSub::add_connection_to_group`]) after
//! checking membership, so a removed member's old token cannot rejoin.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use tabletalk_clock::{Clock as _, SystemClock};

use super::room_group;
use tabletalk_domain::error::{Error, Result};

/// How long a client URL is valid.
pub const CLIENT_TOKEN_TTL: Duration = Duration::hours(1);
/// How long a REST call (a signal, a removal, a presence check) may take before it is given up.
pub const SIGNAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A parsed Web PubSub connection string, and an HTTP client for its REST API.
#[derive(Clone)]
pub struct WebPubSub {
    /// `https://<host>[:port]`, no trailing slash.
    endpoint: String,
    access_key: String,
    hub: String,
    http: reqwest::Client,
    /// Where calls that nobody waits for run (signals, removals from groups).
    pub(super) tasks: crate::tasks::Supervisor,
}

/// The data-plane API version used.
const API_VERSION: &str = "2024-01-01";

impl std::fmt::Debug for WebPubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebPubSub")
            .field("endpoint", &self.endpoint)
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct ServiceClaims {
    aud: String,
    iat: i64,
    exp: i64,
}

#[derive(Serialize)]
struct ClientClaims<'a> {
    aud: String,
    iat: i64,
    exp: i64,
    sub: &'a str,
    role: Vec<String>,
}

impl WebPubSub {
    /// Parses `Endpoint=https://<name>.webpubsub.azure.com;AccessKey=<key>;Version=1.0;[Port=…]`
    /// (keys case-insensitive) for `hub`.
    pub fn from_connection_string(connection: &str, hub: &str) -> Result<WebPubSub> {
        let invalid = |why: &str| Error::Internal(format!("the Web PubSub connection string {why}"));
        let mut endpoint = None;
        let mut access_key = None;
        let mut port = None;
        for part in connection.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| invalid("has a part without '='"))?;
            match key.to_ascii_lowercase().as_str() {
                "endpoint" => endpoint = Some(value.trim_end_matches('/').to_owned()),
                "accesskey" => access_key = Some(value.to_owned()),
                "port" => port = Some(value.parse::<u16>().map_err(|_| invalid("has a bad Port"))?),
                _ => {}
            }
        }
        let mut endpoint = endpoint.ok_or_else(|| invalid("has no Endpoint"))?;
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
            return Err(invalid("Endpoint is not an http(s) URL"));
        }
        if let Some(port) = port {
            endpoint = format!("{endpoint}:{port}");
        }
        let valid_hub = hub.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && hub.len() <= 128
            && hub.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_hub {
            return Err(Error::Internal(format!("{hub:?} is not a Web PubSub hub name")));
        }
        let http = reqwest::Client::builder()
            .timeout(SIGNAL_TIMEOUT)
            .build()
            .map_err(|e| Error::Internal(format!("Web PubSub client: {e}")))?;
        Ok(WebPubSub {
            endpoint,
            access_key: access_key.ok_or_else(|| invalid("has no AccessKey"))?,
            hub: hub.to_owned(),
            http,
            tasks: crate::tasks::Supervisor::default(),
        })
    }

    /// The same client running its unawaited calls under `tasks`, the process's supervisor.
    pub fn with_tasks(mut self, tasks: crate::tasks::Supervisor) -> WebPubSub {
        self.tasks = tasks;
        self
    }

    /// The origin browsers open their WebSocket to (`wss://<name>.webpubsub.azure.com`), for the
    /// web page's content policy.
    pub fn client_origin(&self) -> String {
        match self.endpoint.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", self.endpoint.trim_start_matches("http://")),
        }
    }

    fn sign(&self, claims: &impl Serialize) -> Result<String> {
        sign(&self.access_key, claims)
    }

    /// Sends a JSON message to every connection in `group`.
    pub async fn send_to_group(&self, group: &str, body: Vec<u8>) -> Result<()> {
        let path = format!("groups/{}/:send", segment(group));
        expect_success(self.rest(reqwest::Method::POST, &path, Some(body)).await?)
    }

    /// Sends `body` (JSON) to every connection of `user`.
    pub async fn send_to_user(&self, user: &str, body: Vec<u8>) -> Result<()> {
        let path = format!("users/{}/:send", segment(user));
        expect_success(self.rest(reqwest::Method::POST, &path, Some(body)).await?)
    }

    /// Takes every connection of `user` out of `group`.
    pub async fn remove_user_from_group(&self, user: &str, group: &str) -> Result<()> {
        let path = format!("users/{}/groups/{}", segment(user), segment(group));
        expect_success(self.rest(reqwest::Method::DELETE, &path, None).await?)
    }

    /// Adds the connection to `group` (200); false when the service knows no such connection
    /// (404).
    pub async fn add_connection_to_group(&self, connection: &str, group: &str) -> Result<bool> {
        let path = format!("groups/{}/connections/{}", segment(group), segment(connection));
        match self.rest(reqwest::Method::PUT, &path, None).await? {
            reqwest::StatusCode::NOT_FOUND => Ok(false),
            status => expect_success(status).map(|()| true),
        }
    }

    /// Takes the connection out of `group`; a connection already gone (404) is out of it.
    pub async fn remove_connection_from_group(&self, connection: &str, group: &str) -> Result<()> {
        let path = format!("groups/{}/connections/{}", segment(group), segment(connection));
        match self.rest(reqwest::Method::DELETE, &path, None).await? {
            reqwest::StatusCode::NOT_FOUND => Ok(()),
            status => expect_success(status),
        }
    }

    /// Whether `user` has a live connection to the hub (200 yes, 404 no).
    pub async fn user_connected(&self, user: &str) -> Result<bool> {
        let path = format!("users/{}", segment(user));
        match self.rest(reqwest::Method::HEAD, &path, None).await? {
            reqwest::StatusCode::OK => Ok(true),
            reqwest::StatusCode::NOT_FOUND => Ok(false),
            other => Err(Error::Unavailable(format!("Web PubSub answered {other}"))),
        }
    }

    /// One call to the hub's REST API at `path` under `/api/hubs/{hub}/`, with a bearer
    /// token whose `aud` is the exact request URL; JSON `body` if any. Returns the status.
    async fn rest(&self, method: reqwest::Method, path: &str, body: Option<Vec<u8>>) -> Result<reqwest::StatusCode> {
        let url = format!(
            "{}/api/hubs/{}/{path}?api-version={API_VERSION}",
            self.endpoint, self.hub
        );
        let now = SystemClock.now();
        let token = self.sign(&ServiceClaims {
            aud: url.clone(),
            iat: now.timestamp(),
            exp: (now + Duration::minutes(5)).timestamp(),
        })?;
        let mut request = self.http.request(method, &url).bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Error::Unavailable(format!("Web PubSub: {e}")))?;
        Ok(response.status())
    }

    /// What checks the events this hub posts to our upstream handler: its access key.
    pub fn upstream(&self) -> super::upstream::Upstream {
        super::upstream::Upstream::new(vec![self.access_key.clone()], &self.hub)
    }

    /// A client URL for `user`, allowed to join the groups of `rooms`.
    pub fn client_url(&self, user: &str, rooms: &[String], now: DateTime<Utc>) -> Result<(String, DateTime<Utc>)> {
        client_url(&self.access_key, &self.endpoint, &self.hub, user, rooms, now)
    }
}

/// A REST call's status as success or `Unavailable`.
fn expect_success(status: reqwest::StatusCode) -> Result<()> {
    match status.is_success() {
        true => Ok(()),
        false => Err(Error::Unavailable(format!("Web PubSub answered {status}"))),
    }
}

/// `value` as one URL path segment (a space is `%20`, never `+`).
fn segment(value: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'+')
        .add(b'/')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'`')
        .add(b'{')
        .add(b'}');
    percent_encoding::utf8_percent_encode(value, SEGMENT).to_string()
}

/// HS256 with the key's UTF-8 bytes, as Web PubSub expects.
fn sign(key: &str, claims: &impl Serialize) -> Result<String> {
    let key = jsonwebtoken::EncodingKey::from_secret(key.as_bytes())
        .map_err(|e| Error::Internal(format!("the Web PubSub access key: {e}")))?;
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), claims, &key)
        .map_err(|e| Error::Internal(format!("signing a Web PubSub token: {e}")))
}

/// The client URL of the hub at `endpoint` (`http(s)://host[:port]`) for `user`, with a token
/// signed with `key` that lets the connection join the groups of `rooms` and no other.
pub fn client_url(
    key: &str,
    endpoint: &str,
    hub: &str,
    user: &str,
    rooms: &[String],
    now: DateTime<Utc>,
) -> Result<(String, DateTime<Utc>)> {
    let audience = format!("{endpoint}/client/hubs/{hub}");
    let expires = now + CLIENT_TOKEN_TTL;
    let claims = ClientClaims {
        aud: audience.clone(),
        iat: now.timestamp(),
        exp: expires.timestamp(),
        sub: user,
        role: rooms
            .iter()
            .map(|room| format!("webpubsub.joinLeaveGroup.{}", room_group(room)))
            .collect(),
    };
    let token = sign(key, &claims)?;
    let socket = audience
        .replacen("https://", "wss://", 1)
        .replacen("http://", "ws://", 1);
    Ok((format!("{socket}?access_token={token}"), expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_parse_as_azure_writes_them() {
        let hub = WebPubSub::from_connection_string(
            "Endpoint=https://chat.webpubsub.azure.com/;AccessKey=k;Version=1.0;",
            "chat",
        )
        .unwrap();
        assert_eq!(hub.endpoint, "https://chat.webpubsub.azure.com");
        let local =
            WebPubSub::from_connection_string("endpoint=http://localhost;accesskey=k;port=8080", "chat").unwrap();
        assert_eq!(local.endpoint, "http://localhost:8080");
        assert!(WebPubSub::from_connection_string("Endpoint=https://x;Version=1.0", "chat").is_err());
        assert!(WebPubSub::from_connection_string("AccessKey=k", "chat").is_err());
        assert!(WebPubSub::from_connection_string("Endpoint=https://x;AccessKey=k", "1bad").is_err());
    }
}
