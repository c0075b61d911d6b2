//! What every request to `/mcp` passes before the MCP SDK sees it (R37),
//! as layers in front of the route: the exact Origin check
//! ([`origin::check`](crate::http::origin::check)), no token in the query
//! string ([`refuse_query_token`]); then, in [`serve`], the policies that
//! depend on one another: the bearer token (which becomes the request's
//! [`Credential`]), the body read within a size, an idle time, a total time
//! and the server-wide budget of bytes held, malformed JSON answered with
//! JSON-RPC's parse error, a bounded `initialize`, and 2025-era sessions
//! honoured only with the credential that made them. What a request holds
//! (its bytes, its session, its place among replies a stop waits for) is
//! released when its reply has been sent.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tower::ServiceExt as _;

use crate::bindings::{Bindings, Credential, InUse, MAX_SESSIONS};
use crate::handler::Handler;
use crate::http::auth::{Authenticated, Authenticator, bearer};
use crate::http::body::{Bodies, over_budget};
use crate::http::connections::{Busy, CALLER_CONNECTION_SHARE_PERCENT, Connection};
use crate::http::refusal::{INVALID_PARAMS, PARSE_ERROR, Refused, closing, rpc_error};
use crate::results::BUSY_ERROR_CODE;
use toolhost::Caller;

/// The largest `initialize` params accepted: a session keeps them for its
/// whole life.
pub const MAX_INITIALIZE_BYTES: usize = 64 << 10;

/// The first protocol revision without sessions.
const STATELESS_ERA: &str = "2026-07-28";

/// The 2025-era session header.
const SESSION_HEADER: &str = "mcp-session-id";

/// The MCP SDK's HTTP service and the sessions it holds.
#[derive(Clone)]
pub(crate) struct Sdk {
    pub(crate) service: StreamableHttpService<Handler, LocalSessionManager>,
    pub(crate) sessions: Arc<LocalSessionManager>,
}

/// The first revision whose clients understand SSE priming events.
const RESUMABLE_ERA: &str = "2025-11-25";

/// A request that passed: where it goes, and what it holds meanwhile.
struct Admitted {
    request: Request,
    held: Held,
    /// The credential of an `initialize`, whose reply names the new session.
    initializing: Option<Credential>,
    /// Whether it goes to the SDK service with resumable streams.
    resumable: bool,
}

/// Everything the guard checks against.
pub(crate) struct Guard {
    /// Every caller's token; none (and no `auth`): no token needed.
    pub(crate) tokens: Vec<Arc<str>>,
    /// OAuth access tokens, when issuers are configured (R40).
    pub(crate) auth: Option<Arc<Authenticator>>,
    pub(crate) bodies: Bodies,
    pub(crate) bindings: Arc<Bindings>,
    /// The SDK's services: one whose SSE streams are resumable (priming
    /// events, for 2025-11-25 clients and later) and one whose are not.
    pub(crate) resumable: Sdk,
    pub(crate) plain: Sdk,
    /// POST requests in progress, replies included: a stop waits for them
    /// to be written.
    pub(crate) replies: TaskTracker,
}

/// What a request keeps until its reply has been sent.
#[derive(Default)]
struct Held {
    bytes: Option<OwnedSemaphorePermit>,
    session: Option<InUse>,
    reply: Option<TaskTrackerToken>,
    /// Its connection is busy, not idle (so never shed for room).
    busy: Option<Busy>,
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required: send `Authorization: Bearer <token>`",
    )
        .into_response()
}

/// A token in the URL would end up in logs and histories: the MCP
/// authorization spec forbids it, so it is refused rather than ignored.
fn token_in_query() -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(
            header::WWW_AUTHENTICATE,
            "Bearer error=\"invalid_request\", error_description=\"access tokens are not accepted in the query string\"",
        )],
        "access tokens are not accepted in the URL query string: send `Authorization: Bearer <token>`",
    )
        .into_response()
}

/// Two `Authorization` headers: taking either would let a proxy and the
/// server disagree on who the caller is.
fn two_authorizations() -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(
            header::WWW_AUTHENTICATE,
            "Bearer error=\"invalid_request\", error_description=\"more than one Authorization header\"",
        )],
        "a request carries one Authorization header: send exactly one `Authorization: Bearer <token>`",
    )
        .into_response()
}

