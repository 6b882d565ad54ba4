//! The embedded object store: files under the data directory, with upload and download links
//! served by this binary (`/objects/{key}`), signed the way a shared access signature is — an
//! HMAC-SHA256 over the method, the key, the expiry and, for a download, the answer's type and
//! file name — so a link expires, works for one object and one method, and cannot be altered.
//!
//! The signing key is 32 random bytes in `<dir>/objects.key`, made on first use, so links
//! outlive a restart and every process on one data directory accepts every other's links.
//! Each object is two files in `<dir>/objects/`: `<encoded key>.data` and `<encoded key>.type`
//! (its `Content-Type`); the key is percent-encoded into one file name, so no key reaches
//! outside the directory and a listing is one `read_dir`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::Sha256;

use super::{Link, ObjectBackend, ObjectInfo, ObjectKey, unavailable};
use tabletalk_domain::error::{Error, Result};

/// Where this binary serves objects.
pub const ROUTE_PREFIX: &str = "/objects/";

/// Uploads to `/objects/{key}` received at once; past it, one is refused (429) before any of
/// its body is read, so replaying a link many times at once cannot tie up the server. A
/// download needs no place: it is streamed a chunk at a time.
pub const MAX_REQUESTS_AT_ONCE: usize = 64;

/// The longest an upload may go without sending any of its body: a stalled one gives up its
/// place instead of holding it for as long as its sender likes.
pub const UPLOAD_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How much of a file one read moves: what an upload or a download holds in memory at a time.
const CHUNK_BYTES: usize = 64 * 1024;

/// An upload's file while it is written: removed when dropped unless it was linked into place
/// (then removing it only drops the second name), so an upload cut off half-way — its sender
/// gone, its request dropped — leaves nothing behind.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Files under a directory, links served by this binary at `public_base`. Cloning shares the
/// signing key and the bound on requests at once.
#[derive(Clone)]
pub struct EmbeddedObjects {
    dir: PathBuf,
    public_base: String,
    secret: Arc<[u8]>,
    requests: Arc<tokio::sync::Semaphore>,
}

/// How an upload through a link ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uploaded {
    Created,
    /// An object of that key exists: an upload link only creates.
    Exists,
    /// The body ran past the largest size allowed; nothing was kept.
    TooLarge,
}

/// An upload's place among [`MAX_REQUESTS_AT_ONCE`]; dropping it frees the place.
pub type RequestPermit = tokio::sync::OwnedSemaphorePermit;

impl std::fmt::Debug for EmbeddedObjects {
    /// Leaves the signing key out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedObjects")
            .field("dir", &self.dir)
            .field("public_base", &self.public_base)
            .finish()
    }
}

/// What a signed request to `/objects/{key}` carries in its query.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SignedQuery {
    /// Expiry, Unix seconds.
    pub se: Option<i64>,
    /// The answer's `Content-Type` (downloads).
    pub rsct: Option<String>,
    /// The answer's file name (downloads).
    pub rscd: Option<String>,
    /// The signature, base64url.
    pub sig: Option<String>,
}

/// What a key must not keep in a file name: its `/` (every object is one file of one
/// directory) and `%`, which makes the encoding reversible. A key is ASCII without `..`
/// segments, so nothing else needs encoding and the name stays within 255 bytes.
const FILE_NAME: &AsciiSet = &CONTROLS.add(b'/').add(b'%').add(b'\\');

/// The length of the links' signing key.
const KEY_BYTES: usize = 32;

/// Writes a file only its owner may read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

