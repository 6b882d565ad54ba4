//! HTTP requests to URLs that users hand us — push endpoints today; webhooks and link previews
//! are meant to use the same client — without letting a user aim the server at itself, its
//! network or the cloud's metadata services (server-side request forgery).
//!
//! A check of the URL as written is not enough: a DNS name can resolve to `10.0.0.1`, resolve
//! differently at send time than when it was checked (DNS rebinding), or redirect elsewhere.
//! So the rule is applied where the connection is made:
//! - every name is resolved through [`Guarded`], which wraps the real resolver and answers only
//!   the addresses [`non_public_range`] lets through — what it refuses is never connected to;
//! - an address literal in the URL (which reqwest connects to without asking a resolver) is
//!   judged by the same rule in [`check_url`] before the request is made;
//! - redirects are never followed (a redirect is the push service's answer, not a new target),
//!   no proxy from the environment is used (through one, the resolver would only see the
//!   proxy's name), and only `https` is spoken.
//!
//! [`Reach::Anywhere`] turns all of it off, for development against a push service on
//! loopback (`TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS=true`); `http` is then allowed too.
//! Link previews fetch pages with [`Reach::PublicWeb`] (plain `http` too, to public addresses
//! only); [`Reach::PublicAndLoopback`] opens IPv4 loopback alone besides (in development).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use tabletalk_domain::error::{Error, Result};

/// Which hosts outbound requests may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Only `https` to addresses on the public internet: production.
    Public,
    /// Any address, `http` or `https`: development only.
    Anywhere,
    /// `http` or `https` to addresses on the public internet: the pages members link to (link
    /// previews), many of which are still plain `http`.
    PublicWeb,
    /// What `PublicWeb` reaches, and IPv4 loopback (127.0.0.0/8), and nothing else private:
    /// development and tests of link previews, so a page served on loopback is fetched while a
    /// redirect to 10.0.0.1 or the metadata service is still refused
    /// (`TABLETALK_LINK_PREVIEWS_ALLOW_LOOPBACK=true`).
    PublicAndLoopback,
}

impl Reach {
    /// `Anywhere` when `allow_private` (the development setting), else `Public`.
    pub fn allowing_private(allow_private: bool) -> Reach {
        if allow_private { Reach::Anywhere } else { Reach::Public }
    }

    /// For link previews: `PublicAndLoopback` when `allow_loopback` (the development
    /// setting), else `PublicWeb`.
    pub fn allowing_loopback(allow_loopback: bool) -> Reach {
        if allow_loopback {
            Reach::PublicAndLoopback
        } else {
            Reach::PublicWeb
        }
    }

    /// The range `ip` lies in when this reach refuses it; `None` when it may be connected to.
    fn refuses(self, ip: IpAddr) -> Option<&'static str> {
        match (self, ip) {
            (Reach::Anywhere, _) => None,
            (Reach::PublicAndLoopback, IpAddr::V4(v4)) if v4.is_loopback() => None,
            _ => non_public_range(ip),
        }
    }
}

