//! Outbound HTTP for plugins (R36): `wasi:http` is linked for every plugin,
//! and every request goes through the host's own client. Nothing is
//! reachable without an origin grant; names that resolve to loopback,
//! private or link-local addresses are refused unless the grant names that
//! IP or `localhost` (`config::networks` holds the special-purpose
//! registries that say which are internal); a request's path is normalised
//! before grants and rules see it, and sent as normalised (`path`);
//! permission rules can still deny or ask; each call has
//! a budget of requests, concurrency and body bytes, all within its
//! deadline; every request is an audited event under the call's ids.

mod path;
mod send;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use http::HeaderName;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use wasmtime_wasi_http::{
    DEFAULT_FORBIDDEN_HEADERS, Error, ForbiddenHeaderFilter, RequestOptions, WasiBody,
    WasiHttpHooks,
};

use crate::config::http::HttpGrant;
use crate::model::approval::Approver;
use crate::model::budget::{HttpLimits, Usage};
use crate::model::event::CallEvents;
use crate::permission::Policy;

/// Everything one call's requests are checked against, and what they used.
pub(crate) struct CallHttp {
    pub(crate) grants: Vec<HttpGrant>,
    pub(crate) limits: HttpLimits,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    pub(crate) deadline: Instant,
    /// Cancelled with the call (or when its store is dropped).
    pub(crate) cancel: CancellationToken,
    pub(crate) policy: Policy,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) plugin: String,
    pub(crate) events: CallEvents,
    open: Arc<Semaphore>,
    requests: AtomicU32,
    sent: AtomicU64,
    received: AtomicU64,
}

impl CallHttp {
    #[expect(clippy::too_many_arguments, reason = "one constructor, called once")]
    pub(crate) fn new(
        grants: Vec<HttpGrant>,
        limits: HttpLimits,
        tls: Arc<rustls::ClientConfig>,
        deadline: Instant,
        cancel: CancellationToken,
        policy: Policy,
        approver: Option<Arc<dyn Approver>>,
        plugin: String,
        events: CallEvents,
    ) -> CallHttp {
        CallHttp {
            open: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
            grants,
            limits,
            tls,
            deadline,
            cancel,
            policy,
            approver,
            plugin,
            events,
            requests: AtomicU32::new(0),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }
    }

    /// Counts one more request against the budget; false past it.
    fn count_request(&self) -> bool {
        self.requests.fetch_add(1, Ordering::Relaxed) < self.limits.max_requests
    }

    /// Adds what the call's requests used to `usage`.
    pub(crate) fn add_usage(&self, usage: &mut Usage) {
        usage.http_requests = self
            .requests
            .load(Ordering::Relaxed)
            .min(self.limits.max_requests);
        usage.http_bytes_sent = self.sent.load(Ordering::Relaxed);
        usage.http_bytes_received = self.received.load(Ordering::Relaxed);
    }
}

impl Drop for CallHttp {
    fn drop(&mut self) {
        // The store is gone: abort whatever is still connected.
        self.cancel.cancel();
    }
}

/// The `wasi:http` hooks of one store: a call's, or none at all (an
/// activation makes no requests).
#[derive(Default)]
pub(crate) struct HttpHooks(pub(crate) Option<Arc<CallHttp>>);

/// Headers a guest may not set: hop-by-hop ones, `Host` (the host sets it
/// from the URL) and any `Proxy-*`.
fn forbidden(name: &HeaderName) -> bool {
    DEFAULT_FORBIDDEN_HEADERS.contains(name)
        || name == http::header::HOST
        || name.as_str().starts_with("proxy-")
}

type Sent = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpHooks {
    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        Arc::new(forbidden)
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        drop(fut);
        match self.0.clone() {
            Some(call) => Box::new(send::send(call, request, options)),
            None => Box::new(async { Err(Error::HttpRequestDenied) }),
        }
    }
}
