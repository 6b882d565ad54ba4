//! Azure Storage connection strings: where the table service is and how to prove who we are.
//!
//! A connection string is `;`-separated `Key=Value` settings; keys are case-insensitive and a
//! value may itself contain `=` (account keys are base64), so each segment splits on its first
//! `=`. Three shapes are understood:
//!
//! - `UseDevelopmentStorage=true` — the local emulator (Azurite) on
//!   `http://127.0.0.1:10002/devstoreaccount1` with its well-known, public account key. It stands
//!   alone: any other setting next to it is refused rather than silently ignored.
//! - `DefaultEndpointsProtocol=https;AccountName=..;AccountKey=..;EndpointSuffix=core.windows.net`
//!   — a storage account in the cloud; the table endpoint is
//!   `{protocol}://{account}.table.{suffix}` (protocol defaults to `https`, suffix to
//!   `core.windows.net`).
//! - Any of the above with `TableEndpoint=..` — an explicit endpoint, which wins. Path-style
//!   emulator URLs such as `http://127.0.0.1:10002/devstoreaccount1` work: the signature then
//!   covers the account name twice (see [`super::auth`]).
//!
//! - Any of the above without `AccountKey` (`TableEndpoint=https://acct.table.core.windows.net`,
//!   or just `AccountName=acct`) — no key at all: requests carry an Entra ID bearer token from
//!   the app's managed identity ([`super::identity`]); the identity needs the Storage Table
//!   Data Contributor role on the account.
//!
//! Settings for other services (`BlobEndpoint`, `QueueEndpoint`, ...) are ignored, so one
//! connection string can serve every client of an account. Shared access signatures are refused
//! for now: nothing in tabletalk issues them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::Url;

use crate::{Result, StoreError};

/// Azurite's account name.
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's account key. Public and identical in every installation (it is in Azurite's source
/// and Microsoft's documentation); it protects nothing.
const EMULATOR_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// Azurite's table service, path-style (the account is the first path segment).
const EMULATOR_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

/// How requests are authorized.
#[derive(Clone)]
pub enum Credential {
    /// An Entra ID token (the app's managed identity); no key.
    EntraId(std::sync::Arc<dyn azure_core::credentials::TokenCredential>),
    /// The account's access key; every request carries an HMAC-SHA256 signature made with it.
    SharedKey {
        /// The storage account name (signed, not taken from the URL).
        account: String,
        /// The decoded key bytes.
        key: Vec<u8>,
    },
}

impl std::fmt::Debug for Credential {
    /// Never prints the key: credentials end up in logs through `Debug` of the backend.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::EntraId(_) => f.write_str("EntraId"),
            Credential::SharedKey { account, .. } => f
                .debug_struct("SharedKey")
                .field("account", account)
                .field("key", &"<redacted>")
                .finish(),
        }
    }
}

/// A parsed connection string: the table endpoint and the credential for it.
#[derive(Debug, Clone)]
pub struct StorageAccount {
    /// The table service's base URL without a trailing `/`, e.g.
    /// `https://acct.table.core.windows.net` or `http://127.0.0.1:10002/devstoreaccount1`.
    pub table_endpoint: String,
    pub credential: Credential,
}

impl StorageAccount {
    /// Parses a connection string; `InvalidInput` says which setting is wrong (and never quotes
    /// the account key).
    pub fn parse(connection_string: &str) -> Result<StorageAccount> {
        let settings = Settings::parse(connection_string)?;
        if settings
            .get("usedevelopmentstorage")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return emulator(&settings);
        }
        let account = settings.get("accountname");
        let key = settings.get("accountkey");
        if settings.get("sharedaccesssignature").is_some() && key.is_none() {
            return Err(invalid(
                "SharedAccessSignature is not supported; use AccountKey or a managed identity",
            ));
        }
        let table_endpoint = match settings.get("tableendpoint") {
            Some(endpoint) => endpoint.to_owned(),
            None => {
                let account = account.ok_or_else(|| invalid("AccountName or TableEndpoint is missing"))?;
                let protocol = settings.get("defaultendpointsprotocol").unwrap_or("https");
                if !matches!(protocol, "http" | "https") {
                    return Err(invalid("DefaultEndpointsProtocol must be http or https"));
                }
                let suffix = settings.get("endpointsuffix").unwrap_or("core.windows.net");
                format!("{protocol}://{account}.table.{suffix}")
            }
        };
        let credential = match key {
            Some(key) => Credential::SharedKey {
                account: account.ok_or_else(|| invalid("AccountName is missing"))?.to_owned(),
                key: decode_key(key)?,
            },
            None => Credential::EntraId(super::identity::managed_identity()?),
        };
        Ok(StorageAccount {
            table_endpoint: check_endpoint(&table_endpoint)?,
            credential,
        })
    }
}

/// `UseDevelopmentStorage=true`, alone.
fn emulator(settings: &Settings) -> Result<StorageAccount> {
    if let Some(other) = settings.0.iter().find(|(k, _)| k != "usedevelopmentstorage") {
        return Err(invalid(format!(
            "UseDevelopmentStorage=true takes no other settings (found {})",
            other.0
        )));
    }
    Ok(StorageAccount {
        table_endpoint: EMULATOR_TABLE_ENDPOINT.to_owned(),
        credential: Credential::SharedKey {
            account: EMULATOR_ACCOUNT.to_owned(),
            key: decode_key(EMULATOR_KEY)?,
        },
    })
}

/// The `Key=Value` pairs, keys lowercased, in order.
struct Settings(Vec<(String, String)>);

