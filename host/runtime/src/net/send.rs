//! Sending one guest request: grant, rules, budget, DNS with the address
//! check, connect, TLS, HTTP/1.1 — each step bounded by the call's deadline
//! and cancellation — then bodies counted against their caps, and one
//! audit event when the exchange ends.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use crate::config::http::HttpGrant;
use crate::config::networks::{is_internal, row_of};
use crate::model::approval::PermissionRequest;
use crate::model::event::RequestEvent;
use crate::net::{CallHttp, path};
use crate::permission::Effect;

/// The longest a connection may take to open, within the call's deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a server may take to start answering, within the deadline.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);

type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;

/// Where a request goes.
struct Target {
    method: String,
    scheme: String,
    host: String,
    port: u16,
    /// Normalised: what grants and rules match, and what is sent.
    path: String,
    query: Option<String>,
}

impl Target {
    fn of(request: &http::Request<()>) -> Result<Target, Error> {
        let uri = request.uri();
        let invalid = || Error::HttpRequestUriInvalid;
        let scheme = uri.scheme_str().ok_or_else(invalid)?.to_ascii_lowercase();
        let default_port = if scheme == "https" { 443 } else { 80 };
        let path = path::normalized(uri.path()).map_err(|why| {
            tracing::debug!(path = uri.path(), %why, "refused a request path");
            Error::HttpRequestDenied
        })?;
        Ok(Target {
            method: request.method().as_str().to_owned(),
            host: uri
                .host()
                .ok_or_else(invalid)?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: uri.port_u16().unwrap_or(default_port),
            path,
            query: uri.query().map(str::to_owned),
            scheme,
        })
    }

    /// The origin-form request target sent: the normalised path and the
    /// query as given.
    fn origin_form(&self) -> Result<http::Uri, Error> {
        let target = match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        };
        target.parse().map_err(|_| Error::HttpRequestUriInvalid)
    }

    fn origin(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// Sends `request` for the call, or says why not.
pub(super) async fn send(
    call: Arc<CallHttp>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, Io), Error> {
    // The guest writes its body while the host decides: a refused request
    // still takes its writes, so the guest hears why it was refused (the
    // response's error), not that its body's stream broke.
    let (parts, body) = request.into_parts();
    let body = Unsent::new(body, &call);
    let request = http::Request::from_parts(parts, ());
    let target = Target::of(&request)?;
    let exchange = Arc::new(Exchange::new(call.clone(), &target));
    let attempt = exchange_with(&call, &target, request, body, options, &exchange);
    let outcome = tokio::select! {
        biased;
        () = call.cancel.cancelled() => Err(Error::ConnectionTerminated),
        r = tokio::time::timeout_at(call.deadline.into(), attempt) => {
            r.unwrap_or(Err(Error::ConnectionTimeout))
        }
    };
    if let Err(e) = &outcome {
        exchange.fail(e);
    }
    outcome
}

async fn exchange_with(
    call: &Arc<CallHttp>,
    target: &Target,
    request: http::Request<()>,
    body: Unsent,
    options: Option<RequestOptions>,
    exchange: &Arc<Exchange>,
) -> Result<(http::Response<WasiBody>, Io), Error> {
    let grant = allowed(call, target).await?;
    if !call.count_request() {
        return Err(Error::ConnectionLimitReached);
    }
    let permit = call
        .open
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Error::ConnectionLimitReached)?;
    *lock(&exchange.permit) = Some(permit);
    let addrs = resolve(target, grant).await?;
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .map_or(CONNECT_TIMEOUT, |t| t.min(CONNECT_TIMEOUT));
    let stream = connect(&addrs, connect_timeout).await?;
    let stream = secure(call, target, stream).await?;
    let first_byte = options
        .and_then(|o| o.first_byte_timeout)
        .map_or(FIRST_BYTE_TIMEOUT, |t| t.min(FIRST_BYTE_TIMEOUT));
    // Origin-form on the wire, as matched; the host header carries the
    // authority.
    let (mut parts, ()) = request.into_parts();
    parts.uri = target.origin_form()?;
    let request = http::Request::from_parts(parts, body.take());
    http1(call, stream, request, exchange, first_byte).await
}

/// A request body not sent (yet): dropped unsent, it goes on taking the
/// guest's writes until the guest finishes it (within the call's byte
/// budget and life), so the guest is never cut off mid-write.
struct Unsent {
    body: Option<WasiBody>,
    cancel: tokio_util::sync::CancellationToken,
    max: u64,
}

impl Unsent {
    fn new(body: WasiBody, call: &CallHttp) -> Unsent {
        Unsent {
            body: Some(body),
            cancel: call.cancel.clone(),
            max: call.limits.max_request_bytes,
        }
    }

    fn take(mut self) -> WasiBody {
        self.body.take().expect("taken once")
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if let Some(body) = self.body.take() {
            drain_guest_writes(body, self.cancel.clone(), self.max);
        }
    }
}

