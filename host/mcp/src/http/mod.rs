//! Streamable HTTP at `/mcp`: loopback by default, the Host header checked
//! against an allow-list and the Origin exactly (DNS-rebinding defence), a
//! bearer token required off loopback, every resource a client can make the
//! server hold bounded (R37: connections, request heads and bodies,
//! sessions, bytes held), and a stop that loses no outcome. Beside it, the
//! operator routes: `/healthz`, `/readyz` and `/metrics`.

mod accept;
pub(crate) mod auth;
mod body;
mod connections;
mod cost;
mod guard;
mod ops;
mod origin;
mod refusal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use accept::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS};
pub use auth::{
    AUTH_FETCH_TIMEOUT, AuthError, AuthOptions, KEY_REFETCH_INTERVAL, MAX_AUTH_DOCUMENT_BYTES,
    MAX_ISSUER_KEYS, MAX_TOKEN_BYTES, TOKEN_LEEWAY, TOOLS_SCOPE,
};
pub use body::{
    BODY_IDLE_TIMEOUT, BODY_READ_TIMEOUT, MAX_BUFFERED_REQUEST_BYTES, MAX_REQUEST_BODY_BYTES,
    MAX_UNBUDGETED_BYTES,
};
pub use connections::CALLER_CONNECTION_SHARE_PERCENT;
pub use guard::MAX_INITIALIZE_BYTES;
pub use ops::{READY_CHECK_CACHE, READY_CHECK_TIMEOUT};

use crate::bindings::{MAX_SESSIONS, SESSION_IDLE_EXPIRY};
use crate::handler::Handler;
use crate::http::accept::{ConnectionLimits, Stops};
use crate::http::auth::Authenticator;
use crate::http::body::Bodies;
use crate::http::guard::{Guard, Sdk};
use crate::http::origin::Origins;
use crate::server::{McpServer, ServeError};

/// How long a 2025-11-25 client waits before it reconnects to a stream
/// that ended (the `retry` of SSE priming events).
const PRIMING_RETRY: Duration = Duration::from_secs(3);

/// How long, once every call of a stopping server has its outcome, its
/// replies have to reach their clients before the connections are closed.
pub const REPLY_FLUSH_LIMIT: Duration = Duration::from_secs(2);

/// How to serve over HTTP. Every default is the safe one.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Bearer tokens, one per caller: each request must carry one
    /// (`Authorization: Bearer …`), and a session made with one is honoured
    /// only with the same. Required when the address is not loopback; none
    /// may be empty. Default: none.
    pub tokens: Vec<String>,
    /// OAuth 2.1 access tokens from trusted issuers (R40), besides the
    /// static tokens. Default: none.
    pub auth: Option<AuthOptions>,
    /// Host names accepted in the `Host` header besides the loopback names
    /// and the bound address. Default: none.
    pub hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) accepted besides loopback
    /// ones. Default: none.
    pub origins: Vec<String>,
    /// How long calls in flight may finish once `stop` fires; the rest are
    /// cancelled. Default: zero.
    pub grace: Duration,
    /// Open connections at once (at most half the descriptor limit).
    /// Default: [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// How long a client has to send a request head; also how long an idle
    /// connection stays open. Default: [`HEADER_READ_TIMEOUT`].
    pub header_timeout: Duration,
    /// How long a request body may pause between bytes. Default:
    /// [`BODY_IDLE_TIMEOUT`].
    pub body_timeout: Duration,
    /// How long a whole request body may take, however steadily it
    /// trickles. Default: [`BODY_READ_TIMEOUT`].
    pub body_deadline: Duration,
    /// Sessions at once; the one idle the longest makes room for a new one.
    /// Default: [`MAX_SESSIONS`](crate::limits::MAX_SESSIONS).
    pub max_sessions: usize,
    /// How long a session lives without a request. Default:
    /// [`SESSION_IDLE_EXPIRY`](crate::limits::SESSION_IDLE_EXPIRY).
    pub session_idle: Duration,
    /// Request bytes held at once across all requests. Default:
    /// [`MAX_BUFFERED_REQUEST_BYTES`].
    pub max_buffered_bytes: usize,
    /// Whether `/metrics` is served beside `/mcp` (false when it has an
    /// address of its own: [`McpServer::serve_metrics`]). Default: true.
    pub metrics: bool,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            tokens: Vec::new(),
            auth: None,
            hosts: Vec::new(),
            origins: Vec::new(),
            grace: Duration::ZERO,
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_READ_TIMEOUT,
            body_timeout: BODY_IDLE_TIMEOUT,
            body_deadline: BODY_READ_TIMEOUT,
            max_sessions: MAX_SESSIONS,
            session_idle: SESSION_IDLE_EXPIRY,
            max_buffered_bytes: MAX_BUFFERED_REQUEST_BYTES,
            metrics: true,
        }
    }
}

