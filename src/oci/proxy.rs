//! HTTP(S) proxies for the pulls `olm run` makes itself, read from `HTTPS_PROXY`,
//! `HTTP_PROXY` and `NO_PROXY` (upper case first, then lower case) with the rules of Go's
//! `golang.org/x/net/http/httpproxy`, which the kubelet and upstream OLM follow: so one
//! Deployment environment means the same thing to both.
//! - a proxy without a scheme is `http://…`; `https` URLs use `HTTPS_PROXY`, `http` URLs
//!   `HTTP_PROXY`;
//! - `localhost` and loopback addresses are never proxied;
//! - `NO_PROXY` is a comma list of `*` (nothing is proxied), IP addresses, CIDR ranges and
//!   domain names, each optionally with `:port`; `example.com` matches it and its
//!   subdomains, `.example.com` and `*.example.com` only its subdomains.

use std::net::IpAddr;
use std::sync::LazyLock;

use reqwest::Url;

/// The proxies of this process's environment, read once (as Go's `http.ProxyFromEnvironment`).
pub fn from_environment() -> &'static Proxies {
    static PROXIES: LazyLock<Proxies> =
        LazyLock::new(|| Proxies::from_vars(|name| std::env::var(name).ok()));
    &PROXIES
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proxies {
    http: Option<Url>,
    https: Option<Url>,
    no_proxy: Vec<Exempt>,
    /// `NO_PROXY` as given, for a client whose matching we do not control.
    no_proxy_text: String,
}

/// One `NO_PROXY` entry.
#[derive(Clone, Debug, PartialEq)]
enum Exempt {
    All,
    Ip(IpAddr, Option<u16>),
    Cidr(IpAddr, u8),
    /// `suffix` starts with a dot; `with_apex` also matches the name without the dot.
    Domain {
        suffix: String,
        with_apex: bool,
        port: Option<u16>,
    },
}

impl Proxies {
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Proxies {
        let get = |upper: &str| {
            var(upper)
                .filter(|v| !v.is_empty())
                .or_else(|| var(&upper.to_ascii_lowercase()))
                .unwrap_or_default()
        };
        let no_proxy_text = get("NO_PROXY");
        Proxies {
            http: parse_proxy(&get("HTTP_PROXY")),
            https: parse_proxy(&get("HTTPS_PROXY")),
            no_proxy: no_proxy_text.split(',').filter_map(parse_exempt).collect(),
            no_proxy_text,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy a request to `url` goes through, if any.
    pub fn for_url(&self, url: &Url) -> Option<&Url> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        self.applies_to(host, port).then_some(proxy)
    }

    /// Whether a request to `host:port` is proxied (Go's `useProxy`).
    fn applies_to(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        if host == "localhost" || ip.is_some_and(|ip| ip.is_loopback()) {
            return false;
        }
        !self.no_proxy.iter().any(|e| e.matches(&host, ip, port))
    }

    /// The proxy settings for a client that picks per request with reqwest's own rules:
    /// `(http, https, no_proxy)`. `exact_host` is the registry the client is for; it gets
    /// Go's answer exactly (its token realm and blob redirects get reqwest's reading of
    /// `NO_PROXY`, which differs only for `.domain` entries and ports).
    pub fn for_client(&self, scheme: &str, exact_host: &str) -> ClientProxies {
        let url = Url::parse(&format!("{scheme}://{exact_host}/")).ok();
        let proxied = url.as_ref().is_some_and(|u| self.for_url(u).is_some());
        let mut no_proxy = vec!["localhost", "127.0.0.0/8", "::1"]
            .into_iter()
            .map(String::from)
            .chain(self.no_proxy_text.split(',').filter_map(reqwest_entry))
            .collect::<Vec<_>>();
        if !proxied {
            no_proxy.push(host_only(exact_host).to_string());
        }
        ClientProxies {
            http: self.http.as_ref().map(Url::to_string),
            https: self.https.as_ref().map(Url::to_string),
            no_proxy: no_proxy.join(","),
        }
    }
}

#[derive(Debug, PartialEq)]
pub struct ClientProxies {
    pub http: Option<String>,
    pub https: Option<String>,
    pub no_proxy: String,
}

impl Exempt {
    fn matches(&self, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
        let port_ok = |p: &Option<u16>| p.is_none_or(|p| p == port);
        match self {
            Exempt::All => true,
            Exempt::Ip(want, p) => ip == Some(*want) && port_ok(p),
            Exempt::Cidr(net, bits) => ip.is_some_and(|ip| in_cidr(ip, *net, *bits)),
            Exempt::Domain {
                suffix,
                with_apex,
                port: p,
            } => {
                (host.ends_with(suffix.as_str()) || (*with_apex && host == &suffix[1..]))
                    && port_ok(p)
            }
        }
    }
}

/// Go's `parseProxy`: a value that is not a URL with a known scheme is tried as `http://…`.
fn parse_proxy(value: &str) -> Option<Url> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let known = |u: &Url| matches!(u.scheme(), "http" | "https" | "socks5" | "socks5h");
    match Url::parse(value) {
        Ok(url) if known(&url) && url.has_host() => Some(url),
        _ => Url::parse(&format!("http://{value}")).ok(),
    }
}

fn parse_exempt(entry: &str) -> Option<Exempt> {
    let entry = entry.trim().to_ascii_lowercase();
    if entry.is_empty() {
        return None;
    }
    if entry == "*" {
        return Some(Exempt::All);
    }
    if let Some((net, bits)) = entry.split_once('/') {
        let net = net.parse::<IpAddr>().ok()?;
        return Some(Exempt::Cidr(net, bits.parse().ok()?));
    }
    if let Ok(ip) = entry.trim_start_matches('[').trim_end_matches(']').parse() {
        return Some(Exempt::Ip(ip, None));
    }
    let (host, port) = split_port(&entry);
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
        return Some(Exempt::Ip(ip, port));
    }
    let host = host.strip_prefix('*').unwrap_or(host);
    let with_apex = !host.starts_with('.');
    Some(Exempt::Domain {
        suffix: if with_apex {
            format!(".{host}")
        } else {
            host.into()
        },
        with_apex,
        port,
    })
}

/// `host:port` → (host, port); a name without a numeric port is all host.
fn split_port(entry: &str) -> (&str, Option<u16>) {
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

fn host_only(registry: &str) -> &str {
    let (host, _) = split_port(registry);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A Go `NO_PROXY` entry as reqwest reads its list: no ports, `*.d` as `.d`.
fn reqwest_entry(entry: &str) -> Option<String> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    if entry.contains('/') || entry == "*" {
        return Some(entry.into());
    }
    let host = host_only(entry);
    Some(host.strip_prefix('*').unwrap_or(host).to_string())
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (ip, net, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            (u128::from(u32::from(a)), u128::from(u32::from(b)), 32u32)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128u32),
        _ => return false,
    };
    let bits = u32::from(bits).min(width);
    let shift = width - bits;
    shift >= width || (ip >> shift) == (net >> shift)
}

#[cfg(test)]
mod tests;