impl Settings {
    fn parse(text: &str) -> Result<Settings> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for segment in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((key, value)) = segment.split_once('=') else {
                return Err(invalid(format!(
                    "every setting must be Key=Value; found a segment without '=' ({} characters)",
                    segment.len()
                )));
            };
            let key = key.trim().to_ascii_lowercase();
            if key.is_empty() {
                return Err(invalid("a setting has an empty name"));
            }
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(invalid(format!("setting {key} appears twice")));
            }
            pairs.push((key, value.trim().to_owned()));
        }
        if pairs.is_empty() {
            return Err(invalid("the connection string is empty"));
        }
        Ok(Settings(pairs))
    }

    /// The value of a (lowercase) key; an empty value counts as absent.
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

fn decode_key(key: &str) -> Result<Vec<u8>> {
    match BASE64.decode(key) {
        Ok(bytes) if !bytes.is_empty() => Ok(bytes),
        _ => Err(invalid("AccountKey is not base64")),
    }
}

/// An absolute http(s) URL without query or fragment; returned without a trailing `/`.
fn check_endpoint(endpoint: &str) -> Result<String> {
    let trimmed = endpoint.trim_end_matches('/');
    let url = Url::parse(trimmed).map_err(|e| invalid(format!("TableEndpoint {trimmed:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(format!(
            "TableEndpoint {trimmed:?} must be an http(s) URL with a host"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(format!(
            "TableEndpoint {trimmed:?} must not have a query or fragment"
        )));
    }
    Ok(trimmed.to_owned())
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::invalid(format!("connection string: {}", message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn shared_key(account: &StorageAccount) -> (&str, &[u8]) {
        match &account.credential {
            Credential::SharedKey { account, key } => (account, key),
            Credential::EntraId(_) => panic!("a shared key was expected"),
        }
    }

    #[test]
    fn development_storage() {
        for text in [
            "UseDevelopmentStorage=true",
            "usedevelopmentstorage=TRUE;",
            " UseDevelopmentStorage = true ",
        ] {
            let account = StorageAccount::parse(text).unwrap();
            assert_eq!(account.table_endpoint, "http://127.0.0.1:10002/devstoreaccount1");
            let (name, key) = shared_key(&account);
            assert_eq!(name, "devstoreaccount1");
            assert_eq!(key.len(), 64);
        }
        let err = StorageAccount::parse("UseDevelopmentStorage=true;AccountName=x").unwrap_err();
        assert!(err.message.contains("no other settings"), "{err}");
    }

    #[test]
    fn cloud_account() {
        let account = StorageAccount::parse(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5a2V5;EndpointSuffix=core.chinacloudapi.cn",
        )
        .unwrap();
        assert_eq!(account.table_endpoint, "https://acct.table.core.chinacloudapi.cn");
        assert_eq!(shared_key(&account), ("acct", &b"keykey"[..]));

        let defaults = StorageAccount::parse("accountname=acct;ACCOUNTKEY=a2V5").unwrap();
        assert_eq!(defaults.table_endpoint, "https://acct.table.core.windows.net");
    }

    #[test]
    fn explicit_endpoint_wins() {
        let account = StorageAccount::parse(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;\
             BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;\
             TableEndpoint=http://127.0.0.1:10002/devstoreaccount1/;",
        )
        .unwrap();
        assert_eq!(account.table_endpoint, "http://127.0.0.1:10002/devstoreaccount1");
    }

    #[test]
    fn the_key_may_contain_equals_signs() {
        let account = StorageAccount::parse("AccountName=a;AccountKey=AAE=").unwrap();
        assert_eq!(shared_key(&account).1, &[0u8, 1][..]);
    }

    /// No key: the managed identity, at the named or the account's endpoint.
    #[test]
    fn without_a_key_the_managed_identity_is_used() {
        for (text, endpoint) in [
            ("AccountName=acct", "https://acct.table.core.windows.net"),
            (
                "TableEndpoint=https://acct.table.core.windows.net/;",
                "https://acct.table.core.windows.net",
            ),
        ] {
            let account = StorageAccount::parse(text).unwrap();
            assert_eq!(account.table_endpoint, endpoint);
            assert!(matches!(account.credential, Credential::EntraId(_)), "{text}");
            assert_eq!(format!("{:?}", account.credential), "EntraId");
        }
    }

    #[test]
    fn bad_strings_are_invalid_input() {
        for (text, needle) in [
            ("", "empty"),
            ("AccountKey=a2V5", "AccountName or TableEndpoint is missing"),
            (
                "AccountKey=a2V5;TableEndpoint=https://a.table.core.windows.net",
                "AccountName is missing",
            ),
            ("AccountName=a;AccountKey=not base64!", "not base64"),
            ("AccountName=a;AccountKey=a2V5;garbage", "without '='"),
            ("AccountName=a;AccountName=b;AccountKey=a2V5", "twice"),
            ("AccountName=a;AccountKey=a2V5;TableEndpoint=not a url", "not a URL"),
            ("AccountName=a;AccountKey=a2V5;TableEndpoint=ftp://host", "http(s)"),
            (
                "AccountName=a;AccountKey=a2V5;DefaultEndpointsProtocol=ftp",
                "http or https",
            ),
            ("AccountName=a;SharedAccessSignature=sv=x", "not supported"),
        ] {
            let err = StorageAccount::parse(text).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidInput, "{text}");
            assert!(err.message.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let account = StorageAccount::parse("UseDevelopmentStorage=true").unwrap();
        let shown = format!("{account:?}");
        assert!(shown.contains("redacted") && !shown.contains("Eby8"), "{shown}");
    }
}
