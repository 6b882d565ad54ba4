//! Azure Blob Storage over REST, one container for attachments. Requests this process makes
//! itself carry a short-lived service SAS of their own (one blob, one permission), so one
//! signing scheme covers them and the links handed to clients, and Azurite checks every one;
//! only creating the container needs Shared Key, which a SAS cannot grant.
//!
//! Configured by a connection string like the table client's: `UseDevelopmentStorage=true`
//! (Azurite's blob service on 127.0.0.1:10000), or `AccountName=..;AccountKey=..` with an
//! optional `BlobEndpoint=..` (which wins; path-style emulator URLs work). A deployment
//! without an account key would sign links with a user delegation key (`sas`); that path is
//! not wired up yet and such a connection string is refused.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;

use super::sas::{self, Grant, VERSION};
use super::{Link, ObjectBackend, ObjectInfo, ObjectKey, unavailable};
use crate::error::{Error, Result};

/// Azurite's account and its public, well-known key (it protects nothing).
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
const EMULATOR_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const EMULATOR_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

/// How long a signature this process makes for its own request lasts.
const OWN_REQUEST_SAS: i64 = 300;

/// One container of a storage account, reached with the account key.
#[derive(Clone)]
pub struct AzureBlobObjects {
    /// The blob service's base URL without a trailing `/`.
    endpoint: String,
    account: String,
    key: Vec<u8>,
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
    /// The container `container` of the account the connection string names.
    pub fn from_connection_string(connection: &str, container: &str) -> Result<AzureBlobObjects> {
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
                EMULATOR_KEY.to_owned(),
                EMULATOR_BLOB_ENDPOINT.to_owned(),
            ),
            false => {
                let account = settings
                    .get("accountname")
                    .cloned()
                    .ok_or_else(|| invalid("AccountName is missing"))?;
                let key = settings.get("accountkey").cloned().ok_or_else(|| {
                    invalid(
                        "AccountKey is missing (signing with a managed identity's delegation key is not supported yet)",
                    )
                })?;
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
        let key = BASE64.decode(key).map_err(|_| invalid("AccountKey is not base64"))?;
        if !container
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            || !(3..=63).contains(&container.len())
        {
            return Err(invalid(
                "the container name must be 3-63 lowercase letters, digits or '-'",
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| unavailable("cannot build the HTTP client", e))?;
        Ok(AzureBlobObjects {
            endpoint: endpoint.as_str().trim_end_matches('/').to_owned(),
            account,
            key,
            container: container.to_owned(),
            http,
        })
    }

    fn blob_url(&self, key: &ObjectKey) -> String {
        format!("{}/{}/{key}", self.endpoint, self.container)
    }

    fn signed(&self, permissions: &str, blob: Option<&str>, expiry: DateTime<Utc>) -> String {
        sas::service_sas(
            &self.key,
            &Grant {
                permissions,
                expiry,
                account: &self.account,
                container: &self.container,
                blob,
                content_disposition: None,
                content_type: None,
            },
        )
    }

    /// A SAS for one of this process's own requests.
    fn own(&self, permissions: &str, blob: Option<&ObjectKey>) -> String {
        self.signed(
            permissions,
            blob.map(ObjectKey::as_str),
            Utc::now() + Duration::seconds(OWN_REQUEST_SAS),
        )
    }

    /// The Shared Key `Authorization` of a bodiless blob-service request (string-to-sign:
    /// the verb, eleven standard headers — all empty here —, the `x-ms-` headers, then the
    /// resource: `/account` + the URL path, and each query parameter on a line of its own).
    fn shared_key(&self, method: &str, path: &str, date: &str, query: &[(&str, &str)]) -> String {
        let mut resource = format!("/{}{path}", self.account);
        let mut query = query.to_vec();
        query.sort();
        for (name, value) in query {
            resource.push_str(&format!("\n{name}:{value}"));
        }
        let text = format!("{method}\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{VERSION}\n{resource}");
        format!("SharedKey {}:{}", self.account, sas::sign(&self.key, &text))
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
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let response = self
            .http
            .put(&url)
            .header("x-ms-date", &date)
            .header("x-ms-version", VERSION)
            .header("Content-Length", "0")
            .header(
                "Authorization",
                self.shared_key("PUT", &path, &date, &[("restype", "container")]),
            )
            .send()
            .await
            .map_err(|e| unavailable("cannot create the container", e))?;
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
        let sas = self.signed("c", Some(key.as_str()), expires);
        Ok(Link {
            method: "PUT".into(),
            url: format!("{}?{sas}", self.blob_url(key)),
            headers: vec![
                ("Content-Type".into(), mime.to_owned()),
                ("x-ms-blob-type".into(), "BlockBlob".into()),
            ],
        })
    }

    async fn download_url(
        &self,
        key: &ObjectKey,
        mime: &str,
        file_name: &str,
        expires: DateTime<Utc>,
    ) -> Result<String> {
        let disposition = format!("attachment; filename=\"{file_name}\"");
        let sas = sas::service_sas(
            &self.key,
            &Grant {
                permissions: "r",
                expiry: expires,
                account: &self.account,
                container: &self.container,
                blob: Some(key.as_str()),
                content_disposition: Some(&disposition),
                content_type: Some(mime),
            },
        );
        Ok(format!("{}?{sas}", self.blob_url(key)))
    }

    async fn head(&self, key: &ObjectKey) -> Result<Option<ObjectInfo>> {
        let url = format!("{}?{}", self.blob_url(key), self.own("r", Some(key)));
        let response = self
            .http
            .head(&url)
            .header("x-ms-version", VERSION)
            .send()
            .await
            .map_err(|e| unavailable("cannot read an object", e))?;
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
        let url = format!("{}?{}", self.blob_url(key), self.own("cw", Some(key)));
        let response = self
            .http
            .put(&url)
            .header("x-ms-version", VERSION)
            .header("x-ms-blob-type", "BlockBlob")
            .header("Content-Type", mime)
            .body(bytes)
            .send()
            .await
            .map_err(|e| unavailable("cannot write an object", e))?;
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
        let url = format!("{}?{}", self.blob_url(key), self.own("r", Some(key)));
        let response = self
            .http
            .get(&url)
            .header("x-ms-version", VERSION)
            .send()
            .await
            .map_err(|e| unavailable("cannot read an object", e))?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(
                response
                    .bytes()
                    .await
                    .map_err(|e| unavailable("cannot read an object", e))?
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
        let url = format!("{}?{}", self.blob_url(key), self.own("d", Some(key)));
        let response = self
            .http
            .delete(&url)
            .header("x-ms-version", VERSION)
            .send()
            .await
            .map_err(|e| unavailable("cannot delete an object", e))?;
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
            url.set_query(Some(&self.own("l", None)));
            url.query_pairs_mut()
                .append_pair("restype", "container")
                .append_pair("comp", "list")
                .append_pair("prefix", prefix);
            if !marker.is_empty() {
                url.query_pairs_mut().append_pair("marker", &marker);
            }
            let response = self
                .http
                .get(url)
                .header("x-ms-version", VERSION)
                .send()
                .await
                .map_err(|e| unavailable("cannot list objects", e))?;
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
