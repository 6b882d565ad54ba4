//! Fetching a linked page for its preview, through the one SSRF-safe client
//! ([`OutboundClient`]): the URL and every redirect's target are checked before they are
//! requested and every name is resolved through the guarded resolver, so a page cannot send
//! the server to loopback, the private network or the metadata service, even by a redirect.
//!
//! What is read is bounded: at most [`MAX_REDIRECTS`] redirects, only `text/html` (or XHTML),
//! at most [`MAX_PAGE_BYTES`] of body (reading stops at the cap and the page is refused), and
//! the whole fetch within [`FETCH_DEADLINE`] on top of each request's own timeout.
//!
//! The page is read with html5ever's tokenizer rather than a tree builder or regexes: a
//! preview needs only `<title>` and the `<meta>` tags, which the tokenizer yields with their
//! entities decoded, while `<script>` and `<style>` bodies are switched to their raw states as
//! a browser would, so markup inside them is never taken for a tag.

use std::cell::RefCell;
use std::time::Duration;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use url::Url;

use super::outbound::{self, OutboundClient};
use tabletalk_domain::messages::previews::{LinkPreview, PageMeta};

/// Redirects followed before a fetch gives up; each target is checked like the first URL.
pub const MAX_REDIRECTS: usize = 3;
/// The most of a page's body that is read; a longer page is refused.
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Each request's own time limit.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole fetch's time limit, redirects included.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(10);

/// Why a link got no preview. Carries the host, status or type, never the page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPreview {
    #[error("refused: {0}")]
    Refused(String),
    #[error("the page answered {0}")]
    Status(u16),
    #[error("not an HTML page ({0})")]
    NotHtml(String),
    #[error("the page is larger than {MAX_PAGE_BYTES} bytes")]
    TooLarge,
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error("the fetch took too long")]
    TimedOut,
    #[error("the fetch failed: {0}")]
    Failed(String),
    #[error("the page has no title")]
    NoTitle,
}

/// Fetches pages for previews. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct PreviewFetcher {
    client: OutboundClient,
}

impl PreviewFetcher {
    /// A fetcher through `client` (made with the reach the deployment allows).
    pub fn new(client: OutboundClient) -> PreviewFetcher {
        PreviewFetcher { client }
    }

    /// The preview of `link`, or why there is none.
    pub async fn fetch(&self, link: &str) -> Result<LinkPreview, NoPreview> {
        tokio::time::timeout(FETCH_DEADLINE, self.follow(link))
            .await
            .map_err(|_| NoPreview::TimedOut)?
    }