/// An HTTP server ready to run: the listener is bound and the options
/// checked.
pub struct HttpServer {
    listener: TcpListener,
    router: axum::Router,
    /// What connections opened once a stop has begun are served.
    draining: axum::Router,
    server: McpServer,
    addr: SocketAddr,
    grace: Duration,
    limits: ConnectionLimits,
    /// Ends the SDK's sessions, once the replies are out.
    sessions_end: CancellationToken,
    replies: TaskTracker,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Prepares streamable HTTP at `/mcp` on `listener`; refuses options
    /// that would expose the tools (a non-loopback address without a
    /// token, an empty token) or that do not parse.
    pub fn http(
        &self,
        listener: TcpListener,
        options: HttpOptions,
    ) -> Result<HttpServer, ServeError> {
        let addr = listener
            .local_addr()
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        check_exposure(addr, &options)?;
        let origins = Origins::new(&options.origins).map_err(ServeError::Config)?;
        self.shared.bindings.set_max(options.max_sessions);
        self.shared.bindings.set_idle(options.session_idle);
        let sessions_end = CancellationToken::new();
        let sdk = |retry| self.sdk(addr, &options, retry, sessions_end.clone());
        let auth = self.authenticator(&options)?;
        let replies = TaskTracker::new();
        let guard = Arc::new(Guard {
            auth: auth.clone(),
            tokens: options
                .tokens
                .iter()
                .map(|t| Arc::from(t.as_str()))
                .collect(),
            bodies: Bodies {
                idle: options.body_timeout,
                deadline: options.body_deadline,
                budget: Arc::new(Semaphore::new(options.max_buffered_bytes)),
                budget_bytes: options.max_buffered_bytes,
            },
            bindings: self.shared.bindings.clone(),
            resumable: sdk(Some(PRIMING_RETRY)),
            plain: sdk(None),
            replies: replies.clone(),
        });
        // Each policy that stands alone is a layer; the last added runs
        // first.
        let router = axum::Router::new()
            .route("/mcp", axum::routing::any(guard::serve))
            .route_layer(axum::middleware::from_fn(guard::refuse_query_token))
            .route_layer(axum::middleware::from_fn_with_state(
                Arc::new(origins),
                origin::check,
            ))
            .with_state(guard);
        let router = match auth {
            Some(auth) => router.merge(auth::metadata_routes(auth)),
            None => router,
        };
        let ops = ops::Ops::new(self);
        let draining = ops::draining(&ops, options.metrics);
        let router = ops::serving(router, &ops, options.metrics);
        Ok(HttpServer {
            listener,
            router,
            draining,
            server: self.clone(),
            addr,
            grace: options.grace,
            limits: ConnectionLimits {
                max_connections: options.max_connections,
                header_timeout: options.header_timeout,
            },
            sessions_end,
            replies,
        })
    }
}