impl EmbeddedObjects {
    /// The store under `data_dir`, its links on `public_base` (e.g. `http://127.0.0.1:7071`).
    pub fn open(data_dir: &Path, public_base: &str) -> Result<EmbeddedObjects> {
        let dir = data_dir.join("objects");
        std::fs::create_dir_all(&dir).map_err(|e| unavailable("cannot create the objects directory", e))?;
        let key_file = data_dir.join("objects.key");
        let secret = match std::fs::read(&key_file) {
            Ok(bytes) if bytes.len() == KEY_BYTES => bytes,
            // Missing, or cut short (a crash while it was first written): a new one.
            _ => {
                let bytes: [u8; KEY_BYTES] = rand::random();
                // Written under another name, then linked into place: two processes starting
                // at once end with one key (the first link wins, and both re-read it). Only the
                // server's own user may read it.
                let scratch = data_dir.join(format!("objects.key.{}", uuid::Uuid::new_v4().simple()));
                write_private(&scratch, &bytes).map_err(|e| unavailable("cannot write the signing key", e))?;
                let linked = std::fs::hard_link(&scratch, &key_file).is_ok();
                let current = std::fs::read(&key_file).ok().filter(|b| b.len() == KEY_BYTES);
                if !linked && current.is_none() {
                    // A file of the wrong length is in the way: never sign with it.
                    std::fs::rename(&scratch, &key_file).map_err(|e| unavailable("cannot write the signing key", e))?;
                }
                let _ = std::fs::remove_file(&scratch);
                let key = std::fs::read(&key_file).map_err(|e| unavailable("cannot read the signing key", e))?;
                if key.len() != KEY_BYTES {
                    return Err(unavailable("the signing key", "is not 32 bytes"));
                }
                key
            }
        };
        forget_stale_uploads(&dir);
        Ok(EmbeddedObjects {
            dir,
            public_base: public_base.trim_end_matches('/').to_owned(),
            secret: Arc::from(secret),
            requests: Arc::new(tokio::sync::Semaphore::new(MAX_REQUESTS_AT_ONCE)),
        })
    }

    fn file(&self, key: &ObjectKey, ext: &str) -> PathBuf {
        self.dir
            .join(format!("{}.{ext}", utf8_percent_encode(key.as_str(), FILE_NAME)))
    }

    fn sign(&self, method: &str, key: &ObjectKey, expires: i64, mime: &str, file_name: &str) -> String {
        let text = format!("{method}\n{key}\n{expires}\n{mime}\n{file_name}");
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC accepts keys of any length");
        mac.update(text.as_bytes());
        B64.encode(mac.finalize().into_bytes())
    }

    fn url(&self, key: &ObjectKey, query: &str) -> String {
        format!("{}{ROUTE_PREFIX}{key}?{query}", self.public_base)
    }

    /// Checks a request's signature: `Forbidden` if it is missing, altered, for another object
    /// or method, or expired — as the blob service answers 403.
    pub fn verify(&self, method: &str, key: &ObjectKey, query: &SignedQuery, now: DateTime<Utc>) -> Result<()> {
        let refused = |why: &str| Error::Forbidden(format!("the signature is not valid: {why}"));
        let (Some(expires), Some(sig)) = (query.se, query.sig.as_deref()) else {
            return Err(refused("missing"));
        };
        let expected = self.sign(
            method,
            key,
            expires,
            query.rsct.as_deref().unwrap_or(""),
            query.rscd.as_deref().unwrap_or(""),
        );
        let given = B64.decode(sig).map_err(|_| refused("garbled"))?;
        let expected = B64.decode(expected).expect("our own encoding");
        if !constant_time_eq(&given, &expected) {
            return Err(refused("it does not match"));
        }
        if now.timestamp() >= expires {
            return Err(refused("the link expired"));
        }
        Ok(())
    }
}

