//! Shared access signatures for Blob Storage, written by hand on `hmac`/`sha2` as the table
//! client's Shared Key is: each is a string-to-sign of fixed fields, HMAC-SHA256 with a key,
//! base64. Azurite checks both kinds as Azure does, and the end-to-end tests run against it
//! (tests/api/object_store.rs and attachments.rs with the key, tests/api/entra.rs with the
//! managed identity).
//!
//! - A **service SAS** ([`service_sas`]) is signed with the account key (Azurite,
//!   development, any deployment configured with a key).
//! - A **user delegation SAS** ([`user_delegation_sas`]) is signed with a user delegation key
//!   that the app's managed identity obtains from the blob service; no account key exists on
//!   Azure (the bicep template gives the identity the data role, and no key is configured).
//!
//! Both use signed version [`VERSION`], whose string-to-sign has the encryption-scope field
//! (versions from 2020-12-06 on).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::Sha256;

/// The signed version (`sv`) and the `x-ms-version` of every request.
pub const VERSION: &str = "2022-11-02";

/// Everything but RFC 3986's unreserved characters is encoded in a query value.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// What a signature grants: permissions on one blob (`sr=b`) or a container (`sr=c`), until
/// `expiry`, with optional overrides of the answer's headers.
#[derive(Debug, Clone, Default)]
pub struct Grant<'a> {
    /// `r`, `c`, `w`, `d`, `l`, … in Azure's order.
    pub permissions: &'a str,
    pub expiry: DateTime<Utc>,
    /// The account, the container and (for `sr=b`) the blob.
    pub account: &'a str,
    pub container: &'a str,
    pub blob: Option<&'a str>,
    /// `Content-Disposition` of the answer (`rscd`).
    pub content_disposition: Option<&'a str>,
    /// `Content-Type` of the answer (`rsct`).
    pub content_type: Option<&'a str>,
}

impl Grant<'_> {
    fn resource(&self) -> (&'static str, String) {
        match self.blob {
            Some(blob) => ("b", format!("/blob/{}/{}/{blob}", self.account, self.container)),
            None => ("c", format!("/blob/{}/{}", self.account, self.container)),
        }
    }

    fn expiry(&self) -> String {
        iso(self.expiry)
    }
}

/// A time as SAS fields carry it.
pub fn iso(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The service SAS string-to-sign (signed version 2020-12-06 and later).
pub fn service_string_to_sign(grant: &Grant<'_>) -> String {
    let (sr, resource) = grant.resource();
    [
        grant.permissions,
        "",
        &grant.expiry(),
        &resource,
        "", // signed identifier
    ]
    .join("\n")
        + &common_tail(grant, sr)
}

/// A service SAS query string (without `?`), signed with the account key.
pub fn service_sas(key: &[u8], grant: &Grant<'_>) -> String {
    let signature = sign(key, &service_string_to_sign(grant));
    query(grant, &[], &signature)
}

/// A user delegation key as `Get User Delegation Key` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationKey {
    pub signed_oid: String,
    pub signed_tid: String,
    pub signed_start: String,
    pub signed_expiry: String,
    pub signed_service: String,
    pub signed_version: String,
    /// The key itself, base64 (never logged).
    pub value: String,
}

/// The user delegation SAS string-to-sign (signed version 2020-12-06 to 2025-01-05).
pub fn user_delegation_string_to_sign(key: &DelegationKey, grant: &Grant<'_>) -> String {
    let (sr, resource) = grant.resource();
    [
        grant.permissions,
        "",
        &grant.expiry(),
        &resource,
        &key.signed_oid,
        &key.signed_tid,
        &key.signed_start,
        &key.signed_expiry,
        &key.signed_service,
        &key.signed_version,
        "", // signed authorized object id
        "", // signed unauthorized object id
        "", // signed correlation id
    ]
    .join("\n")
        + &common_tail(grant, sr)
}

/// The fields both kinds of SAS end with, from the signed IP on, after a line break.
fn common_tail(grant: &Grant<'_>, sr: &str) -> String {
    let fields = [
        "", // signed IP
        "", // signed protocol
        VERSION,
        sr,
        "", // snapshot time
        "", // encryption scope
        "", // rscc
        grant.content_disposition.unwrap_or(""),
        "", // rsce
        "", // rscl
        grant.content_type.unwrap_or(""),
    ];
    format!("\n{}", fields.join("\n"))
}

