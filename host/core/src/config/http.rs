//! Origin grants for outbound HTTP (R36): `[METHOD,… ]scheme://host[:port][/path-glob]`.
//! A host is a name, `*.` and a domain (any subdomain), an IP literal, or
//! `localhost`; only the last two may reach loopback or private addresses.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use wildmatch::WildMatch;

use crate::config::authority;

/// One origin (and optionally methods and paths) a plugin may reach.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpGrant {
    text: String,
    methods: Option<Vec<String>>,
    scheme: String,
    host: Host,
    port: Option<u16>,
    path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// An exact name.
    Name(String),
    /// Any subdomain of the name (`*.example.com`).
    Subdomains(String),
    /// An IP literal.
    Ip(IpAddr),
    /// `localhost`: loopback, by the user's explicit choice.
    Localhost,
}

/// Why a grant pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{pattern}` is not an HTTP grant: {reason}; write e.g. `https://api.example.com/*`, `http://127.0.0.1:8080/*` or `GET,HEAD https://*.example.com/v1/*`"
)]
pub struct HttpGrantError {
    pattern: String,
    reason: &'static str,
}

impl fmt::Debug for HttpGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for HttpGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// In manifests, a grant is its pattern string.
impl<'de> serde::Deserialize<'de> for HttpGrant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(d)?;
        pattern.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for HttpGrant {
    type Err = HttpGrantError;

    fn from_str(pattern: &str) -> Result<HttpGrant, HttpGrantError> {
        let error = |reason| HttpGrantError {
            pattern: pattern.to_owned(),
            reason,
        };
        let (methods, url) = match pattern.trim().split_once(' ') {
            Some((m, url)) => (
                Some(m.split(',').map(str::to_ascii_uppercase).collect()),
                url.trim(),
            ),
            None => (None, pattern.trim()),
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| error("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(error("the scheme must be http or https"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(rest[i..].to_owned())),
            None => (rest, None),
        };
        let authority = authority::parse(authority).ok_or_else(|| error("a bad host or port"))?;
        Ok(HttpGrant {
            text: pattern.trim().to_owned(),
            methods,
            scheme,
            host: parse_host(authority.unbracketed_host()).ok_or_else(|| error("a bad host"))?,
            port: authority.port,
            path: path.filter(|p| p != "/*" && p != "/"),
        })
    }
}

fn parse_host(host: &str) -> Option<Host> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        return None;
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(Host::Ip(ip));
    }
    if host == "localhost" {
        return Some(Host::Localhost);
    }
    match host.strip_prefix("*.") {
        Some(domain) if !domain.contains('*') => Some(Host::Subdomains(domain.to_owned())),
        Some(_) => None,
        None if host.contains('*') => None,
        None => Some(Host::Name(host)),
    }
}

impl HttpGrant {
    /// Whether this grant covers `method` on `scheme://host:port/path`.
    pub fn covers(&self, method: &str, scheme: &str, host: &str, port: u16, path: &str) -> bool {
        let default_port = if scheme == "https" { 443 } else { 80 };
        self.scheme == scheme
            && self.port.unwrap_or(default_port) == port
            && self.host_matches(host)
            && self
                .methods
                .as_ref()
                .is_none_or(|m| m.iter().any(|m| m == method))
            && self
                .path
                .as_ref()
                .is_none_or(|glob| WildMatch::new(glob).matches(path))
    }

    fn host_matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match &self.host {
            Host::Name(name) => *name == host,
            Host::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
            Host::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
            Host::Localhost => host == "localhost",
        }
    }

    /// Whether this grant lets `host` reach `ip` even if it is loopback or
    /// private: only when the grant names that IP literally, or `localhost`
    /// for a loopback address.
    pub fn may_reach(&self, ip: IpAddr) -> bool {
        match &self.host {
            Host::Ip(granted) => *granted == ip,
            Host::Localhost => ip.is_loopback(),
            Host::Name(_) | Host::Subdomains(_) => false,
        }
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::networks::is_internal;

    fn grant(s: &str) -> HttpGrant {
        s.parse().unwrap()
    }

    #[test]
    fn r36_grants_match_scheme_host_port_path_and_methods() {
        let api = grant("https://api.github.com/repos/*");
        assert!(api.covers("GET", "https", "api.github.com", 443, "/repos/a/b"));
        assert!(!api.covers("GET", "https", "api.github.com", 443, "/user"));
        assert!(!api.covers("GET", "http", "api.github.com", 80, "/repos/a"));
        assert!(!api.covers("GET", "https", "evil-api.github.com", 443, "/repos/a"));
        assert!(!api.covers("GET", "https", "api.github.com.evil", 443, "/repos/a"));
        let sub = grant("GET,HEAD https://*.example.com");
        assert!(sub.covers("GET", "https", "a.b.example.com", 443, "/x"));
        assert!(!sub.covers("GET", "https", "example.com", 443, "/x"));
        assert!(!sub.covers("GET", "https", "badexample.com", 443, "/x"));
        assert!(!sub.covers("POST", "https", "a.example.com", 443, "/x"));
        let local = grant("http://127.0.0.1:8080/*");
        assert!(local.covers("POST", "http", "127.0.0.1", 8080, "/"));
        assert!(!local.covers("POST", "http", "127.0.0.1", 8081, "/"));
        for bad in [
            "api.github.com",
            "ftp://x",
            "https://*evil.com",
            "https://a:b",
        ] {
            assert!(bad.parse::<HttpGrant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn r36_only_ip_literals_and_localhost_reach_internal_addresses() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(is_internal(loopback) && is_internal(metadata));
        assert!(is_internal("10.1.2.3".parse().unwrap()));
        assert!(is_internal("::ffff:127.0.0.1".parse().unwrap()));
        assert!(is_internal("fd00::1".parse().unwrap()));
        assert!(!is_internal("93.184.216.34".parse().unwrap()));
        assert!(grant("http://127.0.0.1:9/*").may_reach(loopback));
        assert!(grant("http://localhost:9/*").may_reach(loopback));
        assert!(!grant("http://localhost:9/*").may_reach(metadata));
        assert!(!grant("http://vm:9/*").may_reach(loopback));
        assert!(!grant("https://*.example.com").may_reach(metadata));
    }
}