/// Why an outbound request was not made. It carries only the host and the address, which are
/// the caller's own input, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The range `ip` lies in when it is not a public unicast address, named; `None` for an
/// address on the public internet.
///
/// Refused whole, whatever they embed: the IPv6 forms that carry an IPv4 address (mapped,
/// compatible, translated, NAT64, 6to4, Teredo). A push service has a native address of its
/// own, and judging the embedded IPv4 address would make the rule depend on how each gateway
/// on the way translates it.
pub fn non_public_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let range = match (a, b, c) {
        (0, _, _) => "0.0.0.0/8 (this network)",
        (10, _, _) => "10.0.0.0/8 (private)",
        (100, 64..=127, _) => "100.64.0.0/10 (shared address space)",
        (127, _, _) => "127.0.0.0/8 (loopback)",
        (169, 254, _) => "169.254.0.0/16 (link-local, cloud metadata)",
        (172, 16..=31, _) => "172.16.0.0/12 (private)",
        (192, 0, 0) => "192.0.0.0/24 (IETF protocol assignments)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "192.88.99.0/24 (6to4 relay)",
        (192, 168, _) => "192.168.0.0/16 (private)",
        (198, 18..=19, _) => "198.18.0.0/15 (benchmarking)",
        (224..=239, _, _) => "224.0.0.0/4 (multicast)",
        (240..=255, _, _) => "240.0.0.0/4 (reserved, broadcast)",
        _ if ip == Ipv4Addr::new(168, 63, 129, 16) => "168.63.129.16 (Azure platform)",
        _ => return None,
    };
    Some(range)
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let range = if ip.is_unspecified() {
        "::/128 (unspecified)"
    } else if ip.is_loopback() {
        "::1/128 (loopback)"
    } else if s[..5] == [0; 5] && s[5] == 0xffff {
        "::ffff:0:0/96 (IPv4-mapped)"
    } else if s[..6] == [0; 6] {
        "::/96 (IPv4-compatible)"
    } else if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
        "::ffff:0:0:0/96 (IPv4-translated)"
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        "64:ff9b::/96 (NAT64)"
    } else if s[..4] == [0x100, 0, 0, 0] {
        "100::/64 (discard)"
    } else if s[0] == 0x2001 && s[1] == 0 {
        "2001::/32 (Teredo)"
    } else if s[0] == 0x2001 && s[1] == 0xdb8 {
        "2001:db8::/32 (documentation)"
    } else if s[0] == 0x2002 {
        "2002::/16 (6to4)"
    } else if s[0] & 0xfe00 == 0xfc00 {
        "fc00::/7 (unique local)"
    } else if s[0] & 0xffc0 == 0xfe80 {
        "fe80::/10 (link-local)"
    } else if s[0] & 0xffc0 == 0xfec0 {
        "fec0::/10 (site-local)"
    } else if s[0] & 0xff00 == 0xff00 {
        "ff00::/8 (multicast)"
    } else if s[0] & 0xe000 != 0x2000 {
        // Everything else outside 2000::/3 is unassigned or reserved: not yet the internet.
        "outside 2000::/3 (not global unicast)"
    } else {
        return None;
    };
    Some(range)
}

/// Whether `url` may be requested with `reach`, as far as can be told without resolving it:
/// the scheme, no credentials, and a host that is a public name or address. A name is judged
/// again, by what it resolves to, when the connection is made.
pub fn check_url(url: &Url, reach: Reach) -> std::result::Result<(), Refused> {
    let refused = |why: String| Err(Refused(why));
    match (url.scheme(), reach) {
        ("https", _) | ("http", Reach::Anywhere | Reach::PublicWeb | Reach::PublicAndLoopback) => {}
        ("http", Reach::Public) => return refused("must use https".into()),
        (other, _) => return refused(format!("must use https, not {other}")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refused("must not carry credentials".into());
    }
    if reach == Reach::Anywhere {
        return url.host().map(|_| ()).ok_or_else(|| Refused("has no host".into()));
    }
    match url.host() {
        None => refused("has no host".into()),
        Some(Host::Domain(domain)) => {
            let domain = domain.trim_end_matches('.').to_ascii_lowercase();
            if domain == "localhost" || domain.ends_with(".localhost") || !domain.contains('.') {
                return refused(format!("{domain} is not a public host name"));
            }
            Ok(())
        }
        Some(Host::Ipv4(ip)) => literal(IpAddr::V4(ip), reach),
        Some(Host::Ipv6(ip)) => literal(IpAddr::V6(ip), reach),
    }
}

fn literal(ip: IpAddr, reach: Reach) -> std::result::Result<(), Refused> {
    match reach.refuses(ip) {
        Some(range) => Err(Refused(format!("{ip} is not a public address ({range})"))),
        None => Ok(()),
    }
}

/// The addresses of `host` that `reach` lets a connection go to; none is a refusal. A name
/// with public and non-public addresses keeps only the public ones, so nothing else is ever
/// tried.
pub fn admit(host: &str, addrs: Vec<SocketAddr>, reach: Reach) -> std::result::Result<Vec<SocketAddr>, Refused> {
    if reach == Reach::Anywhere {
        return Ok(addrs);
    }
    let mut refused = Vec::new();
    let admitted: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|addr| match reach.refuses(addr.ip()) {
            Some(range) => {
                refused.push(format!("{} ({range})", addr.ip()));
                false
            }
            None => true,
        })
        .collect();
    if admitted.is_empty() {
        // The addresses go to the log, not into the refusal: a refusal is shown to the user who
        // named the host (a webhook's deliveries), and what a name resolves to inside the
        // server's network is not theirs to learn.
        tracing::warn!(host, refused = %refused.join(", "), "outbound request refused");
        return Err(Refused(format!("{host} resolves to no public address")));
    }
    Ok(admitted)
}

