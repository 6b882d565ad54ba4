//! Sending one signed request to the table service and reading its whole answer.
//!
//! One `reqwest::Client` per [`Transport`], so connections (and TLS sessions) are pooled and
//! reused — the `azure_data_tables` line opened a new connection per request. Every request gets
//! the headers the service requires (`x-ms-date`, `x-ms-version`, the OData version headers, a
//! JSON `Accept`) and an `Authorization` header from [`super::auth`]. Transport failures
//! (connect errors, timeouts, a body cut short) become `Unavailable`: the caller may retry.
//! Statuses are not interpreted here; see [`super::service_error`].

use std::time::{Duration, Instant};

use tabletalk_clock::SystemClock;

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
/// How long an idle pooled connection to a store on this machine (an emulator) is kept: less
/// than Azurite's keep-alive. Azurite is a Node server, which closes a connection idle for 5 s
/// (Node's default `keepAliveTimeout`), and a request written into a pooled connection just as
/// the server closes it fails ("connection closed before message completed"): under load, a
/// send's 503. Elsewhere reqwest's default (90 s) stays, so production pays no reconnects.
const LOOPBACK_POOL_IDLE: Duration = Duration::from_secs(4);

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
        let client = client_builder(&account.table_endpoint)
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
        // Azure checks the date against its own clock: the system's, whatever a test's says.
        let date = httpdate::fmt_http_date(SystemClock.system_time());
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

/// An HTTP client builder for a storage service at `endpoint` (tables here, blobs in the
/// attachments adapter): pooled connections to a service on this machine are dropped after
/// [`LOOPBACK_POOL_IDLE`], before the emulator closes them itself.
pub fn client_builder(endpoint: &str) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match on_loopback(endpoint) {
        true => builder.pool_idle_timeout(LOOPBACK_POOL_IDLE),
        false => builder,
    }
}

/// Whether `endpoint` names this machine (an emulator such as Azurite).
fn on_loopback(endpoint: &str) -> bool {
    let Some(host) = Url::parse(endpoint)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
    else {
        return false;
    };
    let address = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || address.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
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

/// For tests of the clients [`client_builder`] makes (here and in the attachments adapter).
#[doc(hidden)]
pub mod testing {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A keep-alive HTTP/1.1 server that answers every request `200 {}` and counts the
    /// connections it accepted.
    pub async fn counting_server() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/devstoreaccount1", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 8192];
                    let mut seen = Vec::new();
                    while let Ok(n) = socket.read(&mut buffer).await {
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buffer[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let reply =
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                            if socket.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (endpoint, accepted)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::counting_server;
    use super::*;
    use crate::azure::connection::Credential;
    use std::sync::atomic::Ordering;

    /// A pooled connection to an emulator is dropped before the emulator's own keep-alive
    /// (Node's 5 s) closes it, so no request is ever written into a connection being closed:
    /// after 4.5 s idle the next request opens a new connection.
    #[tokio::test]
    async fn a_connection_to_an_emulator_is_not_reused_after_four_seconds_idle() {
        let (endpoint, accepted) = counting_server().await;
        let transport = Transport::new(StorageAccount {
            table_endpoint: endpoint,
            credential: Credential::SharedKey {
                account: "devstoreaccount1".into(),
                key: b"test-only key".to_vec(),
            },
        })
        .unwrap();
        let first = transport.send(Method::GET, "/Tables", None, &[]).await.unwrap();
        assert_eq!(first.status, StatusCode::OK);
        let again = transport.send(Method::GET, "/Tables", None, &[]).await.unwrap();
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "a busy connection is reused");
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        transport.send(Method::GET, "/Tables", None, &[]).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "an idle one is not");
    }

    #[test]
    fn only_this_machine_counts_as_an_emulator() {
        assert!(on_loopback("http://127.0.0.1:10002/devstoreaccount1"));
        assert!(on_loopback("http://[::1]:10002/devstoreaccount1"));
        assert!(on_loopback("https://localhost:10002/devstoreaccount1"));
        assert!(!on_loopback("https://acct.table.core.windows.net"));
        assert!(!on_loopback("https://10.0.0.4:10002/devstoreaccount1"));
    }
}
