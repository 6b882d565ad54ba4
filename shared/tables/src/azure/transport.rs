//! Sending one signed request to the table service and reading its whole answer.
//!
//! One `reqwest::Client` per [`Transport`], so connections (and TLS sessions) are pooled and
//! reused — the `azure_data_tables` line opened a new connection per request. Every request gets
//! the headers the service requires (`x-ms-date`, `x-ms-version`, the OData version headers, a
//! JSON `Accept`) and an `Authorization` header from [`super::auth`]. Transport failures
//! (connect errors, timeouts, a body cut short) become `Unavailable`: the caller may retry.
//! Statuses are not interpreted here; see [`super::service_error`].

use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};

use super::auth::{SignedParts, authorization};
use super::connection::StorageAccount;
use crate::{Result, StoreError};

/// The REST API version we speak; bearer-token (Entra ID) authorization needs 2020-12-06 or
/// later.
const API_VERSION: &str = "2020-12-06";
/// The OData protocol version of the JSON payloads.
const DATA_SERVICE_VERSION: &str = "3.0;NetFx";
/// Full metadata: the mode with the most `@odata.type` annotations (see [`super::json`]).
const ACCEPT: &str = "application/json;odata=fullmetadata";
/// The whole request, connection included. Azure's own server-side limit is 30 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A request body and its content type.
pub struct Body {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

impl Body {
    pub fn json(text: String) -> Body {
        Body {
            content_type: "application/json".into(),
            bytes: text.into_bytes(),
        }
    }
}

/// The service's answer, read in full (Table responses are at most a few MiB).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    /// A header as text; `None` when absent or not visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A pooled HTTP client bound to one account. Cloning is cheap (`reqwest::Client` is an `Arc`).
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    account: StorageAccount,
}

impl Transport {
    pub fn new(account: StorageAccount) -> Result<Transport> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| StoreError::internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Transport { client, account })
    }

    /// The table service's base URL (no trailing `/`).
    pub fn endpoint(&self) -> &str {
        &self.account.table_endpoint
    }

    /// Sends `method` to `path_and_query` (relative to the endpoint, already percent-encoded)
    /// with optional body and extra headers, and reads the reply. Any status is `Ok`.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Body>,
        extra_headers: &[(&'static str, &str)],
    ) -> Result<Reply> {
        let url = Url::parse(&format!("{}{path_and_query}", self.account.table_endpoint))
            .map_err(|e| StoreError::internal(format!("cannot form a URL from {path_and_query:?}: {e}")))?;
        let date = httpdate::fmt_http_date(SystemTime::now());
        let comp = url
            .query_pairs()
            .find(|(k, _)| k == "comp")
            .map(|(_, v)| v.into_owned());
        let content_type = body.as_ref().map_or("", |b| b.content_type.as_str());
        let authorization = authorization(
            &self.account.credential,
            &SignedParts {
                method: method.as_str(),
                content_type,
                date: &date,
                path: url.path(),
                comp: comp.as_deref(),
            },
        )
        .await?;

        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| -> Result<()> {
            let value = HeaderValue::from_str(value)
                .map_err(|_| StoreError::internal(format!("header {name} has a value HTTP cannot carry")))?;
            headers.insert(name, value);
            Ok(())
        };
        put("x-ms-date", &date)?;
        put("x-ms-version", API_VERSION)?;
        put("DataServiceVersion", DATA_SERVICE_VERSION)?;
        put("MaxDataServiceVersion", DATA_SERVICE_VERSION)?;
        put("Accept", ACCEPT)?;
        put("Authorization", &authorization)?;
        if let Some(body) = &body {
            put("Content-Type", &body.content_type)?;
        }
        for (name, value) in extra_headers {
            put(name, value)?;
        }

        let started = Instant::now();
        let mut request = self.client.request(method.clone(), url).headers(headers);
        if let Some(body) = body {
            request = request.body(body.bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(&method, path_and_query, &e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| transport_error(&method, path_and_query, &e))?
            .to_vec();
        tracing::debug!(
            method = %method,
            path = %path_and_query,
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "table service request"
        );
        Ok(Reply { status, headers, body })
    }
}

fn transport_error(method: &Method, path: &str, error: &reqwest::Error) -> StoreError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    // `{:#}`-style source chains are not exposed by reqwest's Display; walk them ourselves so
    // the message names the real cause (connection refused, DNS, TLS...).
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    StoreError::unavailable(format!("table service {method} {path} {what}: {cause}"))
}