fn has_query_token(request: &Request) -> bool {
    request.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split('=').next() == Some("access_token"))
    })
}

fn session_not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "Not Found: no such session (it expired, was closed, or was made with another credential); initialize a new one",
    )
        .into_response()
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

/// The query-token policy, a layer in front of `/mcp`: a token in the URL
/// is refused before any credential is looked for.
pub(crate) async fn refuse_query_token(request: Request, next: Next) -> Response {
    if has_query_token(&request) {
        return token_in_query();
    }
    next.run(request).await
}

/// Serves `/mcp`, behind the Origin and query-token layers: the guard's
/// remaining policies (credential, scope, body, JSON peek, session), then
/// the SDK service the request's era goes to.
pub(crate) async fn serve(State(guard): State<Arc<Guard>>, request: Request) -> Response {
    let admitted = match guard.admit(request).await {
        Ok(admitted) => admitted,
        Err(refusal) => return *refusal,
    };
    let sdk = if admitted.resumable {
        &guard.resumable
    } else {
        &guard.plain
    };
    let Ok(response) = sdk.service.clone().oneshot(admitted.request).await;
    let response = response.map(Body::new);
    if let Some(credential) = admitted.initializing
        && let Some(id) = session_id(response.headers())
    {
        guard.bindings.bind(id, credential, admitted.resumable);
    }
    admitted.held.keep_until_sent(response)
}

impl Guard {
    /// Checks a request; gives it back with what it holds and where it goes.
    async fn admit(&self, request: Request) -> Result<Admitted, Refused> {
        let (mut parts, body) = request.into_parts();
        let connection = parts.extensions.get::<Arc<Connection>>().cloned();
        let mut held = Held {
            busy: connection.as_ref().map(Connection::busy),
            ..Held::default()
        };
        let credential = self.credential(&mut parts).await?;
        let mut initializing = None;
        let mut resumable = false;
        let body = if parts.method == Method::POST {
            let read = self.bodies.read(&parts.headers, body).await?;
            held.bytes = read.permit;
            held.reply = Some(self.replies.token());
            let peek = Peek::of(&read.bytes)?;
            if read.unbudgeted && !peek.cancellation {
                return Err(Box::new(over_budget(self.bodies.budget_bytes)));
            }
            attribute(connection.as_deref(), &credential, peek.cancellation)?;
            if !peek.cancellation {
                self.bodies.charge(&read.bytes, &mut held.bytes)?;
            }
            self.check_scope(&parts, peek.tool.as_deref())?;
            if let Some(version) = &peek.initialize {
                self.make_room().await?;
                initializing = Some(credential.clone());
                resumable = version.as_str() >= RESUMABLE_ERA;
            } else if peek.is_stateless(&parts.headers) {
                // Sessions do not exist in this era: a session id it
                // carries names nothing.
                parts.headers.remove(SESSION_HEADER);
            }
            Body::from(read.bytes)
        } else {
            attribute(connection.as_deref(), &credential, false)?;
            body
        };
        if initializing.is_none()
            && let Some(id) = session_id(&parts.headers)
        {
            let in_use = self.bindings.enter(id, &credential);
            let in_use = in_use.ok_or_else(|| Box::new(session_not_found()))?;
            resumable = in_use.resumable;
            held.session = Some(in_use);
        }
        Ok(Admitted {
            request: Request::from_parts(parts, body),
            held,
            initializing,
            resumable,
        })
    }

    /// The request's credential: a static bearer token, else an OAuth
    /// access token, when either is required. Handed on with the request:
    /// the credential, and for a token the caller it names (R40).
    async fn credential(&self, parts: &mut http::request::Parts) -> Result<Credential, Refused> {
        if self.tokens.is_empty() && self.auth.is_none() {
            let anonymous = Credential::anonymous();
            parts.extensions.insert(anonymous.clone());
            return Ok(anonymous);
        }
        if parts
            .headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .nth(1)
            .is_some()
        {
            return Err(Box::new(two_authorizations()));
        }
        let given = bearer(&parts.headers);
        // Every token is compared, so timing does not tell which matched.
        let matched = given.is_some_and(|given| {
            self.tokens.iter().fold(false, |any, t| {
                constant_time_eq(given.as_bytes(), t.as_bytes()) | any
            })
        });
        let credential = match (given, &self.auth) {
            (Some(given), _) if matched => {
                let credential = Credential::token(given);
                parts.extensions.insert(Caller::named(credential.name()));
                credential
            }
            (_, Some(auth)) => {
                let authenticated = auth.authenticate(&parts.headers).await.map_err(Box::new)?;
                let credential = Credential::caller(authenticated.caller.name());
                parts.extensions.insert(authenticated.caller.clone());
                parts.extensions.insert(auth.access().clone());
                parts.extensions.insert(authenticated);
                credential
            }
            _ => return Err(Box::new(unauthorized())),
        };
        parts.extensions.insert(credential.clone());
        Ok(credential)
    }

