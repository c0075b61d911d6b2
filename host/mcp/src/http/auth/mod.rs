//! `/mcp` as an OAuth 2.1 resource server (R40, the MCP authorization
//! spec): protected resource metadata (RFC 9728), JWT access tokens
//! checked against their issuer's keys, for this resource (RFC 8707
//! audience), within their lifetime, signed with an allowed algorithm;
//! scopes checked per tool; the caller (issuer and subject) handed on to
//! every call. Tokens are never passed on to anything.

mod keys;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use wildmatch::WildMatch;

pub use keys::{
    AUTH_FETCH_TIMEOUT, KEY_REFETCH_INTERVAL, MAX_AUTH_DOCUMENT_BYTES, MAX_ISSUER_KEYS,
};

use keys::{Issuer, checked_url};
use toolhost::Caller;

/// The scope a token needs to list and call tools at all.
pub const TOOLS_SCOPE: &str = "mcp:tools";

/// How far a token's `exp`, `nbf` and `iat` may be off: the issuer's clock
/// and ours differ a little.
pub const TOKEN_LEEWAY: Duration = Duration::from_secs(30);

/// The longest access token read: real ones are a few KiB; its claims are
/// kept with the caller for the request's life.
pub const MAX_TOKEN_BYTES: usize = 16 << 10;

/// Signature algorithms accepted: asymmetric only, so a public key can
/// never serve as an HMAC secret, and never `none`.
const ALLOWED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// How `/mcp` checks OAuth access tokens. Default: no issuer (OAuth off).
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// Issuer identifiers trusted to issue tokens for this server, exactly
    /// as their tokens' `iss` and their metadata's `issuer` carry them.
    pub issuers: Vec<String>,
    /// This server's canonical URL (e.g. `https://tools.example.com/mcp`):
    /// tokens must name it in `aud`.
    pub resource: String,
    /// `(TOOL PATTERN, SCOPE)`: a tool matching the pattern is listed and
    /// callable only with the scope (besides [`TOOLS_SCOPE`]).
    pub tool_scopes: Vec<(String, String)>,
    /// Also accept tokens whose header has no `typ`, or the generic
    /// `JWT`: a compatibility choice for issuers that do not type their
    /// access tokens as RFC 9068 says (`at+jwt`). Such a token cannot be
    /// told from an ID token by its type; its audience still must be this
    /// server. Default: false, only `at+jwt` (or `application/at+jwt`).
    pub untyped_tokens: bool,
}

/// Why a token was refused; said to the client in `error_description`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token is not a JWS we can read.
    #[error("the access token is malformed: {0}")]
    Malformed(String),
    /// Its `typ` says it is not an access token (an ID token, a logout or
    /// security event token, a DPoP proof, ...).
    #[error(
        "the token's type {0:?} is not an access token's; send an OAuth access token (typ `at+jwt`, RFC 9068)"
    )]
    NotAnAccessToken(String),
    /// Its algorithm is not one we accept.
    #[error(
        "the access token is signed with {0}, which is not accepted (asymmetric algorithms only)"
    )]
    Algorithm(String),
    /// It was issued by an issuer this server does not trust.
    #[error("the access token's issuer {0:?} is not trusted by this server")]
    UntrustedIssuer(String),
    /// Its issuer has no key by that id.
    #[error("the access token's key id {0:?} is not among its issuer's keys")]
    UnknownKey(String),
    /// Signature, audience, lifetime: it does not verify.
    #[error("the access token is not valid here: {0}")]
    Invalid(String),
    /// The issuer cannot be asked for its keys.
    #[error("the token's issuer cannot be checked: {0}")]
    Issuer(String),
}

/// The front door's OAuth checks.
pub(crate) struct Authenticator {
    resource: String,
    /// Where the protected resource metadata is, for `WWW-Authenticate`.
    metadata_url: String,
    issuers: Vec<Issuer>,
    access: Arc<Access>,
    untyped_tokens: bool,
}

