//! `host[:port]`, the authority of an origin, read one way wherever one is
//! parsed (HTTP grants, the server's Origin check): by the `http` crate's
//! URI parser, then held to what an origin's authority may be.

use std::net::Ipv6Addr;

/// A parsed authority: the host in lowercase (an IPv6 address keeps its
/// brackets) and the port, if one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// The host, lowercase; an IPv6 address in brackets.
    pub host: String,
    /// The port, if the text gave one.
    pub port: Option<u16>,
}

impl Authority {
    /// The host without an IPv6 address's brackets.
    pub fn unbracketed_host(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }
}

/// Parses `host`, `host:port` or `[v6]:port`: no user info, a port of
/// digits only, an address in brackets only if it is IPv6. The host's
/// characters are left to the caller (a grant allows `*.`).
pub fn parse(text: &str) -> Option<Authority> {
    let parsed: http::uri::Authority = text.parse().ok()?;
    let host = parsed.host();
    if host.is_empty() || parsed.as_str().contains('@') {
        return None;
    }
    // `http` skips what follows a bracketed address (`[::1]x:80`) and takes
    // `host:` as no port; only `:` and digits may follow the host.
    let port = match &text[host.len()..] {
        "" => None,
        rest => {
            let digits = rest.strip_prefix(':')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(digits.parse().ok()?)
        }
    };
    if let Some(inner) = host.strip_prefix('[') {
        inner.strip_suffix(']')?.parse::<Ipv6Addr>().ok()?;
    }
    Some(Authority {
        host: host.to_ascii_lowercase(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(host: &str, port: Option<u16>) -> Option<Authority> {
        Some(Authority {
            host: host.to_owned(),
            port,
        })
    }

    #[test]
    fn hosts_ports_and_bracketed_ipv6() {
        assert_eq!(parse("[::1]:8080"), authority("[::1]", Some(8080)));
        assert_eq!(parse("[::1]:8080").unwrap().unbracketed_host(), "::1");
        assert_eq!(parse("[::1]"), authority("[::1]", None));
        assert_eq!(parse("localhost"), authority("localhost", None));
        assert_eq!(
            parse("Example.COM:443"),
            authority("example.com", Some(443))
        );
        assert_eq!(parse("*.example.com"), authority("*.example.com", None));
    }

    #[test]
    fn malformed_authorities_are_refused() {
        for bad in [
            "",
            "localhost:",
            "localhost:http",
            "localhost:99999",
            "localhost:+80",
            "localhost:3000.evil.example",
            "localhost:3000/path",
            "user@localhost:3000",
            "[::1]x:80",
            "[::1",
            "[example.com]:80",
            "::1",
            "a:b",
            "host:80:90",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
