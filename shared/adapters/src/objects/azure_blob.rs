//! Azure Blob Storage over REST, one container for attachments. Requests this process makes
//! itself carry a short-lived service SAS of their own (one blob, one permission), so one
//! signing scheme covers them and the links handed to clients, and Azurite checks every one;
//! only creating the container needs Shared Key, which a SAS cannot grant.
//!
//! Configured by a connection string like the table client's: `UseDevelopmentStorage=true`
//! (Azurite's blob service on 127.0.0.1:10000), or `AccountName=..;AccountKey=..` with an
//! optional `BlobEndpoint=..` (which wins; path-style emulator URLs work).
//!
//! Without `AccountKey` (Azure, as `infra/main.bicep` deploys it) the app's managed identity
//! is the credential: its own requests carry an Entra ID bearer token, and links are user
//! delegation SAS signed with a delegation key the identity obtains from the blob service
//! (`Get User Delegation Key`), cached for a day and renewed an hour before it lapses.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
use tabletalk_clock::{Clock as _, SystemClock};

use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use tokio::sync::Mutex;

use super::sas::{self, DelegationKey, Grant, VERSION};
use super::{Link, ObjectBackend, ObjectInfo, ObjectKey, unavailable};
use tabletalk_domain::error::{Error, Result};

/// Azurite's account and its public, well-known key (it protects nothing).
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
const EMULATOR_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const EMULATOR_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

/// How long a signature this process makes for its own request lasts.
const OWN_REQUEST_SAS: i64 = 300;

/// How requests and links are signed.
#[derive(Clone)]
enum Credential {
    /// The account key: a service SAS for everything.
    Key(Vec<u8>),
    /// The managed identity: bearer tokens, and user delegation SAS for links.
    Identity {
        token: Arc<dyn TokenCredential>,
        delegation: Arc<Mutex<Option<DelegationKey>>>,
    },
}

/// The scope of a token the blob service accepts.
const STORAGE_SCOPE: &str = "https://storage.azure.com/.default";
/// How long a delegation key is asked for, and how long before its end it is renewed.
const DELEGATION_HOURS: i64 = 24;
const DELEGATION_RENEW_HOURS: i64 = 1;

/// One container of a storage account.
#[derive(Clone)]
pub struct AzureBlobObjects {
    /// The blob service's base URL without a trailing `/`.
    endpoint: String,
    account: String,
    credential: Credential,
    container: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for AzureBlobObjects {
    /// Leaves the key out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureBlobObjects")
            .field("endpoint", &self.endpoint)
            .field("account", &self.account)
            .field("container", &self.container)
            .finish()
    }
}

fn invalid(problem: &str) -> Error {
    Error::bad_request(format!("blob connection string: {problem}"))
}

impl AzureBlobObjects {
    /// The container `container` of the account the connection string names, with its
    /// account key; a connection string without one is refused (see [`Self::with_identity`]).
    pub fn from_connection_string(connection: &str, container: &str) -> Result<AzureBlobObjects> {
        Self::with_identity(connection, container, || {
            Err(invalid("AccountKey is missing (and no managed identity was offered)"))
        })
    }