/// Which scopes each tool needs; handed to the handler with each request,
/// so `tools/list` shows a caller only what it may call.
#[derive(Debug, Default)]
pub(crate) struct Access {
    tool_scopes: Vec<(WildMatch, String)>,
}

/// An authenticated request: who, and what its token lets it do.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    pub(crate) caller: Caller,
    pub(crate) scopes: Arc<BTreeSet<String>>,
}

impl Access {
    /// The scopes `tool` needs that `scopes` lacks.
    pub(crate) fn missing(&self, scopes: &BTreeSet<String>, tool: &str) -> Vec<String> {
        let mut missing: Vec<String> = self
            .tool_scopes
            .iter()
            .filter(|(pattern, scope)| pattern.matches(tool) && !scopes.contains(scope))
            .map(|(_, scope)| scope.clone())
            .collect();
        missing.dedup();
        missing
    }
}

impl Authenticator {
    pub(crate) fn new(
        options: &AuthOptions,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Authenticator, String> {
        let resource = reqwest::Url::parse(&options.resource).map_err(|e| {
            format!(
                "--resource {:?} is not a URL ({e}); give this server's canonical URL, e.g. https://tools.example.com/mcp",
                options.resource
            )
        })?;
        if options.issuers.is_empty() {
            return Err("OAuth needs at least one --auth-issuer".into());
        }
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured((*tls).clone())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up HTTPS to the issuers: {e}"))?;
        let mut issuers = Vec::new();
        for id in &options.issuers {
            checked_url(id).map_err(|e| e.to_string())?;
            issuers.push(Issuer::new(id.clone(), http.clone()));
        }
        let mut metadata = resource.clone();
        let path = resource.path().trim_end_matches('/');
        metadata.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        metadata.set_query(None);
        let tool_scopes = options
            .tool_scopes
            .iter()
            .map(|(tool, scope)| (WildMatch::new(tool), scope.clone()))
            .collect();
        Ok(Authenticator {
            resource: options.resource.clone(),
            metadata_url: metadata.to_string(),
            issuers,
            access: Arc::new(Access { tool_scopes }),
            untyped_tokens: options.untyped_tokens,
        })
    }

    pub(crate) fn access(&self) -> &Arc<Access> {
        &self.access
    }

    /// The protected resource metadata document (RFC 9728).
    pub(crate) fn metadata(&self, scopes: Vec<String>) -> Value {
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": self.issuers.iter().map(|i| &i.id).collect::<Vec<_>>(),
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "Toolhost",
        })
    }

    /// Every scope this server checks, for the metadata.
    pub(crate) fn scopes(&self) -> Vec<String> {
        let mut scopes = vec![TOOLS_SCOPE.to_owned()];
        for (_, scope) in &self.access.tool_scopes {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        scopes
    }

    /// Checks the request's bearer token; the refusal is the whole reply.
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<Authenticated, Response> {
        let Some(token) = bearer(headers) else {
            return Err(self.challenge(None));
        };
        let verified = self.verify(token).await.map_err(|e| {
            tracing::debug!("refused an access token: {e}");
            self.challenge(Some(("invalid_token", &e.to_string())))
        })?;
        if !verified.scopes.contains(TOOLS_SCOPE) {
            return Err(self.insufficient_scope(&[TOOLS_SCOPE.to_owned()]));
        }
        Ok(verified)
    }

    async fn verify(&self, token: &str) -> Result<Authenticated, AuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Malformed(format!(
                "longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| AuthError::Malformed(e.to_string()))?;
        check_type(header.typ.as_deref(), self.untyped_tokens)?;
        if !ALLOWED.contains(&header.alg) {
            return Err(AuthError::Algorithm(format!("{:?}", header.alg)));
        }
        // The issuer is read before the signature is checked only to pick
        // its keys; the signature check then binds it.
        let unverified: Map<String, Value> = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        let iss = unverified
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.id == iss)
            .ok_or_else(|| AuthError::UntrustedIssuer(iss.to_owned()))?;
        let key = issuer.key(header.kid.as_deref()).await?;
        if key.algorithm.is_some_and(|a| a != header.alg) {
            return Err(AuthError::Algorithm(format!(
                "{:?} (its key is for {:?})",
                header.alg, key.algorithm
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&issuer.id]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = TOKEN_LEEWAY.as_secs();
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|e| AuthError::Invalid(e.to_string()))?
            .claims;
        check_issued_at(&claims, jsonwebtoken::get_current_timestamp())?;
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let scopes = Arc::new(scopes_of(&claims));
        Ok(Authenticated {
            caller: Caller::oauth(&issuer.id, subject, claims.clone()),
            scopes,
        })
    }

    /// 401 pointing at the metadata (RFC 9728 §5.1), with the error when
    /// a token was given.
    fn challenge(&self, error: Option<(&str, &str)>) -> Response {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{TOOLS_SCOPE}\"",
            self.metadata_url
        );
        if let Some((code, description)) = error {
            value.push_str(&format!(
                ", error=\"{code}\", error_description=\"{}\"",
                quoted(description)
            ));
        }
        let message = match error {
            Some((_, description)) => description.to_owned(),
            None => "an OAuth access token is required: send `Authorization: Bearer <token>` (see the resource metadata this reply's WWW-Authenticate points to)".into(),
        };
        with_challenge(StatusCode::UNAUTHORIZED, value, message)
    }

    /// 403 `insufficient_scope` naming every scope needed (step-up).
    pub(crate) fn insufficient_scope(&self, missing: &[String]) -> Response {
        let mut needed = vec![TOOLS_SCOPE.to_owned()];
        needed.extend(missing.iter().filter(|s| *s != TOOLS_SCOPE).cloned());
        let scope = needed.join(" ");
        let value = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\", error_description=\"the token lacks the scope {}\"",
            self.metadata_url,
            missing.join(" ")
        );
        with_challenge(
            StatusCode::FORBIDDEN,
            value,
            format!(
                "insufficient_scope: this needs the scope {}; ask the authorization server for a token with it",
                scope
            ),
        )
    }
}

