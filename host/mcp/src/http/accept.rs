//! The accept loop (R37): `TCP_NODELAY` on every socket (replies are small
//! writes that must not wait for the client's delayed ACK), a cap on open
//! connections below the descriptor limit, shared fairly among callers
//! ([`connections`](super::connections)), a deadline for each request head
//! (which also closes idle keep-alive connections), and two ways to stop:
//! gracefully (open connections finish their request and close, one that
//! has sent none yet gets its first; new ones get one request each,
//! answered by the draining router, so probes hear that the server is
//! stopping) and hard (the listener closes and every connection is
//! dropped, whatever it is doing).

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::http::connections::{Connection, Connections};

/// Open connections at once; beyond it a new connection takes the place of
/// an idle one, or is answered 503 and closed when all are busy. Lowered to
/// half the process's descriptor limit, so plugins, files and the event log
/// keep descriptors of their own.
pub const MAX_CONNECTIONS: usize = 512;

/// How long a client has to send a request's head (and how long an idle
/// keep-alive connection stays open): a client that trickles its headers
/// cannot hold a connection longer.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait before accepting again after the process ran out of
/// descriptors, so the loop does not spin while connections close.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The reply to a connection over the cap, all of them busy: nothing of it
/// is read.
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-type: text/plain\r\ncontent-length: 52\r\n\r\ntoo many open connections to this server; retry soon";

/// How connections are accepted and served.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_connections: usize,
    pub(crate) header_timeout: Duration,
}

/// The tokens that stop the connections, and where they are tracked.
#[derive(Clone)]
pub(crate) struct Stops {
    /// Each open connection finishes its request and closes; new ones are
    /// served one request by the draining router.
    pub(crate) graceful: CancellationToken,
    /// No new connections, and every connection is dropped at once.
    pub(crate) hard: CancellationToken,
    pub(crate) connections: TaskTracker,
}

/// The connection cap this process can honour: the configured one, at
/// most half the soft descriptor limit.
fn effective_cap(configured: usize) -> usize {
    descriptor_limit()
        .map_or(configured, |limit| configured.min(limit / 2))
        .max(1)
}

#[cfg(unix)]
fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur as usize)
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<usize> {
    None
}

/// Accepts connections until `stops.hard` fires and serves each in a task
/// of `stops.connections`: with `router`, or once `stops.graceful` has
/// fired, one request with `draining`.
pub(crate) async fn accept(
    listener: TcpListener,
    router: axum::Router,
    draining: axum::Router,
    limits: ConnectionLimits,
    stops: Stops,
) {
    let table = Connections::new(effective_cap(limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = stops.hard.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(connection) = table.open(peer.ip()) else {
            // The reply fits in a fresh socket's send buffer; if not, the
            // close alone tells the client.
            let _ = stream.try_write(OVER_CAPACITY);
            continue;
        };
        let connection = Arc::new(connection);
        prepare(&stream);
        let stops_for_task = stops.clone();
        if stops.graceful.is_cancelled() {
            let router = draining.clone();
            stops.connections.spawn(async move {
                serve_one(stream, router, limits.header_timeout, &stops_for_task).await;
                drop(connection);
            });
            continue;
        }
        let router = router.clone();
        stops.connections.spawn(async move {
            serve(
                stream,
                router,
                limits.header_timeout,
                &stops_for_task,
                connection,
            )
            .await;
        });
    }
}

/// Replies go out as soon as they are written: an SSE reply is several
/// small writes, and with Nagle's algorithm each waits for the client's
/// delayed ACK (about 40 ms a call).
fn prepare(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("cannot set TCP_NODELAY: {e}");
    }
}

/// Serves one connection until it closes, a graceful stop lets it finish,
/// a hard stop drops it, or it is shed to make room for another.
async fn serve(
    stream: TcpStream,
    router: axum::Router,
    header_timeout: Duration,
    stops: &Stops,
    connection: Arc<Connection>,
) {
    let asked = Arc::new(Notify::new());
    let shed = connection.shed.clone();
    let service = Asked {
        inner: TowerToHyperService::new(router),
        asked: asked.clone(),
        connection,
    };
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = stops.graceful.cancelled() => {}
        () = stops.hard.cancelled() => return,
        () = shed.cancelled() => return,
    }
    // Told to stop before it has read a byte, hyper would close the
    // connection unanswered; one accepted just before the stop (a probe
    // racing it) was opened for a request, so it gets one answer first.
    // Its head must still come within the header timeout.
    tokio::select! {
        _ = connection.as_mut() => return,
        () = asked.notified() => connection.as_mut().graceful_shutdown(),
        () = stops.hard.cancelled() => return,
    }
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stops.hard.cancelled() => {}
    }
}

/// A connection's service that says when a request has come (a permit of
/// `asked` stays once one has), and hands each request its connection's
/// place, so the guard can count it against its caller.
struct Asked<S> {
    inner: S,
    asked: Arc<Notify>,
    connection: Arc<Connection>,
}

impl<S, B> hyper::service::Service<http::Request<B>> for Asked<S>
where
    S: hyper::service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut request: http::Request<B>) -> Self::Future {
        self.asked.notify_one();
        request.extensions_mut().insert(self.connection.clone());
        self.inner.call(request)
    }
}

/// Serves one request of a connection opened while the server stops, then
/// closes it (or drops it at a hard stop).
async fn serve_one(
    stream: TcpStream,
    router: axum::Router,
    header_timeout: Duration,
    stops: &Stops,
) {
    let service = TowerToHyperService::new(router);
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = stops.hard.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_sockets_send_without_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert!(!server.nodelay().unwrap(), "sockets start with Nagle on");
        prepare(&server);
        assert!(server.nodelay().unwrap());
    }

    #[test]
    fn the_connection_cap_stays_below_the_descriptor_limit() {
        let limit = descriptor_limit().expect("a descriptor limit");
        assert!(effective_cap(usize::MAX) <= limit / 2);
        assert_eq!(effective_cap(3), 3.min(limit / 2).max(1));
    }
}
