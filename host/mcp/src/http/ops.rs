//! What operators and their machines ask a server, beside `/mcp` and
//! without its guard (probes and scrapers carry no token): `/healthz`
//! (200 while the process serves), `/readyz` (200 only when plugins have
//! loaded, the store answers and no stop has begun) and `/metrics`
//! (Prometheus). Each is cheap: the store is asked at most once at a time,
//! within [`READY_CHECK_TIMEOUT`], and its answer reused for
//! [`READY_CHECK_CACHE`]. Every HTTP response of the server is counted by
//! route and status code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::http::accept::{self, ConnectionLimits, Stops};
use crate::metrics::{self, Metrics, StoreOp};
use crate::server::{McpServer, Shared};
use toolhost::store::StoreError;

/// How long `/readyz` waits for the store to answer a trivial query; a
/// store slower than that is as good as unreachable to the calls.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long `/readyz` reuses the store's last answer, so that probes, however
/// many, ask the store at most about once a second.
pub const READY_CHECK_CACHE: Duration = Duration::from_secs(1);

/// What the operator routes answer from.
pub(crate) struct Ops {
    shared: Arc<Shared>,
    metrics: Metrics,
    /// The store's last answer and when it came; held while asking, so one
    /// probe at a time asks.
    store_check: tokio::sync::Mutex<Option<(Instant, bool)>>,
    /// Whether the store answered last time (to log changes only).
    store_was_ready: AtomicBool,
}

impl Ops {
    pub(crate) fn new(server: &McpServer) -> Arc<Ops> {
        Arc::new(Ops {
            shared: server.shared.clone(),
            metrics: server.metrics(),
            store_check: tokio::sync::Mutex::new(None),
            store_was_ready: AtomicBool::new(true),
        })
    }

    /// Why the server is not ready, if it is not.
    async fn unready(&self) -> Option<&'static str> {
        if self.shared.admission.draining.is_cancelled() {
            return Some("not ready: the server is stopping\n");
        }
        // `loaded` answers at once when nothing is loading; a zero timeout
        // polls it once, and never waits for a loading to end.
        if tokio::time::timeout(Duration::ZERO, self.shared.loaded())
            .await
            .is_err()
        {
            return Some("not ready: plugins are still loading\n");
        }
        if !self.store_ready().await {
            return Some("not ready: the store does not answer\n");
        }
        None
    }

    async fn store_ready(&self) -> bool {
        let mut last = self.store_check.lock().await;
        if let Some((at, ready)) = *last
            && at.elapsed() < READY_CHECK_CACHE
        {
            return ready;
        }
        let asked = Instant::now();
        let answer = tokio::time::timeout(READY_CHECK_TIMEOUT, self.ask_store()).await;
        let ready = matches!(answer, Ok(Ok(())));
        self.metrics
            .store_op(StoreOp::Ready, asked.elapsed(), !ready);
        if self.store_was_ready.swap(ready, Ordering::Relaxed) != ready {
            match answer {
                Ok(Ok(())) => tracing::warn!("the store answers again: ready"),
                Ok(Err(e)) => tracing::warn!("not ready: {e}"),
                Err(_) => tracing::warn!(
                    "not ready: the store did not answer within {READY_CHECK_TIMEOUT:?}"
                ),
            }
        }
        *last = Some((Instant::now(), ready));
        ready
    }

    async fn ask_store(&self) -> Result<(), StoreError> {
        match self.shared.location.store().await? {
            Some(store) => store.ready().await,
            None => Ok(()),
        }
    }
}

fn text(status: StatusCode, body: &'static str) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok\n")
}

async fn readyz(State(ops): State<Arc<Ops>>) -> Response {
    match ops.unready().await {
        None => text(StatusCode::OK, "ready\n"),
        Some(why) => {
            let mut response = text(StatusCode::SERVICE_UNAVAILABLE, why);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
    }
}

async fn stopping_readyz() -> Response {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready: the server is stopping\n",
    )
}

async fn metrics(State(ops): State<Arc<Ops>>) -> Response {
    let body = ops
        .metrics
        .encode(ops.shared.admission.slots_held(), ops.shared.bindings.len());
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, metrics::CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The answer to anything but the operator routes once a stop has begun,
/// on a connection opened after it: go elsewhere.
async fn stopping() -> Response {
    let mut response = text(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is stopping and takes no new requests; retry on another server or after it restarts\n",
    );
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Counts every response by route and status code.
async fn count(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let route = metrics::route_label(request.uri().path());
    let response = next.run(request).await;
    metrics.http_request(route, response.status().as_u16());
    response
}

/// `router` (the `/mcp` route) with the operator routes, counted.
pub(crate) fn serving(router: axum::Router, ops: &Arc<Ops>, with_metrics: bool) -> axum::Router {
    let mut routes = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    if with_metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    counted(router.merge(routes.with_state(ops.clone())), ops)
}

/// What a connection opened after a stop began is served: the probes say
/// alive and not ready, metrics still answer, the rest is refused.
pub(crate) fn draining(ops: &Arc<Ops>, with_metrics: bool) -> axum::Router {
    let mut routes = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(stopping_readyz));
    if with_metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    counted(routes.fallback(stopping).with_state(ops.clone()), ops)
}

/// Only `/metrics`, for a metrics address of its own.
fn metrics_only(ops: &Arc<Ops>) -> axum::Router {
    let routes = axum::Router::new()
        .route("/metrics", get(metrics))
        .with_state(ops.clone());
    counted(routes, ops)
}

fn counted(router: axum::Router, ops: &Arc<Ops>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(
        ops.metrics.clone(),
        count,
    ))
}

impl McpServer {
    /// Serves `/metrics` (only) on `listener` until `stop`, with the front
    /// door's connection cap and header timeout. For `--metrics ADDR`:
    /// serve it apart from `/mcp` (and give [`HttpOptions::metrics`] false).
    ///
    /// [`HttpOptions::metrics`]: crate::HttpOptions::metrics
    pub async fn serve_metrics(&self, listener: TcpListener, stop: CancellationToken) {
        let ops = Ops::new(self);
        let router = metrics_only(&ops);
        let stops = Stops {
            graceful: CancellationToken::new(),
            hard: CancellationToken::new(),
            connections: TaskTracker::new(),
        };
        let limits = ConnectionLimits {
            max_connections: accept::MAX_CONNECTIONS,
            header_timeout: accept::HEADER_READ_TIMEOUT,
        };
        let accepting = tokio::spawn(accept::accept(
            listener,
            router.clone(),
            router,
            limits,
            stops.clone(),
        ));
        stop.cancelled().await;
        // A scrape is short and nothing depends on its answer.
        stops.graceful.cancel();
        stops.hard.cancel();
        let _ = accepting.await;
        stops.connections.close();
        stops.connections.wait().await;
    }
}