/// RFC 9068 §4: an access token is typed `at+jwt` (the media type
/// `application/at+jwt`, case-insensitively); untyped tokens only when the
/// server is told to accept them.
fn check_type(typ: Option<&str>, untyped_tokens: bool) -> Result<(), AuthError> {
    let typ = typ.map(str::to_ascii_lowercase);
    match typ.as_deref() {
        Some("at+jwt" | "application/at+jwt") => Ok(()),
        None | Some("jwt") if untyped_tokens => Ok(()),
        None => Err(AuthError::NotAnAccessToken("(none)".into())),
        Some(_) => Err(AuthError::NotAnAccessToken(typ.unwrap_or_default())),
    }
}

/// A token issued in the future (beyond the leeway) is refused: its
/// issuer's clock is wrong, or it was minted to outlive its keys.
fn check_issued_at(claims: &Map<String, Value>, now: u64) -> Result<(), AuthError> {
    let Some(iat) = claims.get("iat") else {
        return Ok(());
    };
    let iat = iat
        .as_f64()
        .ok_or_else(|| AuthError::Invalid("its `iat` is not a number".into()))?;
    if iat > (now + TOKEN_LEEWAY.as_secs()) as f64 {
        return Err(AuthError::Invalid(format!(
            "it was issued in the future (iat {iat}, now {now})"
        )));
    }
    Ok(())
}

/// The bearer token of `Authorization`, if it has one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// `scope` (space-separated, RFC 9068) or `scp` (a list, as some
/// providers send it).
fn scopes_of(claims: &Map<String, Value>) -> BTreeSet<String> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s.split_whitespace().map(str::to_owned).collect(),
        (_, Some(Value::Array(items))) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        (_, Some(Value::String(s))) => s.split_whitespace().map(str::to_owned).collect(),
        _ => BTreeSet::new(),
    }
}