    /// As [`Self::from_connection_string`]; without an account key, `identity` gives the
    /// credential (the app's managed identity).
    pub fn with_identity(
        connection: &str,
        container: &str,
        identity: impl FnOnce() -> Result<Arc<dyn TokenCredential>>,
    ) -> Result<AzureBlobObjects> {
        let (account, key, endpoint) = parse_connection(connection)?;
        let credential = match key {
            Some(key) => Credential::Key(BASE64.decode(key).map_err(|_| invalid("AccountKey is not base64"))?),
            None => Credential::Identity {
                token: identity()?,
                delegation: Arc::default(),
            },
        };
        if !container
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            || !(3..=63).contains(&container.len())
        {
            return Err(invalid(
                "the container name must be 3-63 lowercase letters, digits or '-'",
            ));
        }
        // Azurite's blob service closes idle connections as its table service does.
        let http = tabletalk_tables::azure::transport::client_builder(endpoint.as_str())
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| unavailable("cannot build the HTTP client", e))?;
        Ok(AzureBlobObjects {
            endpoint: endpoint.as_str().trim_end_matches('/').to_owned(),
            account,
            credential,
            container: container.to_owned(),
            http,
        })
    }

    fn blob_url(&self, key: &ObjectKey) -> String {
        format!("{}/{}/{key}", self.endpoint, self.container)
    }

    /// A service SAS for one of this process's own requests (key only: an identity's own
    /// requests carry a bearer token instead).
    fn own(&self, permissions: &str, blob: Option<&ObjectKey>) -> String {
        let Credential::Key(key) = &self.credential else {
            return String::new();
        };
        sas::service_sas(
            key,
            &Grant {
                permissions,
                expiry: SystemClock.now() + Duration::seconds(OWN_REQUEST_SAS),
                account: &self.account,
                container: &self.container,
                blob: blob.map(ObjectKey::as_str),
                content_disposition: None,
                content_type: None,
            },
        )
    }

    /// The Shared Key `Authorization` of a bodiless blob-service request (string-to-sign:
    /// the verb, eleven standard headers — all empty here —, the `x-ms-` headers, then the
    /// resource: `/account` + the URL path, and each query parameter on a line of its own).
    fn shared_key(&self, key: &[u8], method: &str, path: &str, date: &str, query: &[(&str, &str)]) -> String {
        let mut resource = format!("/{}{path}", self.account);
        let mut query = query.to_vec();
        query.sort();
        for (name, value) in query {
            resource.push_str(&format!("\n{name}:{value}"));
        }
        let text = format!("{method}\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{VERSION}\n{resource}");
        format!("SharedKey {}:{}", self.account, sas::sign(key, &text))
    }

    /// The bearer token of an identity's own request; `None` with a key.
    async fn bearer(&self) -> Result<Option<String>> {
        match &self.credential {
            Credential::Key(_) => Ok(None),
            Credential::Identity { token, .. } => {
                let token = token
                    .get_token(&[STORAGE_SCOPE], None)
                    .await
                    .map_err(|e| unavailable("no Entra ID token for storage", e))?;
                Ok(Some(format!("Bearer {}", token.token.secret())))
            }
        }
    }

    /// A request of this process's own to `url` (without a query), signed either way.
    async fn own_request(
        &self,
        method: reqwest::Method,
        url: &str,
        permissions: &str,
        blob: Option<&ObjectKey>,
    ) -> Result<reqwest::RequestBuilder> {
        let request = match self.bearer().await? {
            Some(bearer) => self.http.request(method, url).header("Authorization", bearer),
            None => self
                .http
                .request(method, format!("{url}?{}", self.own(permissions, blob))),
        };
        Ok(request.header("x-ms-version", VERSION))
    }

    /// A link's signature: a service SAS with the key, a user delegation SAS without.
    async fn link_sas(&self, grant: &Grant<'_>) -> Result<String> {
        match &self.credential {
            Credential::Key(key) => Ok(sas::service_sas(key, grant)),
            Credential::Identity { delegation, .. } => {
                let mut cached = delegation.lock().await;
                let fresh = cached.as_ref().is_some_and(|key| {
                    DateTime::parse_from_rfc3339(&key.signed_expiry)
                        .is_ok_and(|end| end.to_utc() - Duration::hours(DELEGATION_RENEW_HOURS) > SystemClock.now())
                });
                if !fresh {
                    *cached = Some(self.delegation_key().await?);
                }
                let key = cached.as_ref().expect("just set");
                sas::user_delegation_sas(key, grant).map_err(|e| unavailable("a delegation key is not base64", e))
            }
        }
    }

    /// `Get User Delegation Key`, valid for a day from now.
    async fn delegation_key(&self) -> Result<DelegationKey> {
        let bearer = self
            .bearer()
            .await?
            .ok_or_else(|| unavailable("no identity", "an account key is configured"))?;
        let now = SystemClock.now();
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><KeyInfo><Start>{}</Start><Expiry>{}</Expiry></KeyInfo>",
            sas::iso(now - Duration::minutes(5)),
            sas::iso(now + Duration::hours(DELEGATION_HOURS))
        );
        let response = self
            .http
            .post(format!("{}/?restype=service&comp=userdelegationkey", self.endpoint))
            .header("Authorization", bearer)
            .header("x-ms-version", VERSION)
            .header("Content-Type", "application/xml")
            .body(body)
            .send()
            .await
            .map_err(|e| unavailable("cannot get a user delegation key", e.without_url()))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(failed("cannot get a user delegation key", status, &text));
        }
        parse_delegation_key(&text).ok_or_else(|| unavailable("cannot get a user delegation key", "unreadable answer"))
    }
}