impl EmbeddedObjects {
    /// A place among the uploads received at once, or 429 when all are taken.
    pub fn admit_request(&self) -> Result<RequestPermit> {
        self.requests
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::TooManyRequests {
                message: "too many object requests at once; try again".into(),
                retry_after_secs: 1,
            })
    }

    /// Stores an object from `body` unless one of that key exists: what an upload link does,
    /// as a blob SAS with only the create permission does. An existing object is found before
    /// any of the body is read, and the body goes to a file a chunk at a time, never more than
    /// `max` bytes of it; the file is then linked into place, which fails if one is there, so
    /// of two uploads at once exactly one lands.
    pub async fn create<S, E>(&self, key: &ObjectKey, mime: &str, mut body: S, max: u64) -> Result<Uploaded>
    where
        S: futures::Stream<Item = std::result::Result<bytes::Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        use futures::StreamExt as _;
        use tokio::io::AsyncWriteExt as _;
        if self.head(key).await?.is_some() {
            return Ok(Uploaded::Exists);
        }
        let scratch = Scratch(self.dir.join(format!(".{}.part", uuid::Uuid::new_v4().simple())));
        let written = async {
            let mut file = tokio::fs::File::create(&scratch.0)
                .await
                .map_err(|e| unavailable("cannot write an object", e))?;
            let mut size = 0u64;
            loop {
                let Ok(next) = tokio::time::timeout(UPLOAD_IDLE_TIMEOUT, body.next()).await else {
                    return Err(Error::bad_request(format!(
                        "the body stalled for {} seconds",
                        UPLOAD_IDLE_TIMEOUT.as_secs()
                    )));
                };
                let Some(chunk) = next else { break };
                let chunk = chunk.map_err(|e| Error::bad_request(format!("the body could not be read: {e}")))?;
                size += chunk.len() as u64;
                if size > max {
                    return Ok(false);
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| unavailable("cannot write an object", e))?;
            }
            file.flush()
                .await
                .map_err(|e| unavailable("cannot write an object", e))?;
            Ok::<_, Error>(true)
        }
        .await;
        let linked = match written? {
            true => Some(tokio::fs::hard_link(&scratch.0, self.file(key, "data")).await),
            false => None,
        };
        drop(scratch);
        match linked {
            None => return Ok(Uploaded::TooLarge),
            Some(Ok(())) => {}
            Some(Err(e)) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(Uploaded::Exists),
            Some(Err(e)) => return Err(unavailable("cannot write an object", e)),
        }
        tokio::fs::write(self.file(key, "type"), mime)
            .await
            .map_err(|e| unavailable("cannot write an object", e))?;
        Ok(Uploaded::Created)
    }

    /// An object's bytes as a stream of chunks, read from its file as they are sent (a reader
    /// that stops reading holds one chunk, not the file); `None` when there is no such object.
    pub async fn read_stream(
        &self,
        key: &ObjectKey,
    ) -> Result<Option<impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static>> {
        use tokio::io::AsyncReadExt as _;
        let file = match tokio::fs::File::open(self.file(key, "data")).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable("cannot read an object", e)),
        };
        Ok(Some(futures::stream::unfold(Some(file), |file| async move {
            let mut file = file?;
            let mut chunk = vec![0; CHUNK_BYTES];
            match file.read(&mut chunk).await {
                Ok(0) => None,
                Ok(n) => {
                    chunk.truncate(n);
                    Some((Ok(bytes::Bytes::from(chunk)), Some(file)))
                }
                Err(e) => Some((Err(e), None)),
            }
        })))
    }
}