    /// A call of a tool the token's scopes do not cover: 403 naming the
    /// scope it needs (R40).
    fn check_scope(&self, parts: &http::request::Parts, tool: Option<&str>) -> Result<(), Refused> {
        let (Some(auth), Some(tool)) = (&self.auth, tool) else {
            return Ok(());
        };
        let Some(authenticated) = parts.extensions.get::<Authenticated>() else {
            return Ok(());
        };
        let missing = auth.access().missing(&authenticated.scopes, tool);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Box::new(auth.insufficient_scope(&missing)))
        }
    }

    /// Room for one more session: closes the one idle the longest when
    /// the limit is reached.
    async fn make_room(&self) -> Result<(), Refused> {
        match self.bindings.make_room() {
            Ok(None) => Ok(()),
            Ok(Some(evicted)) => {
                // It lives in one of the two; closing an unknown id is a no-op.
                let id = evicted.to_string().into();
                for sdk in [&self.resumable, &self.plain] {
                    if let Err(e) = sdk.sessions.close_session(&id).await {
                        tracing::warn!("cannot close the idle session {evicted}: {e}");
                    }
                }
                Ok(())
            }
            Err(_) => Err(Box::new(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                Value::Null,
                BUSY_ERROR_CODE.0,
                &format!(
                    "the server has its limit of {MAX_SESSIONS} sessions, all busy; retry later"
                ),
            ))),
        }
    }
}

/// Counts the request's connection against its caller (an anonymous one
/// stays its address's): a caller over its share is refused, closing the
/// connection, unless the request is `exempt` (a cancellation).
fn attribute(
    connection: Option<&Connection>,
    credential: &Credential,
    exempt: bool,
) -> Result<(), Refused> {
    let Some(connection) = connection else {
        return Ok(());
    };
    if *credential == Credential::anonymous() {
        return Ok(());
    }
    connection.attribute(credential, exempt).map_err(|over| {
        let mut response = rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            BUSY_ERROR_CODE.0,
            &format!(
                "this caller already holds {} of this server's connections, its share ({CALLER_CONNECTION_SHARE_PERCENT}% of them, {}): reuse or close some, then retry",
                over.held, over.share
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        Box::new(closing(response))
    })
}

/// Compares without stopping at the first difference, so timing does not
/// tell how much of a guess was right (subtle's audited primitive).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

/// Malformed JSON: JSON-RPC's parse error, with HTTP 400.
fn parse_error(e: serde_json::Error) -> Refused {
    Box::new(rpc_error(
        StatusCode::BAD_REQUEST,
        Value::Null,
        PARSE_ERROR,
        &format!("Parse error: the request body is not JSON ({e})"),
    ))
}

/// What the guard needs of a JSON-RPC message, read without building it.
#[derive(Debug, Default)]
struct Peek {
    /// For an `initialize`, the protocol version it asks for.
    initialize: Option<String>,
    /// The per-request protocol version in `params._meta` (2026-07-28).
    version: Option<String>,
    /// For a `tools/call`, the tool it calls.
    tool: Option<String>,
    /// Whether it is `notifications/cancelled`: it frees resources, so it
    /// is never refused for load.
    cancellation: bool,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Meta<'a>>,
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    version: Option<Cow<'a, str>>,
}

impl Peek {
    /// Malformed JSON is JSON-RPC's parse error (HTTP 400); an oversized
    /// `initialize` is refused. Anything else well-formed goes on to the
    /// SDK, which answers what it cannot use.
    fn of(bytes: &[u8]) -> Result<Peek, Refused> {
        let Some(message) = Self::message(bytes)? else {
            return Ok(Peek::default());
        };
        let initializing = message.method.as_deref() == Some("initialize");
        let params = message.params.map_or("", RawValue::get);
        if initializing && params.len() > MAX_INITIALIZE_BYTES {
            let id = message
                .id
                .and_then(|id| serde_json::from_str(id.get()).ok())
                .unwrap_or(Value::Null);
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                INVALID_PARAMS,
                &format!(
                    "initialize params are {} bytes; at most {MAX_INITIALIZE_BYTES} are accepted",
                    params.len()
                ),
            )));
        }
        let calling = message.method.as_deref() == Some("tools/call");
        let params = serde_json::from_str::<Params>(params).ok();
        let (asked, version, name) = match params {
            Some(p) => (p.protocol_version, p.meta.and_then(|m| m.version), p.name),
            None => (None, None, None),
        };
        Ok(Peek {
            cancellation: message.method.as_deref() == Some("notifications/cancelled"),
            initialize: initializing.then(|| asked.map(Cow::into_owned).unwrap_or_default()),
            version: version.map(Cow::into_owned),
            tool: name.filter(|_| calling).map(Cow::into_owned),
        })
    }

    /// The body read once as a request object; none for well-formed JSON
    /// of another shape.
    fn message(bytes: &[u8]) -> Result<Option<Message<'_>>, Refused> {
        // serde reads a struct from an array too, and calls an array longer
        // than its fields a syntax error: only an object is read as one.
        let object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        if object {
            match serde_json::from_slice::<Message>(bytes) {
                Ok(message) => return Ok(Some(message)),
                Err(e) if !e.is_data() => return Err(parse_error(e)),
                // A field of another shape stopped the parse there: what
                // follows it may still be broken.
                Err(_) => {}
            }
        }
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(parse_error)?;
        Ok(None)
    }

    /// Whether the request is of the stateless era, by its own metadata or
    /// its protocol-version header.
    fn is_stateless(&self, headers: &HeaderMap) -> bool {
        let header = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok());
        // Revisions are dates: they compare as strings.
        self.version.as_deref().or(header) >= Some(STATELESS_ERA)
    }
}