/// Takes what the guest still writes to `body` and drops it: at most `max`
/// bytes, and no longer than the call lives.
fn drain_guest_writes(mut body: WasiBody, cancel: tokio_util::sync::CancellationToken, max: u64) {
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let mut left = max;
        let drain = async {
            while let Some(Ok(frame)) = body.frame().await {
                let n = frame.data_ref().map_or(0, |d| d.len() as u64);
                let Some(after) = left.checked_sub(n) else {
                    break;
                };
                left = after;
            }
        };
        tokio::select! {
            () = drain => {}
            () = cancel.cancelled() => {}
        }
    });
}

/// The grant that covers the request, after the permission rules (action
/// `http`, resource `<METHOD> <URL>`) had their say; no rule is a yes.
async fn allowed<'a>(call: &'a CallHttp, target: &Target) -> Result<&'a HttpGrant, Error> {
    let grant = call
        .grants
        .iter()
        .find(|g| {
            g.covers(
                &target.method,
                &target.scheme,
                &target.host,
                target.port,
                &target.path,
            )
        })
        .ok_or(Error::HttpRequestDenied)?;
    let resource = format!("{} {}{}", target.method, target.origin(), target.path);
    let (context, tool) = call.events.call();
    let request = PermissionRequest {
        context: context.clone(),
        plugin: call.plugin.clone(),
        tool: tool.to_owned(),
        action: "http".into(),
        resources: vec![resource.clone()],
        save: vec![resource],
        metadata: None,
    };
    call.policy
        .decide_unmatched(&request, call.approver.as_ref(), Effect::Allow)
        .await
        .map_err(|_| Error::HttpRequestDenied)?;
    Ok(grant)
}

/// The addresses of the host that the grant may reach: resolved once, and
/// only these are connected to (no second lookup a name could answer
/// differently).
async fn resolve(target: &Target, grant: &HttpGrant) -> Result<Vec<SocketAddr>, Error> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|_| Error::DnsError {
            rcode: None,
            info_code: None,
        })?
        .collect();
    checked(found, grant)
}

/// Every address found, checked: internal ones stay only when the grant
/// names that IP or `localhost` (R36).
fn checked(found: Vec<SocketAddr>, grant: &HttpGrant) -> Result<Vec<SocketAddr>, Error> {
    if found.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    let allowed: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| reachable(a.ip(), grant))
        .collect();
    if allowed.is_empty() {
        return Err(Error::DestinationIpProhibited);
    }
    Ok(allowed)
}

fn reachable(ip: IpAddr, grant: &HttpGrant) -> bool {
    if !is_internal(ip) || grant.may_reach(ip) {
        return true;
    }
    if let Some(row) = row_of(ip) {
        tracing::debug!(%ip, %grant, block = %row.net, name = row.name, rfc = row.rfc, "refused an internal address");
    }
    false
}

async fn connect(addrs: &[SocketAddr], timeout: Duration) -> Result<TcpStream, Error> {
    let mut last = Error::ConnectionRefused;
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = Error::Connect(e),
            Err(_) => last = Error::ConnectionTimeout,
        }
    }
    Err(last)
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// TLS for `https`, verified against the host's roots.
async fn secure(
    call: &CallHttp,
    target: &Target,
    tcp: TcpStream,
) -> Result<Box<dyn Stream>, Error> {
    if target.scheme != "https" {
        return Ok(Box::new(tcp));
    }
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let connector = tokio_rustls::TlsConnector::from(call.tls.clone());
    let tls = connector.connect(name, tcp).await.map_err(Error::Tls)?;
    Ok(Box::new(tls))
}

/// Sends the request over HTTP/1.1 and wraps both bodies in counters.
async fn http1(
    call: &CallHttp,
    stream: Box<dyn Stream>,
    request: http::Request<WasiBody>,
    exchange: &Arc<Exchange>,
    first_byte: Duration,
) -> Result<(http::Response<WasiBody>, Io), Error> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(Error::Hyper)?;
    // The connection must run while the request is sent: drive it in a
    // task of its own, which ends with the call.
    let cancel = call.cancel.clone();
    let driver = tokio::spawn(async move {
        tokio::select! {
            done = connection => done.map_err(Error::Hyper),
            () = cancel.cancelled() => Ok(()),
        }
    });
    let io: Io = Box::new(async move {
        driver
            .await
            .unwrap_or_else(|e| Err(Error::InternalError(Some(e.to_string()))))
    });
    let (parts, body) = request.into_parts();
    let body = Counted::new(body, exchange.clone(), Direction::Sent).boxed_unsync();
    let sending = sender.send_request(http::Request::from_parts(parts, body));
    let response = tokio::time::timeout(first_byte, sending)
        .await
        .map_err(|_| Error::HttpResponseTimeout)?
        .map_err(Error::Hyper)?;
    *lock(&exchange.status) = Some(response.status().as_u16());
    let response = response.map(|body| {
        let body = body.map_err(Error::Hyper).boxed_unsync();
        Counted::new(body, exchange.clone(), Direction::Received).boxed_unsync()
    });
    Ok((response, io))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain slots, set once: poison is harmless.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One request and its response, audited when both bodies are done.