fn failed(what: &str, status: StatusCode, body: &str) -> Error {
    let detail = body.chars().take(300).collect::<String>();
    unavailable(what, format!("{status}: {detail}"))
}

#[async_trait]
impl ObjectBackend for AzureBlobObjects {
    async fn prepare(&self) -> Result<()> {
        let url = format!("{}/{}?restype=container", self.endpoint, self.container);
        let path = reqwest::Url::parse(&url)
            .map_err(|e| unavailable("bad URL", e))?
            .path()
            .to_owned();
        let date = httpdate::fmt_http_date(SystemClock.system_time());
        let authorization = match &self.credential {
            Credential::Key(key) => self.shared_key(key, "PUT", &path, &date, &[("restype", "container")]),
            Credential::Identity { .. } => self.bearer().await?.unwrap_or_default(),
        };
        let response = self
            .http
            .put(&url)
            .header("x-ms-date", &date)
            .header("x-ms-version", VERSION)
            .header("Content-Length", "0")
            .header("Authorization", authorization)
            .send()
            .await
            .map_err(|e| unavailable("cannot create the container", e.without_url()))?;
        match response.status() {
            s if s.is_success() || s == StatusCode::CONFLICT => Ok(()),
            s => Err(failed(
                "cannot create the container",
                s,
                &response.text().await.unwrap_or_default(),
            )),
        }
    }

    async fn upload_link(&self, key: &ObjectKey, mime: &str, expires: DateTime<Utc>) -> Result<Link> {
        // `c`: create only — the link cannot overwrite an object once it is uploaded.
        let sas = self
            .link_sas(&Grant {
                permissions: "c",
                expiry: expires,
                account: &self.account,
                container: &self.container,
                blob: Some(key.as_str()),
                content_disposition: None,
                content_type: None,
            })
            .await?;
        Ok(Link::put(format!("{}?{sas}", self.blob_url(key)), mime))
    }

    async fn download_url(
        &self,
        key: &ObjectKey,
        mime: &str,
        file_name: &str,
        expires: DateTime<Utc>,
    ) -> Result<String> {
        let disposition = format!("attachment; filename=\"{file_name}\"");
        let sas = self
            .link_sas(&Grant {
                permissions: "r",
                expiry: expires,
                account: &self.account,
                container: &self.container,
                blob: Some(key.as_str()),
                content_disposition: Some(&disposition),
                content_type: Some(mime),
            })
            .await?;
        Ok(format!("{}?{sas}", self.blob_url(key)))
    }