/// The system resolver (`getaddrinfo`, on tokio's blocking pool), as reqwest's default is.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The resolver every connection of an [`OutboundClient`] asks: the answers of `inner`, less
/// what [`admit`] refuses.
struct Guarded {
    inner: Arc<dyn Resolve>,
    reach: Reach,
}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let (inner, reach) = (Arc::clone(&self.inner), self.reach);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            // A name that does not resolve is refused as one that resolves only to private
            // addresses is, in the same words: which names exist inside the server's network
            // is not the caller's to learn.
            let addrs: Vec<SocketAddr> = match inner.resolve(name).await {
                Ok(addrs) => addrs.collect(),
                Err(e) => {
                    tracing::debug!(host, error = %e, "an outbound name did not resolve");
                    Vec::new()
                }
            };
            let admitted = admit(&host, addrs, reach)?;
            Ok(Box::new(admitted.into_iter()) as Addrs)
        })
    }
}

/// An HTTP client for user-supplied URLs: checked, resolved through [`Guarded`], never
/// redirected, never proxied. Cloning is cheap (reqwest's client is an `Arc`).
#[derive(Clone)]
pub struct OutboundClient {
    http: reqwest::Client,
    reach: Reach,
}

impl std::fmt::Debug for OutboundClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboundClient").field("reach", &self.reach).finish()
    }
}

impl OutboundClient {
    /// A client resolving through the system resolver; each request gives up after `timeout`.
    pub fn new(reach: Reach, timeout: Duration) -> Result<OutboundClient> {
        OutboundClient::with_resolver(reach, timeout, Arc::new(SystemResolver))
    }

    /// A client resolving through `resolver` (tests: a resolver answering what they need).
    pub fn with_resolver(reach: Reach, timeout: Duration, resolver: Arc<dyn Resolve>) -> Result<OutboundClient> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .https_only(reach == Reach::Public)
            .dns_resolver(Arc::new(Guarded { inner: resolver, reach }))
            .build()
            .map_err(|e| Error::Internal(format!("outbound HTTP client: {e}")))?;
        Ok(OutboundClient { http, reach })
    }

    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// A GET of `url`, once [`check_url`] allows it (link previews). Redirects are not
    /// followed here either: a caller that follows one asks for its target again, so every
    /// hop is checked.
    pub fn get(&self, url: &str) -> std::result::Result<reqwest::RequestBuilder, Refused> {
        let parsed = Url::parse(url).map_err(|_| Refused("is not a URL".into()))?;
        check_url(&parsed, self.reach)?;
        Ok(self.http.get(parsed))
    }

    /// A POST to `url`, once [`check_url`] allows it.
    pub fn post(&self, url: &str) -> std::result::Result<reqwest::RequestBuilder, Refused> {
        let parsed = Url::parse(url).map_err(|_| Refused("is not a URL".into()))?;
        check_url(&parsed, self.reach)?;
        Ok(self.http.post(parsed))
    }
}

