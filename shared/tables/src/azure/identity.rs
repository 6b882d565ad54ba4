//! Entra ID for the table service: a bearer token for `https://storage.azure.com` from the
//! app's managed identity, so an operator can run without account keys. The credential is
//! `azure_identity`'s `ManagedIdentityCredential` behind `azure_core`'s `TokenCredential`
//! (App Service and Functions through `IDENTITY_ENDPOINT`/`IDENTITY_HEADER`, a VM through
//! IMDS; `AZURE_CLIENT_ID` picks a user-assigned identity). It caches tokens and renews them
//! before they expire. Its HTTP goes through our own `reqwest` client (a small `HttpClient`
//! adapter), so the crate's default stack — a second `reqwest` and another TLS library — is
//! never built.

use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_core::http::headers::Headers;
use azure_core::http::request::{Body, Request};
use azure_core::http::{AsyncRawResponse, ClientOptions, HttpClient, StatusCode, Transport};
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};

use crate::{ErrorKind, Result, StoreError};

/// The scope of a token the table service accepts.
pub const STORAGE_SCOPE: &str = "https://storage.azure.com/.default";

/// `reqwest` as `azure_core`'s transport.
#[derive(Debug)]
struct Reqwest(reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for Reqwest {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let io = |e: reqwest::Error| azure_core::Error::new(azure_core::error::ErrorKind::Io, e);
        let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes())
            .map_err(|e| azure_core::Error::new(azure_core::error::ErrorKind::Other, e))?;
        let mut outgoing = self.0.request(method, request.url().as_str());
        for (name, value) in request.headers().iter() {
            outgoing = outgoing.header(name.as_str(), value.as_str());
        }
        if let Body::Bytes(bytes) = request.body() {
            outgoing = outgoing.body(bytes.to_vec());
        }
        let response = outgoing.send().await.map_err(io)?;
        let status = StatusCode::from(response.status().as_u16());
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            if let Ok(value) = value.to_str() {
                headers.insert(name.as_str().to_owned(), value.to_owned());
            }
        }
        let body = response.bytes().await.map_err(io)?;
        Ok(AsyncRawResponse::from_bytes(status, headers, body))
    }
}

/// How long the identity endpoint may take to hand out a token.
const TOKEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The app's managed identity (user-assigned when `AZURE_CLIENT_ID` is set).
pub fn managed_identity() -> Result<Arc<dyn TokenCredential>> {
    let http = reqwest::Client::builder()
        .timeout(TOKEN_TIMEOUT)
        .build()
        .map_err(|e| StoreError::internal(format!("cannot build the HTTP client: {e}")))?;
    let user_assigned_id = std::env::var("AZURE_CLIENT_ID")
        .ok()
        .filter(|id| !id.trim().is_empty())
        .map(UserAssignedId::ClientId);
    let options = ManagedIdentityCredentialOptions {
        user_assigned_id,
        client_options: ClientOptions {
            transport: Some(Transport::new(Arc::new(Reqwest(http)))),
            ..ClientOptions::default()
        },
        ..ManagedIdentityCredentialOptions::default()
    };
    let credential = ManagedIdentityCredential::new(Some(options))
        .map_err(|e| StoreError::new(ErrorKind::InvalidInput, format!("no managed identity: {e}")))?;
    tracing::info!("table storage: Entra ID tokens from the managed identity (no account key)");
    Ok(credential)
}

/// A bearer token for the table service.
pub async fn bearer(credential: &dyn TokenCredential) -> Result<String> {
    let token = credential
        .get_token(&[STORAGE_SCOPE], None)
        .await
        .map_err(|e| StoreError::new(ErrorKind::Unavailable, format!("no Entra ID token for storage: {e}")))?;
    Ok(format!("Bearer {}", token.token.secret()))
}
