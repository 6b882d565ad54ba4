//! Where attachment bytes live: an object store behind one trait, as table storage is behind
//! `TableBackend`. Two backends: Azure Blob Storage ([`azure_blob`]: REST with shared access
//! signatures, Azurite in tests) and files under the data directory ([`embedded`]: links
//! served by this binary, signed the same way — expiring, bound to one object and one
//! method). Clients never see which: they get a method, a URL and headers to upload with, and
//! a URL to download from. [`Objects`] checks keys once for every backend; the conformance
//! suite (tests/api/object_store.rs) is what each backend passes.
//!
//! The bytes never pass through the API: a client uploads straight to the store with a link
//! the server signed, and downloads through a link the server signs when a member asks. Only
//! copies (a forward) read and write bytes here.

pub mod azure_blob;
pub mod embedded;
#[cfg(any(test, feature = "testing"))]
pub mod faults;
pub mod sas;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use tabletalk_domain::error::{Error, Result};

/// An object's key: `/`-separated segments of `[A-Za-z0-9._-]`, none empty, `.` or `..`.
/// Once one exists it is valid: every backend can use it as a blob name and a file name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(String);

impl ObjectKey {
    /// Longest key (Azure allows 1024 characters for a blob name).
    pub const MAX_LEN: usize = 1024;

    pub fn parse(key: &str) -> Result<ObjectKey> {
        let valid_segment = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        if key.is_empty() || key.len() > Self::MAX_LEN || !key.split('/').all(valid_segment) {
            return Err(Error::bad_request("not an object key"));
        }
        Ok(ObjectKey(key.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the store knows of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: u64,
    /// The `Content-Type` it was uploaded with.
    pub mime: String,
}

/// A signed request a client makes on its own: `method` to `url` with `headers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl Link {
    /// An upload: a PUT of the file's bytes to `url`, with the headers Blob Storage needs (the
    /// embedded store takes the same, so a front-end does one thing everywhere).
    pub fn put(url: String, mime: &str) -> Link {
        Link {
            method: "PUT".into(),
            url,
            headers: vec![
                ("Content-Type".into(), mime.to_owned()),
                ("x-ms-blob-type".into(), "BlockBlob".into()),
            ],
        }
    }
}

/// What an object store backend implements. Keys arrive checked ([`ObjectKey`]).
#[async_trait]
pub trait ObjectBackend: fmt::Debug + Send + Sync + 'static {
    /// Creates the container or directory if missing (idempotent).
    async fn prepare(&self) -> Result<()>;
    /// A link that lets its holder `PUT` this one object, with this `Content-Type`, until
    /// `expires`.
    async fn upload_link(&self, key: &ObjectKey, mime: &str, expires: DateTime<Utc>) -> Result<Link>;
    /// A URL that lets its holder `GET` this one object until `expires`, answered with
    /// `Content-Disposition: attachment; filename=<file_name>` and `Content-Type: <mime>`.
    async fn download_url(
        &self,
        key: &ObjectKey,
        mime: &str,
        file_name: &str,
        expires: DateTime<Utc>,
    ) -> Result<String>;
    /// Size and type; `None` if there is no such object.
    async fn head(&self, key: &ObjectKey) -> Result<Option<ObjectInfo>>;
    /// Stores an object, replacing any of that key.
    async fn put(&self, key: &ObjectKey, mime: &str, bytes: Vec<u8>) -> Result<()>;
    /// An object's bytes; `None` if there is no such object.
    async fn get(&self, key: &ObjectKey) -> Result<Option<Vec<u8>>>;
    /// Deletes an object; success when there is none.
    async fn delete(&self, key: &ObjectKey) -> Result<()>;
    /// Every key starting with `prefix`, in ascending order.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectKey>>;
}

/// The object store as tabletalk uses it. Cloning is cheap (one `Arc`).
#[derive(Debug, Clone)]
pub struct Objects {
    backend: Arc<dyn ObjectBackend>,
}

impl Objects {
    pub fn new(backend: impl ObjectBackend) -> Objects {
        Objects {
            backend: Arc::new(backend),
        }
    }

    pub fn backend(&self) -> &dyn ObjectBackend {
        self.backend.as_ref()
    }

    /// Copies an object to another key (a forward's copy). Through this process: attachments
    /// are bounded in size, and a server-side copy is asynchronous on Azure.
    pub async fn copy(&self, from: &ObjectKey, to: &ObjectKey) -> Result<bool> {
        let Some(info) = self.backend.head(from).await? else {
            return Ok(false);
        };
        let Some(bytes) = self.backend.get(from).await? else {
            return Ok(false);
        };
        self.backend.put(to, &info.mime, bytes).await?;
        Ok(true)
    }

    /// Deletes every object whose key starts with `prefix`.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<()> {
        for key in self.backend.list(prefix).await? {
            self.backend.delete(&key).await?;
        }
        Ok(())
    }
}

impl std::ops::Deref for Objects {
    type Target = dyn ObjectBackend;

    fn deref(&self) -> &Self::Target {
        self.backend.as_ref()
    }
}

/// A store error as the service answers it: never the client's doing.
pub fn unavailable(what: &str, e: impl fmt::Display) -> Error {
    Error::Unavailable(format!("object store: {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_key_is_safe_segments() {
        assert!(ObjectKey::parse("room/user/abc/photo.png").is_ok());
        for bad in ["", "a//b", "../x", "a/./b", "a b", "a/%2e", "/a", "a/"] {
            assert!(ObjectKey::parse(bad).is_err(), "{bad:?}");
        }
    }
}
