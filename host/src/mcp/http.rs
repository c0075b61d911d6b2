//! Streamable HTTP at `/mcp`, on axum: loopback by default, Host and Origin
//! checked against an allow-list (DNS-rebinding defence), a bearer token
//! required off loopback, a request body limit, and a graceful stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::mcp::handler::Handler;
use crate::mcp::server::{McpServer, ServeError};

/// The largest request body accepted: room for large tool inputs, bounded
/// so a client cannot make the server buffer without end.
pub const MAX_REQUEST_BODY_BYTES: usize = 16 << 20;

/// How to serve over HTTP. Every default is the safe one.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Bearer token every request must carry (`Authorization: Bearer …`).
    /// Required when the address is not loopback. Default: none.
    pub token: Option<String>,
    /// Host names accepted in the `Host` header besides the loopback names
    /// and the bound address. Default: none.
    pub hosts: Vec<String>,
    /// Browser origins accepted besides loopback ones. Default: none.
    pub origins: Vec<String>,
    /// How long calls in flight may finish once `stop` fires; the rest are
    /// cancelled. Default: zero.
    pub grace: Duration,
}

/// An HTTP server ready to run: the listener is bound and the options
/// checked.
pub struct HttpServer {
    listener: TcpListener,
    router: axum::Router,
    server: McpServer,
    addr: SocketAddr,
    grace: Duration,
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
    /// token).
    pub fn http(
        &self,
        listener: TcpListener,
        options: HttpOptions,
    ) -> Result<HttpServer, ServeError> {
        let addr = listener
            .local_addr()
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        check_exposure(addr, &options)?;
        let shared = self.shared.clone();
        let service = StreamableHttpService::new(
            move || {
                Ok(Handler {
                    shared: shared.clone(),
                    connection: format!("http-{}", uuid::Uuid::new_v4().simple()),
                })
            },
            Arc::new(LocalSessionManager::default()),
            config(addr, &options, self.shared.shutdown.child_token()),
        );
        let token = options.token.clone().map(Arc::<str>::from);
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn(move |request, next| {
                authorize(token.clone(), request, next)
            }));
        Ok(HttpServer {
            listener,
            router,
            server: self.clone(),
            addr,
            grace: options.grace,
        })
    }
}

impl HttpServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `stop` fires; then stops accepting calls, lets calls in
    /// flight finish within the grace period, cancels the rest and returns.
    pub async fn run(self, stop: CancellationToken) -> Result<(), ServeError> {
        let server = self.server;
        let grace = self.grace;
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(async move {
                stop.cancelled().await;
                server.shut_down(grace).await;
            })
            .await
            .map_err(|e| ServeError::Transport(e.to_string()))
    }
}

/// Off loopback, anyone who can reach the port could run tools: refuse to
/// start without a token.
fn check_exposure(addr: SocketAddr, options: &HttpOptions) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || options.token.is_some() {
        return Ok(());
    }
    Err(ServeError::Config(format!(
        "refusing to serve on {addr} without a token: it is not a loopback address, so anyone who can reach it could run tools; pass --token (or set TOOLHOST_TOKEN), or bind 127.0.0.1"
    )))
}

fn config(
    addr: SocketAddr,
    options: &HttpOptions,
    cancel: CancellationToken,
) -> StreamableHttpServerConfig {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    if !addr.ip().is_unspecified() {
        hosts.push(addr.ip().to_string());
    }
    hosts.extend(options.hosts.iter().cloned());
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .into();
    origins.extend(options.origins.iter().cloned());
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
        .with_cancellation_token(cancel)
}

/// Requires `Authorization: Bearer <token>` when a token is set.
async fn authorize(token: Option<Arc<str>>, request: Request, next: Next) -> Response {
    let Some(token) = token else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required: send `Authorization: Bearer <token>`",
    )
        .into_response()
}

/// Compares without stopping at the first difference, so timing does not
/// tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
