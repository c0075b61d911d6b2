//! The Origin check (DNS-rebinding and cross-site defence): an `Origin`
//! header must parse exactly as `scheme://host[:port]` and equal an allowed
//! origin. Loopback origins are allowed on any port; others only as
//! configured. Nothing is matched by prefix.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use toolhost::config::authority::{self, Authority};

/// One origin: scheme, host (lowercase, IPv6 in brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

/// The origins a server accepts.
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    configured: Vec<Origin>,
}

/// Hosts of the loopback origins, allowed on every port.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

impl Origins {
    /// The loopback origins and `configured` (each `scheme://host[:port]`;
    /// an entry that does not parse is an error naming it).
    pub(crate) fn new(configured: &[String]) -> Result<Origins, String> {
        let configured = configured
            .iter()
            .map(|given| {
                parse(given).ok_or_else(|| {
                    format!("`{given}` is not an origin; write it as scheme://host[:port], e.g. https://app.example.com")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Origins { configured })
    }

    /// Whether a request with this `Origin` header may be served.
    pub(crate) fn allows(&self, header: &HeaderValue) -> bool {
        let Some(origin) = header.to_str().ok().and_then(parse) else {
            return false;
        };
        LOOPBACK_HOSTS.contains(&origin.host.as_str()) || self.configured.contains(&origin)
    }
}

/// The Origin policy, a layer in front of `/mcp` (the outermost: nothing
/// else reads a request a page on another site made): an `Origin` header
/// that is not allowed is 403; a request without one (not a browser's)
/// passes.
pub(crate) async fn check(
    State(origins): State<Arc<Origins>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN)
        && !origins.allows(origin)
    {
        let forbidden = (
            StatusCode::FORBIDDEN,
            "Forbidden: Origin header is not allowed",
        );
        return forbidden.into_response();
    }
    next.run(request).await
}

/// `scheme://host[:port]`, nothing more: no path, user or query, a port of
/// digits only (the authority read as grants read it), a host of letters,
/// digits, `-` and `.` (or a bracketed IPv6 address).
fn parse(text: &str) -> Option<Origin> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let Authority { host, port } = authority::parse(rest)?;
    let valid = host.starts_with('[')
        || host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    valid.then(|| Origin {
        scheme,
        host,
        port: port.unwrap_or(default_port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(origins: &Origins, origin: &str) -> bool {
        origins.allows(&HeaderValue::from_str(origin).expect("a header value"))
    }

    #[test]
    fn loopback_origins_pass_on_any_port_and_look_alikes_do_not() {
        let origins = Origins::new(&[]).unwrap();
        for good in [
            "http://localhost:3000",
            "http://127.0.0.1:8080",
            "http://[::1]:9",
            "http://localhost",
        ] {
            assert!(allowed(&origins, good), "{good}");
        }
        for bad in [
            "http://localhost:3000.evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "http://localhost:3000/path",
            "http://user@localhost:3000",
            "https://evil.example",
            "null",
            "file://localhost",
            "http://localhost:",
            "http://[::1]x:80",
        ] {
            assert!(!allowed(&origins, bad), "{bad}");
        }
    }

    #[test]
    fn configured_origins_match_exactly_with_default_ports() {
        let origins = Origins::new(&["https://app.example.com".into()]).unwrap();
        assert!(allowed(&origins, "https://app.example.com"));
        assert!(allowed(&origins, "https://APP.example.com:443"));
        assert!(!allowed(&origins, "https://app.example.com:8443"));
        assert!(!allowed(&origins, "http://app.example.com"));
        assert!(!allowed(&origins, "https://app.example.com.evil.example"));
        assert!(Origins::new(&["app.example.com".into()]).is_err());
    }
}
