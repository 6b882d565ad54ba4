//! The reference web client: `functions/web/`, served at `/` (its page) and `/web/*` (its
//! modules, styles and the bundled Web PubSub client), and its service worker at `/sw.js`:
//! a worker's scope is at most the folder it is served from, and the push worker must control
//! the page at `/`. These paths collide with no API path
//! (`/api/*`), the local hub (`/client/hubs/*`) or the embedded object store (`/objects/*`).
//!
//! The files are compiled into the binary (`rust-embed`), so a release build on a fresh
//! machine serves the page with no extra step; a debug build reads them from disk, so the
//! page's JavaScript can be changed and reloaded without rebuilding. Every answer carries an
//! `ETag` (the file's SHA-256) and `Cache-Control: no-cache`: the browser keeps its copy and
//! asks each time, and an unchanged file costs a 304 — the files have no hashed names, so a
//! longer cache would serve a stale module after an upgrade.

use axum::Extension;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;
use tabletalk::Error;

use super::error::ApiError;

/// What the page needs and nothing else: the build tooling (`package.json`, `tools/`) and
/// the README stay out of the binary.
#[derive(RustEmbed)]
#[folder = "web/"]
#[include = "index.html"]
#[include = "sw.js"]
#[include = "*.css"]
#[include = "js/*"]
#[include = "vendor/*"]
#[include = "icons/*"]
struct Files;

/// The page's Content-Security-Policy. Scripts, styles, workers and everything else come from
/// this origin only; the page connects to this origin (the API, the local live hub, the
/// embedded object store) and to the configured attachment store and live channel (`origins`);
/// images come from this origin, the attachment blobs the page makes itself (`blob:`) and
/// `data:` (the favicon), so a message's remote `<img>` (a tracking pixel in a private room)
/// never loads; and no other site may frame the page.
#[derive(Debug, Clone)]
pub struct PagePolicy(HeaderValue);

impl PagePolicy {
    /// The policy allowing connections to `origins` (`scheme://host[:port]`) besides this one.
    /// An origin is ASCII by construction; one that is not a header's text is left out.
    pub fn new(origins: &[String]) -> PagePolicy {
        let others: String = origins
            .iter()
            .filter(|origin| HeaderValue::from_str(origin).is_ok())
            .map(|origin| format!(" {origin}"))
            .collect();
        let policy = format!(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; \
             connect-src 'self'{others}; worker-src 'self'; object-src 'none'; base-uri 'none'; \
             form-action 'self'; frame-ancestors 'none'"
        );
        PagePolicy(HeaderValue::from_str(&policy).expect("a policy of header text"))
    }
}

impl Default for PagePolicy {
    fn default() -> PagePolicy {
        PagePolicy::new(&[])
    }
}

/// `GET /`: the page, with its policy. (The Functions host also polls `/` until the handler
/// answers.)
pub async fn page(policy: Option<Extension<PagePolicy>>, headers: HeaderMap) -> Response {
    let policy = policy.map(|Extension(policy)| policy).unwrap_or_default();
    let mut response = serve("index.html", &headers);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, policy.0);
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// `GET /sw.js`: the push service worker (functions/web/sw.js), from the root so that its
/// scope covers the page.
pub async fn service_worker(headers: HeaderMap) -> Response {
    serve("sw.js", &headers)
}

/// `GET /web/{*path}`: one of the page's files; 404 (the API's error body) for any other.
pub async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(file) = Files::get(path) else {
        return ApiError(Error::not_found("no such file")).into_response();
    };
    let etag = format!(
        "\"{}\"",
        file.metadata
            .sha256_hash()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mut response = match headers.get(header::IF_NONE_MATCH) {
        Some(seen) if seen.as_bytes() == etag.as_bytes() => StatusCode::NOT_MODIFIED.into_response(),
        _ => file.data.into_owned().into_response(),
    };
    let content_type = match file.metadata.mimetype() {
        // Modules must come as JavaScript or the browser refuses them.
        text if text.starts_with("text/") || text.ends_with("javascript") => format!("{text}; charset=utf-8"),
        other => other.to_owned(),
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