/// Text safe inside a quoted header parameter.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .take(300)
        .collect()
}

fn with_challenge(status: StatusCode, value: String, message: String) -> Response {
    let mut response = (status, message).into_response();
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `/.well-known/oauth-protected-resource`, bare and with the resource's
/// path appended (RFC 9728 §3.1; clients try both).
pub(crate) fn metadata_routes(auth: Arc<Authenticator>) -> axum::Router {
    let document = Arc::new(auth.metadata(auth.scopes()).to_string());
    let serve = move || {
        let document = document.clone();
        async move {
            (
                [(header::CONTENT_TYPE, "application/json")],
                document.as_str().to_owned(),
            )
        }
    };
    let suffixed = reqwest::Url::parse(&auth.resource)
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let mut router = axum::Router::new().route(
        "/.well-known/oauth-protected-resource",
        axum::routing::get(serve.clone()),
    );
    if !suffixed.is_empty() {
        router = router.route(
            &format!("/.well-known/oauth-protected-resource{suffixed}"),
            axum::routing::get(serve),
        );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let claims = |v: Value| v.as_object().cloned().unwrap();
        let spaced = scopes_of(&claims(
            serde_json::json!({"scope": "mcp:tools files:write"}),
        ));
        assert!(spaced.contains("mcp:tools") && spaced.contains("files:write"));
        let listed = scopes_of(&claims(serde_json::json!({"scp": ["mcp:tools"]})));
        assert_eq!(listed.into_iter().collect::<Vec<_>>(), ["mcp:tools"]);
        assert!(scopes_of(&claims(serde_json::json!({}))).is_empty());
    }

    #[test]
    fn a_tool_scope_is_missing_only_where_its_pattern_matches() {
        let access = Access {
            tool_scopes: vec![(WildMatch::new("write_*"), "files:write".into())],
        };
        let none = BTreeSet::new();
        assert_eq!(access.missing(&none, "write_file"), ["files:write"]);
        assert!(access.missing(&none, "read_file").is_empty());
        let granted: BTreeSet<String> = ["files:write".to_owned()].into();
        assert!(access.missing(&granted, "write_file").is_empty());
    }

    #[test]
    fn r40_only_access_tokens_by_type_unless_untyped_ones_are_allowed() {
        for typ in ["at+jwt", "AT+JWT", "application/at+jwt"] {
            assert!(check_type(Some(typ), false).is_ok(), "{typ}");
        }
        for typ in [
            None,
            Some("JWT"),
            Some("logout+jwt"),
            Some("secevent+jwt"),
            Some("dpop+jwt"),
            Some("id_token+jwt"),
        ] {
            assert!(
                matches!(check_type(typ, false), Err(AuthError::NotAnAccessToken(_))),
                "{typ:?}"
            );
        }
        assert!(check_type(None, true).is_ok());
        assert!(check_type(Some("jwt"), true).is_ok());
        assert!(check_type(Some("dpop+jwt"), true).is_err());
    }

    #[test]
    fn r40_a_token_issued_in_the_future_is_refused() {
        let now = 1_800_000_000;
        let claims = |iat: Value| {
            serde_json::json!({ "iat": iat })
                .as_object()
                .cloned()
                .unwrap()
        };
        assert!(check_issued_at(&claims(Value::from(now)), now).is_ok());
        assert!(check_issued_at(&claims(Value::from(now + 30)), now).is_ok());
        assert!(check_issued_at(&claims(Value::from(now + 31)), now).is_err());
        let ten_years = now + 10 * 365 * 86_400;
        assert!(check_issued_at(&claims(Value::from(ten_years)), now).is_err());
        assert!(check_issued_at(&claims(Value::from("soon")), now).is_err());
        assert!(check_issued_at(&Map::new(), now).is_ok());
    }

    #[test]
    fn header_text_is_quoted_safely() {
        assert_eq!(quoted("a \"b\"\n\\c"), "a 'b''c");
    }
}