impl McpServer {
    /// One of the SDK's HTTP services: its sessions kept for the idle time,
    /// SSE priming with `retry` or none.
    fn sdk(
        &self,
        addr: SocketAddr,
        options: &HttpOptions,
        retry: Option<Duration>,
        sessions_end: CancellationToken,
    ) -> Sdk {
        let mut sessions = SessionConfig::default();
        sessions.keep_alive = Some(options.session_idle);
        sessions.sse_retry = retry;
        let mut manager = LocalSessionManager::default();
        manager.session_config = sessions;
        let manager = Arc::new(manager);
        let shared = self.shared.clone();
        let service = StreamableHttpService::new(
            move || {
                let connection = format!("http-{}", uuid::Uuid::new_v4().simple());
                Ok(Handler::new(shared.clone(), connection))
            },
            manager.clone(),
            config(addr, options, retry, sessions_end),
        );
        Sdk {
            service,
            sessions: manager,
        }
    }

    /// The OAuth checks, when issuers are configured (R40).
    fn authenticator(
        &self,
        options: &HttpOptions,
    ) -> Result<Option<Arc<Authenticator>>, ServeError> {
        let Some(auth) = &options.auth else {
            return Ok(None);
        };
        let tls = self.shared.location.client_tls();
        let authenticator = Authenticator::new(auth, tls).map_err(ServeError::Config)?;
        Ok(Some(Arc::new(authenticator)))
    }
}

impl HttpServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `stop` fires; then takes no new calls (`/readyz` says
    /// 503 at once, and connections opened from then on get one answer:
    /// 503 but for the probes and metrics), lets calls in flight finish
    /// within the grace period, cancels the rest, waits until each has its
    /// outcome and its reply has been sent (within [`REPLY_FLUSH_LIMIT`]),
    /// and closes the listener and every connection, whatever it is doing.
    pub async fn run(self, stop: CancellationToken) -> Result<(), ServeError> {
        let stops = Stops {
            graceful: CancellationToken::new(),
            hard: CancellationToken::new(),
            connections: TaskTracker::new(),
        };
        let accepting = tokio::spawn(accept::accept(
            self.listener,
            self.router,
            self.draining,
            self.limits,
            stops.clone(),
        ));
        stop.cancelled().await;
        stops.graceful.cancel();
        self.server.shut_down(self.grace).await;
        self.replies.close();
        let _ = tokio::time::timeout(REPLY_FLUSH_LIMIT, self.replies.wait()).await;
        self.sessions_end.cancel();
        stops.hard.cancel();
        let _ = accepting.await;
        stops.connections.close();
        stops.connections.wait().await;
        Ok(())
    }
}

/// Off loopback, anyone who can reach the port could run tools: refuse to
/// start without a token. An empty token would let anyone in anywhere.
fn check_exposure(addr: SocketAddr, options: &HttpOptions) -> Result<(), ServeError> {
    if options.tokens.iter().any(String::is_empty) {
        return Err(ServeError::Config(
            "the bearer token is empty: pass a non-empty --token (or TOOLHOST_TOKEN), or none on a loopback address".into(),
        ));
    }
    if addr.ip().is_loopback() || !options.tokens.is_empty() || options.auth.is_some() {
        return Ok(());
    }
    Err(ServeError::Config(format!(
        "refusing to serve on {addr} without a token: it is not a loopback address, so anyone who can reach it could run tools; pass --auth-issuer and --resource (OAuth), or --token (or set TOOLHOST_TOKEN), or bind 127.0.0.1"
    )))
}

/// The SDK's settings: the Host allow-list, no Origin check of its own (the
/// guard's is exact), priming events with `retry` (only for clients of
/// 2025-11-25 and later: older ones cannot parse them), and the body limit
/// the guard already enforces.
fn config(
    addr: SocketAddr,
    options: &HttpOptions,
    retry: Option<Duration>,
    cancel: CancellationToken,
) -> StreamableHttpServerConfig {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    if !addr.ip().is_unspecified() {
        hosts.push(addr.ip().to_string());
    }
    hosts.extend(options.hosts.iter().cloned());
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .disable_allowed_origins()
        .with_sse_retry(retry)
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        .with_cancellation_token(cancel)
}