    async fn head(&self, key: &ObjectKey) -> Result<Option<ObjectInfo>> {
        let response = self
            .own_request(reqwest::Method::HEAD, &self.blob_url(key), "r", Some(key))
            .await?
            .send()
            .await
            .map_err(|e| unavailable("cannot read an object", e.without_url()))?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => {
                let header = |name: &str| {
                    response
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned()
                };
                let size = header("content-length")
                    .parse()
                    .map_err(|_| unavailable("cannot read an object", "no Content-Length"))?;
                Ok(Some(ObjectInfo {
                    size,
                    mime: header("content-type"),
                }))
            }
            s => Err(failed("cannot read an object", s, "")),
        }
    }

    async fn put(&self, key: &ObjectKey, mime: &str, bytes: Vec<u8>) -> Result<()> {
        let response = self
            .own_request(reqwest::Method::PUT, &self.blob_url(key), "cw", Some(key))
            .await?
            .header("x-ms-blob-type", "BlockBlob")
            .header("Content-Type", mime)
            .body(bytes)
            .send()
            .await
            .map_err(|e| unavailable("cannot write an object", e.without_url()))?;
        match response.status() {
            s if s.is_success() => Ok(()),
            s => Err(failed(
                "cannot write an object",
                s,
                &response.text().await.unwrap_or_default(),
            )),
        }
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Vec<u8>>> {
        let response = self
            .own_request(reqwest::Method::GET, &self.blob_url(key), "r", Some(key))
            .await?
            .send()
            .await
            .map_err(|e| unavailable("cannot read an object", e.without_url()))?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(
                response
                    .bytes()
                    .await
                    .map_err(|e| unavailable("cannot read an object", e.without_url()))?
                    .to_vec(),
            )),
            s => Err(failed(
                "cannot read an object",
                s,
                &response.text().await.unwrap_or_default(),
            )),
        }
    }

    async fn delete(&self, key: &ObjectKey) -> Result<()> {
        let response = self
            .own_request(reqwest::Method::DELETE, &self.blob_url(key), "d", Some(key))
            .await?
            .send()
            .await
            .map_err(|e| unavailable("cannot delete an object", e.without_url()))?;
        match response.status() {
            s if s.is_success() || s == StatusCode::NOT_FOUND => Ok(()),
            s => Err(failed(
                "cannot delete an object",
                s,
                &response.text().await.unwrap_or_default(),
            )),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectKey>> {
        let mut keys = Vec::new();
        let mut marker = String::new();
        loop {
            let mut url = reqwest::Url::parse(&format!("{}/{}", self.endpoint, self.container))
                .map_err(|e| unavailable("bad URL", e))?;
            let bearer = self.bearer().await?;
            if bearer.is_none() {
                url.set_query(Some(&self.own("l", None)));
            }
            url.query_pairs_mut()
                .append_pair("restype", "container")
                .append_pair("comp", "list")
                .append_pair("prefix", prefix);
            if !marker.is_empty() {
                url.query_pairs_mut().append_pair("marker", &marker);
            }
            let mut request = self.http.get(url).header("x-ms-version", VERSION);
            if let Some(bearer) = bearer {
                request = request.header("Authorization", bearer);
            }
            let response = request
                .send()
                .await
                .map_err(|e| unavailable("cannot list objects", e.without_url()))?;
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            if !status.is_success() {
                return Err(failed("cannot list objects", status, &body));
            }
            for name in elements(&body, "Name") {
                if let Ok(key) = ObjectKey::parse(&name) {
                    keys.push(key);
                }
            }
            marker = elements(&body, "NextMarker").into_iter().next().unwrap_or_default();
            if marker.is_empty() {
                keys.sort();
                return Ok(keys);
            }
        }
    }
}

/// A `UserDelegationKey` answer.
fn parse_delegation_key(xml: &str) -> Option<DelegationKey> {
    let field = |tag: &str| elements(xml, tag).into_iter().next();
    Some(DelegationKey {
        signed_oid: field("SignedOid")?,
        signed_tid: field("SignedTid")?,
        signed_start: field("SignedStart")?,
        signed_expiry: field("SignedExpiry")?,
        signed_service: field("SignedService")?,
        signed_version: field("SignedVersion")?,
        value: field("Value")?,
    })
}

/// The text of every `<tag>…</tag>` of an XML answer, entities decoded. Enough for a listing,
/// whose names are our own keys.
fn elements(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        found.push(
            rest[..end]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&"),
        );
        rest = &rest[end + close.len()..];
    }
    found
}

/// The origin (`scheme://host[:port]`) of the blob endpoint a connection string names: what
/// a browser fetches attachments from, for the web page's content policy.
pub fn origin_of(connection: &str) -> Result<String> {
    let (_, _, endpoint) = parse_connection(connection)?;
    Ok(endpoint.origin().ascii_serialization())
}