/// A user delegation SAS query string (without `?`).
pub fn user_delegation_sas(key: &DelegationKey, grant: &Grant<'_>) -> Result<String, base64::DecodeError> {
    let secret = BASE64.decode(&key.value)?;
    let signature = sign(&secret, &user_delegation_string_to_sign(key, grant));
    let fields = [
        ("skoid", key.signed_oid.as_str()),
        ("sktid", key.signed_tid.as_str()),
        ("skt", key.signed_start.as_str()),
        ("ske", key.signed_expiry.as_str()),
        ("sks", key.signed_service.as_str()),
        ("skv", key.signed_version.as_str()),
    ];
    Ok(query(grant, &fields, &signature))
}

fn query(grant: &Grant<'_>, extra: &[(&str, &str)], signature: &str) -> String {
    let (sr, _) = grant.resource();
    let expiry = grant.expiry();
    let mut fields: Vec<(&str, &str)> = vec![("sv", VERSION), ("sr", sr), ("sp", grant.permissions), ("se", &expiry)];
    fields.extend_from_slice(extra);
    if let Some(rscd) = grant.content_disposition {
        fields.push(("rscd", rscd));
    }
    if let Some(rsct) = grant.content_type {
        fields.push(("rsct", rsct));
    }
    fields.push(("sig", signature));
    fields
        .iter()
        .map(|(name, value)| format!("{name}={}", utf8_percent_encode(value, QUERY_VALUE)))
        .collect::<Vec<_>>()
        .join("&")
}

pub fn sign(key: &[u8], text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(text.as_bytes());
    BASE64.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant<'static> {
        Grant {
            permissions: "r",
            expiry: DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z").unwrap().to_utc(),
            account: "acct",
            container: "attachments",
            blob: Some("room/user/id/a.png"),
            content_disposition: Some("attachment; filename=\"a.png\""),
            content_type: Some("image/png"),
        }
    }

    /// The fields in the order the service SAS documentation lists them (16 lines).
    #[test]
    fn the_service_string_to_sign_has_the_documented_fields() {
        assert_eq!(
            service_string_to_sign(&grant()),
            "r\n\n2026-12-01T12:00:00Z\n/blob/acct/attachments/room/user/id/a.png\n\n\n\n2022-11-02\nb\n\n\n\nattachment; filename=\"a.png\"\n\n\nimage/png"
        );
    }

    /// The fields in the order the user delegation SAS documentation lists them (24 lines),
    /// and the query carries the key's fields.
    #[test]
    fn the_user_delegation_string_to_sign_has_the_documented_fields() {
        let key = DelegationKey {
            signed_oid: "oid".into(),
            signed_tid: "tid".into(),
            signed_start: "2026-12-01T11:00:00Z".into(),
            signed_expiry: "2026-12-01T13:00:00Z".into(),
            signed_service: "b".into(),
            signed_version: "2022-11-02".into(),
            value: BASE64.encode(b"delegation key"),
        };
        let text = user_delegation_string_to_sign(&key, &grant());
        assert_eq!(text.split('\n').count(), 24);
        assert_eq!(
            text,
            "r\n\n2026-12-01T12:00:00Z\n/blob/acct/attachments/room/user/id/a.png\noid\ntid\n2026-12-01T11:00:00Z\n2026-12-01T13:00:00Z\nb\n2022-11-02\n\n\n\n\n\n2022-11-02\nb\n\n\n\nattachment; filename=\"a.png\"\n\n\nimage/png"
        );
        let sas = user_delegation_sas(&key, &grant()).unwrap();
        assert!(
            sas.contains("skoid=oid&sktid=tid&skt=2026-12-01T11%3A00%3A00Z"),
            "{sas}"
        );
        assert!(sas.contains(&format!(
            "sig={}",
            utf8_percent_encode(&sign(b"delegation key", &text), QUERY_VALUE)
        )));
    }

    /// Computed outside Rust: `printf 'abc' | openssl dgst -sha256 -hmac key -binary | base64`.
    #[test]
    fn the_signature_is_hmac_sha256_in_base64() {
        assert_eq!(sign(b"key", "abc"), "nBluMtwBdfhvSxy4konWYZ3mvuaZ5MN45oMJ7Zehpqs=");
    }
}