/// The refusal behind a failed request, when the resolver refused every address of its host.
pub fn refusal(error: &reqwest::Error) -> Option<&Refused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    /// Every range the rule names, by its first and last address.
    #[test]
    fn every_non_public_range_is_refused() {
        let refused = [
            ("0.0.0.0", "this network"),
            ("0.255.255.255", "this network"),
            ("10.0.0.0", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.0", "shared address space"),
            ("100.127.255.255", "shared address space"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.255", "loopback"),
            ("169.254.0.0", "link-local"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.0", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "IETF"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.1", "documentation"),
            ("203.0.113.255", "documentation"),
            ("192.88.99.1", "6to4 relay"),
            ("192.168.0.0", "private"),
            ("192.168.255.255", "private"),
            ("198.18.0.0", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.255", "multicast"),
            ("240.0.0.0", "reserved"),
            ("255.255.255.255", "reserved"),
            ("168.63.129.16", "Azure"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "IPv4-mapped"),
            ("::ffff:8.8.8.8", "IPv4-mapped"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("::8.8.8.8", "IPv4-compatible"),
            ("::ffff:0:10.0.0.1", "IPv4-translated"),
            ("64:ff9b::a00:1", "NAT64"),
            ("64:ff9b::808:808", "NAT64"),
            ("64:ff9b:1::1", "NAT64"),
            ("100::1", "discard"),
            ("2001::1", "Teredo"),
            ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "Teredo"),
            ("2001:db8::1", "documentation"),
            ("2002::", "6to4"),
            ("2002:a00:1::1", "6to4"),
            ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "6to4"),
            ("fc00::", "unique local"),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local"),
            ("fe80::1", "link-local"),
            ("febf:ffff::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("4000::1", "not global unicast"),
            ("1::1", "not global unicast"),
        ];
        for (address, range) in refused {
            let ip = IpAddr::from_str(address).unwrap();
            let named = non_public_range(ip).unwrap_or_else(|| panic!("{address} was let through"));
            assert!(named.contains(range), "{address}: {named}, expected {range}");
        }
    }

    /// Public addresses, including the neighbours of every refused range.
    #[test]
    fn public_addresses_are_let_through() {
        for address in [
            "1.0.0.0",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "168.63.129.15",
            "168.63.129.17",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2001:1::1",
            "2001:db9::1",
            "2003::1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200a",
            "3fff:ffff::1",
        ] {
            let ip = IpAddr::from_str(address).unwrap();
            assert_eq!(non_public_range(ip), None, "{address}");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_credentials_and_literal_hosts() {
        let check = |url: &str, reach| check_url(&Url::parse(url).unwrap(), reach);
        assert!(check("https://fcm.googleapis.com/fcm/send/abc", Reach::Public).is_ok());
        assert!(check("https://[2a00:1450::1]:8443/x", Reach::Public).is_ok());
        for bad in [
            "http://push.example.com/x",
            "ftp://push.example.com/x",
            "https://user:pw@push.example.com/x",
            "https://127.0.0.1/x",
            "https://0x7f.1/x",
            "https://10.1.2.3/x",
            "https://169.254.169.254/latest",
            "https://168.63.129.16/machine",
            "https://[::1]/x",
            "https://[::ffff:127.0.0.1]/x",
            "https://[64:ff9b::a00:1]/x",
            "https://[fe80::1]/x",
            "https://localhost/x",
            "https://localhost./x",
            "https://push.localhost/x",
            "https://intranet/x",
        ] {
            assert!(check(bad, Reach::Public).is_err(), "{bad}");
        }
        assert!(check("http://127.0.0.1:9000/push", Reach::Anywhere).is_ok());
        assert!(check("http://localhost:9000/push", Reach::Anywhere).is_ok());
        assert!(check("ftp://127.0.0.1/x", Reach::Anywhere).is_err());
    }

    /// The link previews' development reach lets IPv4 loopback through and nothing else that
    /// is not public: a redirect to another private address is still refused.
    #[test]
    fn the_loopback_reach_admits_loopback_and_no_other_private_address() {
        let check = |url: &str| check_url(&Url::parse(url).unwrap(), Reach::PublicAndLoopback);
        assert!(check("http://127.0.0.1:9000/page").is_ok());
        assert!(check("https://127.3.4.5/page").is_ok());
        assert!(check("https://news.example.com/page").is_ok());
        for bad in [
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:10.0.0.1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::1]/",
            "http://192.168.1.1/",
            "http://localhost:9000/",
            "ftp://127.0.0.1/",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        let loopback = [SocketAddr::from(([127, 0, 0, 1], 80))];
        assert!(admit("a.example", loopback.to_vec(), Reach::PublicAndLoopback).is_ok());
        assert!(admit("a.example", loopback.to_vec(), Reach::Public).is_err());
        let private = [SocketAddr::from(([10, 0, 0, 1], 80))];
        assert!(admit("a.example", private.to_vec(), Reach::PublicAndLoopback).is_err());

        // Production's reach for pages: plain http to the public internet, nothing private.
        let web = |url: &str| check_url(&Url::parse(url).unwrap(), Reach::PublicWeb);
        assert!(web("http://news.example.com/page").is_ok());
        assert!(web("https://[2a00:1450::1]/page").is_ok());
        for bad in [
            "http://127.0.0.1/",
            "http://10.0.0.1/",
            "http://[::1]/",
            "http://localhost/",
            "ftp://a.example/",
        ] {
            assert!(web(bad).is_err(), "{bad}");
        }
        assert!(admit("a.example", loopback.to_vec(), Reach::PublicWeb).is_err());
    }

    /// A resolver that answers every name with the same addresses, as a DNS server of the
    /// attacker's would.
    struct Answers(Vec<IpAddr>);

    impl Resolve for Answers {
        fn resolve(&self, _: Name) -> Resolving {
            let addrs: Vec<SocketAddr> = self.0.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
            Box::pin(async move { Ok(Box::new(addrs.into_iter()) as Addrs) })
        }
    }

    async fn resolve(answers: &[&str], reach: Reach) -> std::result::Result<Vec<IpAddr>, String> {
        let answers = answers.iter().map(|a| IpAddr::from_str(a).unwrap()).collect();
        let guarded = Guarded {
            inner: Arc::new(Answers(answers)),
            reach,
        };
        match guarded.resolve(Name::from_str("push.example.com").unwrap()).await {
            Ok(addrs) => Ok(addrs.map(|a| a.ip()).collect()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A name that does not resolve is refused in the same words as one resolving to private
    /// addresses only: a refusal tells nothing of which names exist inside the network.
    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_refused_as_a_private_one_is() {
        struct Nothing;
        impl Resolve for Nothing {
            fn resolve(&self, _: Name) -> Resolving {
                Box::pin(async { Err("no such host".into()) })
            }
        }
        let guarded = Guarded {
            inner: Arc::new(Nothing),
            reach: Reach::Public,
        };
        let missing = match guarded.resolve(Name::from_str("push.example.com").unwrap()).await {
            Ok(_) => panic!("resolved"),
            Err(e) => e.to_string(),
        };
        let private = resolve(&["10.0.0.1"], Reach::Public).await.unwrap_err();
        assert_eq!(missing, private);
    }

    /// The resolver refuses a name whose only addresses are private, and never hands on the
    /// private ones of a name that has public ones too.
    #[tokio::test]
    async fn a_dns_name_resolving_to_a_private_address_is_refused() {
        let refused = resolve(&["10.0.0.1"], Reach::Public).await.unwrap_err();
        assert!(
            refused.contains("push.example.com resolves to no public address"),
            "{refused}"
        );
        assert!(
            !refused.contains("10.0.0.1"),
            "the private address is not told: {refused}"
        );
        assert!(resolve(&["127.0.0.1", "::1"], Reach::Public).await.is_err());
        assert!(resolve(&[], Reach::Public).await.is_err());
        let mixed = resolve(&["10.0.0.1", "93.184.215.14", "fd00::1"], Reach::Public).await;
        assert_eq!(mixed.unwrap(), [IpAddr::from_str("93.184.215.14").unwrap()]);
        let development = resolve(&["127.0.0.1"], Reach::Anywhere).await;
        assert_eq!(development.unwrap(), [IpAddr::from_str("127.0.0.1").unwrap()]);
    }
}