struct Exchange {
    call: Arc<CallHttp>,
    method: String,
    origin: String,
    path: String,
    started: Instant,
    sent: AtomicU64,
    received: AtomicU64,
    status: Mutex<Option<u16>>,
    error: Mutex<Option<String>>,
    /// A slot of the call's concurrency, held until the exchange ends.
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Exchange {
    fn new(call: Arc<CallHttp>, target: &Target) -> Exchange {
        Exchange {
            call,
            method: target.method.clone(),
            origin: target.origin(),
            path: target.path.clone(),
            started: Instant::now(),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            status: Mutex::new(None),
            error: Mutex::new(None),
            permit: Mutex::new(None),
        }
    }

    fn fail(&self, e: &Error) {
        lock(&self.error).get_or_insert_with(|| format!("{e:?}"));
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let (context, tool) = self.call.events.call();
        let event = RequestEvent {
            context: context.clone(),
            tool: tool.to_owned(),
            method: self.method.clone(),
            origin: self.origin.clone(),
            path: self.path.clone(),
            status: *lock(&self.status),
            error: lock(&self.error).take(),
            bytes_sent: self.sent.load(Ordering::Relaxed),
            bytes_received: self.received.load(Ordering::Relaxed),
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
        };
        self.call.events.request(&event);
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Sent,
    Received,
}

/// A body whose bytes are counted for the call and capped per request.
struct Counted {
    inner: WasiBody,
    exchange: Arc<Exchange>,
    direction: Direction,
    bytes: u64,
}

impl Counted {
    fn new(inner: WasiBody, exchange: Arc<Exchange>, direction: Direction) -> Counted {
        Counted {
            inner,
            exchange,
            direction,
            bytes: 0,
        }
    }

    /// Counts `n` bytes; the error past the cap.
    fn count(&mut self, n: u64) -> Result<(), Error> {
        self.bytes += n;
        let call = &self.exchange.call;
        let (limit, total, own) = match self.direction {
            Direction::Sent => (
                call.limits.max_request_bytes,
                &call.sent,
                &self.exchange.sent,
            ),
            Direction::Received => (
                call.limits.max_response_bytes,
                &call.received,
                &self.exchange.received,
            ),
        };
        total.fetch_add(n, Ordering::Relaxed);
        own.fetch_add(n, Ordering::Relaxed);
        if self.bytes <= limit {
            return Ok(());
        }
        let e = match self.direction {
            Direction::Sent => Error::HttpRequestBodySize(Some(limit)),
            Direction::Received => Error::HttpResponseBodySize(Some(limit)),
        };
        self.exchange.fail(&e);
        Err(e)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // hyper may drop a request body it will not send (a GET's empty
        // body) before the guest has finished writing it: keep taking the
        // guest's writes until it does, so they do not fail.
        if matches!(self.direction, Direction::Sent) {
            let rest = std::mem::replace(
                &mut self.inner,
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            );
            let call = &self.exchange.call;
            drain_guest_writes(rest, call.cancel.clone(), call.limits.max_request_bytes);
        }
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Err(e) = self.count(data.len() as u64)
        {
            return Poll::Ready(Some(Err(e)));
        }
        if let Poll::Ready(Some(Err(e))) = &polled {
            self.exchange.fail(e);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(ips: &[&str]) -> Vec<SocketAddr> {
        ips.iter()
            .map(|ip| SocketAddr::new(ip.parse().unwrap(), 80))
            .collect()
    }

    #[test]
    fn r36_only_the_checked_addresses_of_a_name_are_kept() {
        let by_name: HttpGrant = "http://api.example.com/*".parse().unwrap();
        let mixed = addrs(&[
            "10.0.0.1",
            "93.184.216.34",
            "64:ff9b::a9fe:a9fe",
            "2606:4700::1",
        ]);
        assert_eq!(
            checked(mixed, &by_name).unwrap(),
            addrs(&["93.184.216.34", "2606:4700::1"])
        );
        let internal = addrs(&["198.18.0.1", "::ffff:127.0.0.1", "2002:7f00:1::"]);
        assert!(matches!(
            checked(internal, &by_name),
            Err(Error::DestinationIpProhibited)
        ));
        assert!(matches!(
            checked(Vec::new(), &by_name),
            Err(Error::DestinationNotFound)
        ));
        let literal: HttpGrant = "http://198.18.0.1/*".parse().unwrap();
        assert_eq!(
            checked(addrs(&["198.18.0.1"]), &literal).unwrap(),
            addrs(&["198.18.0.1"])
        );
    }
}
