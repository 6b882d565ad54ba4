//! Request authorization: the `Authorization` header for each [`Credential`].
//!
//! Shared Key for the Table service signs `VERB \n Content-MD5 \n Content-Type \n x-ms-date \n
//! CanonicalizedResource` with HMAC-SHA256 of the account key. The canonicalized resource is
//! `/` + account + the request's (still percent-encoded) URL path, plus `?comp=..` when the
//! request has one — query parameters such as `$filter` are not signed. For a path-style
//! emulator URL the path already starts with the account, so it appears twice
//! (`/devstoreaccount1/devstoreaccount1/Tables`); that is what the service expects.
//!
//! With Entra ID the header is a bearer token instead ([`super::identity`]).
//!
//! We use full Shared Key rather than Shared Key Lite because it also covers the verb and the
//! content type. Written by hand (on `hmac`/`sha2`) because no maintained crate signs Table
//! requests outside the abandoned `azure_data_tables` line.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::connection::Credential;
use crate::Result;

/// What of a request the signature covers.
#[derive(Debug, Clone, Copy)]
pub struct SignedParts<'a> {
    /// `GET`, `POST`, `PUT`, `MERGE`, `DELETE`.
    pub method: &'a str,
    /// The `Content-Type` header, empty when the request has no body.
    pub content_type: &'a str,
    /// The `x-ms-date` header (RFC 1123).
    pub date: &'a str,
    /// The URL path exactly as sent, percent-encoding included.
    pub path: &'a str,
    /// The value of the `comp` query parameter, if any.
    pub comp: Option<&'a str>,
}

/// The `Authorization` header value for a request.
pub async fn authorization(credential: &Credential, parts: &SignedParts<'_>) -> Result<String> {
    match credential {
        Credential::SharedKey { account, key } => {
            let signature = sign(key, &string_to_sign(account, parts));
            Ok(format!("SharedKey {account}:{signature}"))
        }
        Credential::EntraId(token) => super::identity::bearer(token.as_ref()).await,
    }
}

/// The Shared Key (Table service) string-to-sign. Content-MD5 is always empty: we never send it.
pub fn string_to_sign(account: &str, parts: &SignedParts<'_>) -> String {
    let mut resource = format!("/{account}{}", parts.path);
    if let Some(comp) = parts.comp {
        resource.push_str("?comp=");
        resource.push_str(comp);
    }
    format!("{}\n\n{}\n{}\n{resource}", parts.method, parts.content_type, parts.date)
}

fn sign(key: &[u8], text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(text.as_bytes());
    BASE64.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Mon, 30 Nov 2026 08:42:02 GMT";

    #[test]
    fn string_to_sign_for_a_path_style_insert() {
        let parts = SignedParts {
            method: "POST",
            content_type: "application/json",
            date: DATE,
            path: "/devstoreaccount1/messages",
            comp: None,
        };
        assert_eq!(
            string_to_sign("devstoreaccount1", &parts),
            "POST\n\napplication/json\nMon, 30 Nov 2026 08:42:02 GMT\n/devstoreaccount1/devstoreaccount1/messages"
        );
    }

    #[test]
    fn string_to_sign_keeps_the_encoded_path_and_comp() {
        let parts = SignedParts {
            method: "GET",
            content_type: "",
            date: DATE,
            path: "/rooms(PartitionKey='o%27%27brien',RowKey='a%20b')",
            comp: Some("acl"),
        };
        assert_eq!(
            string_to_sign("acct", &parts),
            "GET\n\n\nMon, 30 Nov 2026 08:42:02 GMT\n/acct/rooms(PartitionKey='o%27%27brien',RowKey='a%20b')?comp=acl"
        );
    }

    #[tokio::test]
    async fn signature_is_hmac_sha256_of_the_string_to_sign() {
        let credential = Credential::SharedKey {
            account: "acct".into(),
            key: b"key".to_vec(),
        };
        let parts = SignedParts {
            method: "GET",
            content_type: "",
            date: DATE,
            path: "/Tables",
            comp: None,
        };
        assert_eq!(
            authorization(&credential, &parts).await.unwrap(),
            format!("SharedKey acct:{KNOWN_SIGNATURE}")
        );
    }

    /// Computed outside Rust: `printf 'GET\n\n\nMon, 30 Nov 2026 08:42:02 GMT\n/acct/Tables' |
    /// openssl dgst -sha256 -hmac key -binary | base64`.
    const KNOWN_SIGNATURE: &str = "hg9es1hDbC6iVbT4eIxJvlXjM/cO4bQjAwh4hZuBu5s=";
}