impl Held {
    /// The response, keeping what the request held until its body has been
    /// sent (or the client went away).
    fn keep_until_sent(self, response: Response) -> Response {
        if self.bytes.is_none()
            && self.session.is_none()
            && self.reply.is_none()
            && self.busy.is_none()
        {
            return response;
        }
        response.map(|inner| Body::new(HeldBody { inner, _held: self }))
    }
}

/// A response body and what its request holds.
struct HeldBody {
    inner: Body,
    _held: Held,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_is_a_parse_error_with_status_400() {
        let refused = Peek::of(b"{\"jsonrpc\": \"2.0\", ").unwrap_err();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn json_of_another_shape_passes_and_broken_json_never_does() {
        // Well-formed but not a request this guard reads: the SDK answers.
        for body in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            br#"{"method":"ping","method":"ping"}"#,
            br#"[{"method":"ping"},{"method":"ping"},{"method":"ping"},{"method":"ping"}]"#,
            b" 42",
        ] {
            let peek = Peek::of(body).expect("well-formed JSON passes");
            assert!(peek.initialize.is_none() && peek.tool.is_none());
        }
        // Broken after a field of the wrong shape, or after a whole value.
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":5,"params":{"#[..],
            br#"[{"method":"ping"},"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#,
            br#"{"method":"ping","params":{"name":"echo"}"#,
        ] {
            let refused = Peek::of(body).expect_err("broken JSON is refused");
            assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn an_oversized_initialize_is_refused_and_others_pass() {
        let big = "x".repeat(MAX_INITIALIZE_BYTES);
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"initialize","params":{{"clientInfo":{{"name":"{big}"}}}}}}"#
        );
        assert_eq!(
            Peek::of(init.as_bytes()).unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"name":"echo","arguments":{{"m":"{big}"}}}}}}"#
        );
        assert!(
            Peek::of(call.as_bytes())
                .expect("passes")
                .initialize
                .is_none()
        );
    }

    #[test]
    fn the_era_comes_from_the_request_metadata_or_the_header() {
        let modern = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(Peek::of(modern).unwrap().is_stateless(&HeaderMap::new()));
        let legacy = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let peek = Peek::of(legacy).unwrap();
        assert!(!peek.is_stateless(&HeaderMap::new()));
        let mut headers = HeaderMap::new();
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        assert!(!peek.is_stateless(&headers));
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        assert!(peek.is_stateless(&headers));
    }
}