    async fn follow(&self, link: &str) -> Result<LinkPreview, NoPreview> {
        let mut url = Url::parse(link).map_err(|_| NoPreview::Refused("is not a URL".into()))?;
        for _ in 0..=MAX_REDIRECTS {
            let request = self
                .client
                .get(url.as_str())
                .map_err(|refused| NoPreview::Refused(refused.0))?;
            let mut response = request
                .header(ACCEPT, "text/html,application/xhtml+xml")
                .send()
                .await
                .map_err(failure)?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .ok_or_else(|| NoPreview::Failed("a redirect without a Location".into()))?;
                url = url
                    .join(location)
                    .map_err(|_| NoPreview::Refused("redirects to no URL".into()))?;
                continue;
            }
            if !status.is_success() {
                return Err(NoPreview::Status(status.as_u16()));
            }
            let kind = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|t| t.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let essence = kind.split(';').next().unwrap_or("").trim().to_owned();
            if !matches!(essence.as_str(), "text/html" | "application/xhtml+xml") {
                return Err(NoPreview::NotHtml(if essence.is_empty() {
                    "no type".into()
                } else {
                    essence
                }));
            }
            if response.content_length().is_some_and(|n| n > MAX_PAGE_BYTES as u64) {
                return Err(NoPreview::TooLarge);
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(failure)? {
                if body.len() + chunk.len() > MAX_PAGE_BYTES {
                    return Err(NoPreview::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            let meta = page_meta(&String::from_utf8_lossy(&body));
            let image = meta
                .og_image
                .as_deref()
                .and_then(|image| url.join(image.trim()).ok())
                .filter(|image| matches!(image.scheme(), "http" | "https"))
                .map(String::from);
            return LinkPreview::from_meta(link, meta, image).ok_or(NoPreview::NoTitle);
        }
        Err(NoPreview::TooManyRedirects)
    }
}

fn failure(error: reqwest::Error) -> NoPreview {
    if let Some(refused) = outbound::refusal(&error) {
        return NoPreview::Refused(refused.0.clone());
    }
    if error.is_timeout() {
        return NoPreview::TimedOut;
    }
    NoPreview::Failed(error.without_url().to_string())
}

/// What a page's HTML says of itself: the first `<title>` and the first of each `<meta>` the
/// preview reads (`og:title`, `og:description`, `og:site_name`, `og:image`, `description`).
pub fn page_meta(html: &str) -> PageMeta {
    let sink = MetaSink::default();
    let tokenizer = Tokenizer::new(sink, Default::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.meta.into_inner()
}

#[derive(Default)]
struct MetaSink {
    meta: RefCell<PageMeta>,
    /// The title's text while inside the first `<title>`.
    title: RefCell<Option<String>>,
}

impl TokenSink for MetaSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                match (tag.kind, name) {
                    (TagKind::StartTag, "title") if self.meta.borrow().title.is_none() => {
                        *self.title.borrow_mut() = Some(String::new());
                        return TokenSinkResult::RawData(RawKind::Rcdata);
                    }
                    (TagKind::StartTag, "title") => return TokenSinkResult::RawData(RawKind::Rcdata),
                    (TagKind::EndTag, "title") => {
                        if let Some(title) = self.title.borrow_mut().take() {
                            self.meta.borrow_mut().title = Some(title);
                        }
                    }
                    (TagKind::StartTag, "script") => return TokenSinkResult::RawData(RawKind::ScriptData),
                    (TagKind::StartTag, "style" | "noscript" | "xmp" | "iframe" | "noembed" | "noframes") => {
                        return TokenSinkResult::RawData(RawKind::Rawtext);
                    }
                    (TagKind::StartTag, "textarea") => return TokenSinkResult::RawData(RawKind::Rcdata),
                    (TagKind::StartTag, "meta") => {
                        let attr = |wanted: &str| {
                            tag.attrs
                                .iter()
                                .find(|a| {
                                    let local: &str = &a.name.local;
                                    local.eq_ignore_ascii_case(wanted)
                                })
                                .map(|a| a.value.to_string())
                        };
                        let (Some(key), Some(content)) = (attr("property").or_else(|| attr("name")), attr("content"))
                        else {
                            return TokenSinkResult::Continue;
                        };
                        let mut meta = self.meta.borrow_mut();
                        let slot = match key.to_ascii_lowercase().as_str() {
                            "og:title" => &mut meta.og_title,
                            "og:description" => &mut meta.og_description,
                            "og:site_name" => &mut meta.og_site_name,
                            "og:image" | "og:image:url" => &mut meta.og_image,
                            "description" => &mut meta.description,
                            _ => return TokenSinkResult::Continue,
                        };
                        slot.get_or_insert(content);
                    }
                    _ => {}
                }
            }
            Token::CharacterTokens(text) => {
                if let Some(title) = self.title.borrow_mut().as_mut() {
                    title.push_str(&text);
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_read_for_open_graph_and_its_title() {
        let meta = page_meta(
            r#"<!doctype html><html><head>
            <title>Tag &amp; title</title>
            <script>var x = "<meta property='og:title' content='from a script'>";</script>
            <meta property="og:title" content="OG &quot;title&quot;">
            <meta property="og:title" content="a second one">
            <meta name="Description" content="Plain description">
            <meta property="og:site_name" content="Example">
            <meta property="og:image" content="/img/card.png">
            </head><body><title>not this</title></body></html>"#,
        );
        assert_eq!(meta.og_title.as_deref(), Some(r#"OG "title""#));
        assert_eq!(meta.title.as_deref(), Some("Tag & title"));
        assert_eq!(meta.description.as_deref(), Some("Plain description"));
        assert_eq!(meta.og_site_name.as_deref(), Some("Example"));
        assert_eq!(meta.og_image.as_deref(), Some("/img/card.png"));
    }

    #[test]
    fn a_title_holds_no_markup() {
        let meta = page_meta("<title><b>bold</b> &lt;x&gt;</title>");
        assert_eq!(meta.title.as_deref(), Some("<b>bold</b> <x>"));
    }
}