/// The account, its key (if the string has one) and the blob endpoint of a connection string.
fn parse_connection(connection: &str) -> Result<(String, Option<String>, reqwest::Url)> {
    let mut settings = std::collections::HashMap::new();
    for part in connection.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part.split_once('=').ok_or_else(|| invalid("a setting has no `=`"))?;
        settings.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let emulator = settings
        .get("usedevelopmentstorage")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let (account, key, default_endpoint) = match emulator {
        true => (
            EMULATOR_ACCOUNT.to_owned(),
            Some(EMULATOR_KEY.to_owned()),
            EMULATOR_BLOB_ENDPOINT.to_owned(),
        ),
        false => {
            let account = settings
                .get("accountname")
                .cloned()
                .ok_or_else(|| invalid("AccountName is missing"))?;
            let key = settings.get("accountkey").cloned();
            let protocol = settings.get("defaultendpointsprotocol").map_or("https", String::as_str);
            let suffix = settings
                .get("endpointsuffix")
                .map_or("core.windows.net", String::as_str);
            let endpoint = format!("{protocol}://{account}.blob.{suffix}");
            (account, key, endpoint)
        }
    };
    let endpoint = settings.get("blobendpoint").cloned().unwrap_or(default_endpoint);
    let endpoint = reqwest::Url::parse(&endpoint)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| invalid("BlobEndpoint is not an http(s) URL"))?;
    Ok((account, key, endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer's shape as the Get User Delegation Key reference documents it.
    #[test]
    fn a_user_delegation_key_answer_is_read() {
        let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><UserDelegationKey><SignedOid>oid</SignedOid><SignedTid>tid</SignedTid><SignedStart>2026-12-01T11:00:00Z</SignedStart><SignedExpiry>2026-12-02T11:00:00Z</SignedExpiry><SignedService>b</SignedService><SignedVersion>2022-11-02</SignedVersion><Value>a2V5</Value></UserDelegationKey>";
        let key = parse_delegation_key(xml).unwrap();
        assert_eq!(
            (key.signed_oid.as_str(), key.signed_service.as_str(), key.value.as_str()),
            ("oid", "b", "a2V5")
        );
        assert!(parse_delegation_key("<UserDelegationKey></UserDelegationKey>").is_none());
    }

    /// A request the server signs itself carries a SAS in its URL; a failure to reach the
    /// store must not repeat it, since the message is logged and answered to the client.
    #[tokio::test]
    async fn a_failed_request_never_shows_its_signature() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let connection = format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        );
        let store = AzureBlobObjects::from_connection_string(&connection, "attachments").unwrap();
        let key = ObjectKey::parse("r/u/i/a.png").unwrap();
        let failures = [
            store.head(&key).await.unwrap_err().to_string(),
            store.get(&key).await.unwrap_err().to_string(),
            store.delete(&key).await.unwrap_err().to_string(),
            store.list("r/").await.unwrap_err().to_string(),
        ];
        for message in failures {
            assert!(!message.contains("sig="), "{message}");
        }
    }

    /// Azurite's blob service, a Node server, closes a connection idle for 5 s: a pooled one
    /// is not used after 4 s idle, so no request is written into a connection being closed
    /// (under load, an upload's or a download's failure).
    #[tokio::test]
    async fn a_connection_to_an_emulator_is_not_reused_after_four_seconds_idle() {
        use std::sync::atomic::Ordering;
        let (endpoint, accepted) = tabletalk_tables::azure::transport::testing::counting_server().await;
        let connection = format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint={endpoint};"
        );
        let store = AzureBlobObjects::from_connection_string(&connection, "attachments").unwrap();
        let key = ObjectKey::parse("r/u/i/a.png").unwrap();
        store.get(&key).await.unwrap();
        store.get(&key).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "a busy connection is reused");
        tokio::time::sleep(std::time::Duration::from_millis(4_500)).await;
        store.get(&key).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "an idle one is not");
    }

    #[test]
    fn a_connection_string_without_a_key_needs_an_identity() {
        let keyless = "BlobEndpoint=https://acct.blob.core.windows.net/;AccountName=acct";
        assert!(AzureBlobObjects::from_connection_string(keyless, "attachments").is_err());
        assert!(AzureBlobObjects::from_connection_string("UseDevelopmentStorage=true", "Bad_Name").is_err());
        let emulator = AzureBlobObjects::from_connection_string("UseDevelopmentStorage=true", "attachments").unwrap();
        assert_eq!(
            emulator.blob_url(&ObjectKey::parse("r/u/i/a.png").unwrap()),
            "http://127.0.0.1:10000/devstoreaccount1/attachments/r/u/i/a.png"
        );
        assert!(!format!("{emulator:?}").contains("Eby8"), "the key is never printed");
    }
}