/// Removes the files of uploads a stopped process left half-written (an upload that ends in
/// this process removes its own): those older than an hour, so another process's upload under
/// way on the same directory is left alone.
fn forget_stale_uploads(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let stale = std::time::Duration::from_secs(3600);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > stale));
        if name.starts_with('.') && name.ends_with(".part") && old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Compares without stopping at the first difference, so timing tells nothing of the secret.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn encode(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

#[async_trait]
impl ObjectBackend for EmbeddedObjects {
    async fn prepare(&self) -> Result<()> {
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|e| unavailable("cannot create the objects directory", e))
    }

    async fn upload_link(&self, key: &ObjectKey, mime: &str, expires: DateTime<Utc>) -> Result<Link> {
        let se = expires.timestamp();
        let sig = self.sign("PUT", key, se, "", "");
        Ok(Link::put(self.url(key, &format!("se={se}&sig={sig}")), mime))
    }

    async fn download_url(
        &self,
        key: &ObjectKey,
        mime: &str,
        file_name: &str,
        expires: DateTime<Utc>,
    ) -> Result<String> {
        let se = expires.timestamp();
        let sig = self.sign("GET", key, se, mime, file_name);
        Ok(self.url(
            key,
            &format!("se={se}&rsct={}&rscd={}&sig={sig}", encode(mime), encode(file_name)),
        ))
    }

    async fn head(&self, key: &ObjectKey) -> Result<Option<ObjectInfo>> {
        let size = match tokio::fs::metadata(self.file(key, "data")).await {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable("cannot read an object", e)),
        };
        let mime = tokio::fs::read_to_string(self.file(key, "type"))
            .await
            .unwrap_or_default();
        Ok(Some(ObjectInfo { size, mime }))
    }

    async fn put(&self, key: &ObjectKey, mime: &str, bytes: Vec<u8>) -> Result<()> {
        // Written aside, then renamed into place: a reader never sees half an object.
        let scratch = self.dir.join(format!(".{}.part", uuid::Uuid::new_v4().simple()));
        tokio::fs::write(&scratch, &bytes)
            .await
            .map_err(|e| unavailable("cannot write an object", e))?;
        tokio::fs::write(self.file(key, "type"), mime)
            .await
            .map_err(|e| unavailable("cannot write an object", e))?;
        tokio::fs::rename(&scratch, self.file(key, "data"))
            .await
            .map_err(|e| unavailable("cannot write an object", e))
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Vec<u8>>> {
        match tokio::fs::read(self.file(key, "data")).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unavailable("cannot read an object", e)),
        }
    }

    async fn delete(&self, key: &ObjectKey) -> Result<()> {
        for ext in ["data", "type"] {
            match tokio::fs::remove_file(self.file(key, ext)).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(unavailable("cannot delete an object", e)),
            }
        }
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectKey>> {
        let mut entries = tokio::fs::read_dir(&self.dir)
            .await
            .map_err(|e| unavailable("cannot list objects", e))?;
        let mut keys = Vec::new();
        while let Some(entry) = entries
            .next_entry()
            .await
            .map_err(|e| unavailable("cannot list objects", e))?
        {
            let name = entry.file_name();
            let Some(encoded) = name.to_str().and_then(|n| n.strip_suffix(".data")) else {
                continue;
            };
            let Ok(decoded) = percent_decode_str(encoded).decode_utf8() else {
                continue;
            };
            if decoded.starts_with(prefix)
                && let Ok(key) = ObjectKey::parse(&decoded)
            {
                keys.push(key);
            }
        }
        keys.sort();
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty or cut-short key file would let anyone sign links: it is replaced, and the key
    /// is readable by the server's own user only.
    #[test]
    fn a_signing_key_cut_short_is_replaced_and_only_its_owner_reads_it() {
        let dir = std::env::temp_dir().join(format!("tt-objkey-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("objects.key"), b"").unwrap();
        let store = EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap();
        assert_eq!(store.secret.len(), KEY_BYTES);
        assert_eq!(&std::fs::read(dir.join("objects.key")).unwrap()[..], &store.secret[..]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join("objects.key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        let again = EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap();
        assert_eq!(again.secret, store.secret, "a second process signs with the same key");
    }

    /// The longest key an upload makes (a room, the longest user segment, an id, a name of
    /// 100 characters each `_`) is one file the filesystem accepts, and lists as itself.
    #[tokio::test]
    async fn the_longest_upload_key_is_stored_and_listed() {
        let dir = std::env::temp_dir().join(format!("tt-objlong-{}", uuid::Uuid::new_v4().simple()));
        let store = EmbeddedObjects::open(&dir, "http://127.0.0.1:1").unwrap();
        let user = tabletalk_domain::ids::UserId::parse(&"é".repeat(200)).unwrap();
        let room = tabletalk_domain::ids::RoomId::generate();
        let key = format!(
            "{room}/{}/{}/{}",
            tabletalk_domain::attachments::user_segment(&user),
            "0".repeat(32),
            tabletalk_domain::attachments::safe_name(&"文".repeat(100))
        );
        let key = ObjectKey::parse(&key).unwrap();
        store.put(&key, "text/plain", b"hello".to_vec()).await.unwrap();
        assert_eq!(store.get(&key).await.unwrap().as_deref(), Some(&b"hello"[..]));
        assert_eq!(store.list(&format!("{room}/")).await.unwrap(), vec![key]);
    }
}
