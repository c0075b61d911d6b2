//! Progress, audited requests and durable outcome events (R19, R24, R36):
//! what an [`EventSink`] receives, and the event channel of one running
//! call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::context::CallContext;
use crate::outcome::Settlement;

/// One progress update of a running call.
#[derive(Debug, Clone, Serialize)]
pub struct ProgressEvent {
    /// The call reporting.
    pub context: CallContext,
    /// The effective tool name.
    pub tool: String,
    /// The update, a JSON object; it replaces the previous one.
    pub update: Value,
}

/// One outbound HTTP request of a running call, for the audit trail (R36).
/// Never bodies, queries or headers: they may carry secrets.
#[derive(Debug, Clone, Serialize)]
pub struct RequestEvent {
    /// The call that made it.
    pub context: CallContext,
    /// The effective tool name.
    pub tool: String,
    /// The HTTP method.
    pub method: String,
    /// `scheme://host:port`.
    pub origin: String,
    /// The path, without the query.
    pub path: String,
    /// The response status, if a response came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed or was refused, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    /// From the request to the end of its response, in milliseconds.
    pub duration_ms: f64,
}

/// Why a sink could not record an outcome durably.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// The future [`EventSink::outcome`] returns: ready once the outcome is
/// durable.
pub type SinkFuture<'a> = Pin<Box<dyn Future<Output = Result<(), SinkError>> + Send + 'a>>;

/// Receives events from settlement. Both methods run on the settling task:
/// they must not block. `progress` is fire-and-forget; `outcome` returns a
/// future that settlement awaits, so `toolhost::Snapshot::settle` returns only
/// once the outcome is recorded.
pub trait EventSink: Send + Sync {
    /// A running call reported progress.
    fn progress(&self, event: &ProgressEvent) {
        let _ = event;
    }

    /// A running call made (or was refused) an outbound HTTP request; the
    /// event is recorded before the call's outcome.
    fn request(&self, event: &RequestEvent) {
        let _ = event;
    }

    /// A call settled: record its durable outcome. A failure here turns the
    /// settlement into an operational failure naming the sink.
    fn outcome<'a>(&'a self, settlement: &'a Settlement) -> SinkFuture<'a> {
        let _ = settlement;
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The event channel of one call: keeps the last progress update and
/// forwards each, and each audited request, to the sinks. Only a running
/// call holds one, so progress from outside a call cannot exist (R24).
#[derive(Clone)]
pub struct CallEvents {
    inner: Arc<ProgressInner>,
}

struct ProgressInner {
    context: CallContext,
    tool: String,
    /// The host's sink, the store's, and the call's own, each if any.
    sinks: [Option<Arc<dyn EventSink>>; 3],
    state: Mutex<ProgressState>,
}

#[derive(Default)]
struct ProgressState {
    last: Option<Value>,
    warnings: Vec<String>,
}

impl fmt::Debug for CallEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallEvents")
            .field("context", &self.inner.context)
            .field("tool", &self.inner.tool)
            .finish_non_exhaustive()
    }
}

impl CallEvents {
    /// The events of one call of `tool`: progress and audited requests go
    /// to each sink given (the host's, the store's, the call's own).
    pub fn new(
        context: CallContext,
        tool: String,
        host_sink: Option<Arc<dyn EventSink>>,
        store_sink: Option<Arc<dyn EventSink>>,
        call_sink: Option<Arc<dyn EventSink>>,
    ) -> Self {
        CallEvents {
            inner: Arc::new(ProgressInner {
                context,
                tool,
                sinks: [host_sink, store_sink, call_sink],
                state: Mutex::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        // Only replaced or appended under the lock: poison is harmless.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `update` (a JSON object) as the latest and forwards it.
    pub fn report(&self, update: Value) {
        if !update.is_object() {
            self.reject("a progress update that is not a JSON object was dropped".into());
            return;
        }
        self.lock().last = Some(update.clone());
        let event = ProgressEvent {
            context: self.inner.context.clone(),
            tool: self.inner.tool.clone(),
            update,
        };
        for sink in self.inner.sinks.iter().flatten() {
            sink.progress(&event);
        }
    }

    /// Forwards an audited request to the sinks.
    pub fn request(&self, event: &RequestEvent) {
        for sink in self.inner.sinks.iter().flatten() {
            sink.request(event);
        }
    }

    /// The call's identity and tool, for events about it.
    pub fn call(&self) -> (&CallContext, &str) {
        (&self.inner.context, &self.inner.tool)
    }

    /// Notes a dropped update once per distinct reason.
    pub fn reject(&self, warning: String) {
        let mut state = self.lock();
        if !state.warnings.contains(&warning) {
            state.warnings.push(warning);
        }
    }

    /// The last update and the warnings collected.
    pub fn finish(&self) -> (Option<Value>, Vec<String>) {
        let mut state = self.lock();
        (state.last.take(), std::mem::take(&mut state.warnings))
    }
}
