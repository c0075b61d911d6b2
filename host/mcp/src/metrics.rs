//! What `toolhost serve` tells Prometheus (`/metrics`): calls by tool and
//! status, how long they ran and waited for a slot, what is in flight, the
//! sessions, the store's latency and errors, and the HTTP requests by
//! status. On `prometheus-client`, the official Rust client: typed metric
//! families and a registry of our own (no global one). Every label comes
//! from a fixed set, except `tool`, which is one of the tools the server
//! serves (at most [`MAX_TOOL_LABELS`] of them; any other name is
//! `other`): never a session, a caller or a call id.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};

use toolhost::CallContext;
use toolhost::Location;
use toolhost::Settlement;
use toolhost::store::{
    Claim, InputDigest, OutcomeFilter, Recorded, Store, StoreEvent, StoreFuture, StoredOutput,
};

/// Distinct tool names the metrics label calls with; calls of tools past
/// it (and of tools the server does not serve) are labelled `other`, so a
/// server that loads many tools, or clients that call made-up names,
/// cannot grow the metrics without end.
pub const MAX_TOOL_LABELS: usize = 256;

/// The `tool` label of calls of no tool the server serves.
const OTHER_TOOL: &str = "other";

/// Bucket bounds of call durations and queue waits, in seconds: 1 ms to
/// about 65 s, doubling.
const CALL_BUCKETS: (f64, f64, u16) = (0.001, 2.0, 17);

/// Bucket bounds of store operations, in seconds: 0.1 ms to about 3 s,
/// doubling.
const STORE_BUCKETS: (f64, f64, u16) = (0.0001, 2.0, 16);

/// The content type of the OpenMetrics text `/metrics` serves.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: &'static str,
    code: u16,
}

/// What a store operation is, as the `operation` label says it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StoreOp {
    Claim,
    Record,
    Event,
    Retain,
    Output,
    OutputsOf,
    SaveAnswers,
    Answers,
    Outcomes,
    Ready,
}

impl StoreOp {
    fn label(self) -> &'static str {
        match self {
            StoreOp::Claim => "claim",
            StoreOp::Record => "record",
            StoreOp::Event => "event",
            StoreOp::Retain => "retain",
            StoreOp::Output => "output",
            StoreOp::OutputsOf => "outputs_of",
            StoreOp::SaveAnswers => "save_answers",
            StoreOp::Answers => "answers",
            StoreOp::Outcomes => "outcomes",
            StoreOp::Ready => "ready",
        }
    }
}

/// The routes the `route` label of HTTP requests names; anything else is
/// `other`.
pub(crate) fn route_label(path: &str) -> &'static str {
    match path {
        "/mcp" => "mcp",
        "/healthz" => "healthz",
        "/readyz" => "readyz",
        "/metrics" => "metrics",
        _ => "other",
    }
}

/// A server's metrics. Cheap to clone: clones share the counts. Give one to
/// [`McpServer::with_metrics`](crate::McpServer::with_metrics) and to a [`MeteredStore`] to count the
/// store's operations too.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

struct Inner {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_duration: Family<ToolLabel, Histogram>,
    queue_wait: Histogram,
    in_flight: Gauge,
    waiting: Gauge,
    slots_in_use: Gauge,
    sessions: Gauge,
    workers: Gauge,
    store_duration: Family<OperationLabel, Histogram>,
    store_errors: Family<OperationLabel, Counter>,
    http_requests: Family<HttpLabels, Counter>,
    /// The tool names given out as labels.
    tools: Mutex<HashSet<String>>,
    /// Where the served tools are, to tell a served tool from a made-up
    /// name.
    served: OnceLock<Location>,
}

fn call_histogram() -> Histogram {
    let (start, factor, n) = CALL_BUCKETS;
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        start, factor, n,
    ))
}

fn store_histogram() -> Histogram {
    let (start, factor, n) = STORE_BUCKETS;
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        start, factor, n,
    ))
}

/// Registers `metric` in `registry` and gives it back (a clone shares its
/// values).
fn add<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// As [`add`], for a metric in seconds.
fn add_seconds<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register_with_unit(name, help, Unit::Seconds, metric.clone());
    metric
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Metrics with every count at zero.
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("toolhost");
        let inner = Inner {
            calls: add(
                &mut r,
                "calls",
                "Tool calls settled, by tool and status (completed, error, interrupted, defect)",
                Family::default(),
            ),
            call_duration: add_seconds(
                &mut r,
                "call_duration",
                "How long settled calls ran, from settling to the end of execution (replays not counted)",
                Family::new_with_constructor(call_histogram as fn() -> _),
            ),
            queue_wait: add_seconds(
                &mut r,
                "queue_wait",
                "How long calls waited for one of the server's slots",
                call_histogram(),
            ),
            in_flight: add(
                &mut r,
                "calls_in_flight",
                "Tool calls taken on and not yet settled: running, waiting for a slot or for a permission answer",
                Gauge::default(),
            ),
            waiting: add(
                &mut r,
                "calls_waiting",
                "Tool calls waiting for a slot",
                Gauge::default(),
            ),
            slots_in_use: add(
                &mut r,
                "slots_in_use",
                "The server's call slots in use (MAX_CALLS_IN_FLIGHT in all)",
                Gauge::default(),
            ),
            sessions: add(&mut r, "sessions", "Open HTTP sessions", Gauge::default()),
            workers: add(
                &mut r,
                "workers",
                "The async runtime's threads that handle requests and run calls (serve --workers)",
                Gauge::default(),
            ),
            store_duration: add_seconds(
                &mut r,
                "store_duration",
                "How long store operations took, by operation",
                Family::new_with_constructor(store_histogram as fn() -> _),
            ),
            store_errors: add(
                &mut r,
                "store_errors",
                "Store operations that failed, by operation",
                Family::default(),
            ),
            http_requests: add(
                &mut r,
                "http_requests",
                "HTTP requests answered, by route (mcp, healthz, readyz, metrics, other) and status code",
                Family::default(),
            ),
            tools: Mutex::default(),
            served: OnceLock::new(),
            registry: r,
        };
        Metrics {
            inner: Arc::new(inner),
        }
    }

    /// Where the tools are whose names may be labels (the first location
    /// given stays).
    pub(crate) fn serve(&self, location: &Location) {
        let _ = self.inner.served.set(location.clone());
    }

    /// The `tool` label of a call of `tool`: its name if the server serves
    /// it and the labels have room, else `other`.
    fn tool_label(&self, tool: &str) -> String {
        let mut tools = self.inner.tools.lock().unwrap_or_else(|e| e.into_inner());
        if tools.contains(tool) {
            return tool.to_owned();
        }
        let served = self
            .inner
            .served
            .get()
            .is_some_and(|location| location.snapshot().tool(tool).is_some());
        if served && tools.len() < MAX_TOOL_LABELS {
            tools.insert(tool.to_owned());
            return tool.to_owned();
        }
        OTHER_TOOL.to_owned()
    }

    /// Counts a settled call, and how long it ran.
    pub(crate) fn settled(&self, settlement: &Settlement) {
        let tool = self.tool_label(&settlement.tool);
        if !settlement.replayed {
            self.inner
                .call_duration
                .get_or_create(&ToolLabel { tool: tool.clone() })
                .observe(settlement.usage.wall_time.as_secs_f64());
        }
        self.inner
            .calls
            .get_or_create(&CallLabels {
                tool,
                status: settlement.outcome.status().as_str(),
            })
            .inc();
    }

    pub(crate) fn admitted(&self) {
        self.inner.in_flight.inc();
    }

    pub(crate) fn released(&self) {
        self.inner.in_flight.dec();
    }

    pub(crate) fn queued(&self) {
        self.inner.waiting.inc();
    }

    /// A call stopped waiting for a slot after `waited`.
    pub(crate) fn dequeued(&self, waited: Duration) {
        self.inner.waiting.dec();
        self.inner.queue_wait.observe(waited.as_secs_f64());
    }

    /// A call got a slot without waiting.
    pub(crate) fn slot_at_once(&self) {
        self.inner.queue_wait.observe(0.0);
    }

    /// Counts an HTTP response.
    pub(crate) fn http_request(&self, route: &'static str, code: u16) {
        self.inner
            .http_requests
            .get_or_create(&HttpLabels { route, code })
            .inc();
    }

    pub(crate) fn store_op(&self, op: StoreOp, took: Duration, failed: bool) {
        let label = OperationLabel {
            operation: op.label(),
        };
        self.inner
            .store_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        if failed {
            self.inner.store_errors.get_or_create(&label).inc();
        }
    }

    /// The OpenMetrics text of every metric, with the slots in use, the
    /// sessions and the runtime's workers sampled now.
    pub(crate) fn encode(&self, slots_in_use: usize, sessions: usize) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.slots_in_use.set(gauge(slots_in_use));
        self.inner.sessions.set(gauge(sessions));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            self.inner
                .workers
                .set(gauge(runtime.metrics().num_workers()));
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.inner.registry).is_err() {
            tracing::error!("cannot encode the metrics");
        }
        text
    }
}

/// A store whose operations are timed and whose failures are counted in
/// [`Metrics`] (`toolhost_store_duration_seconds`,
/// `toolhost_store_errors_total`).
#[derive(Debug)]
pub struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Metrics,
}

impl MeteredStore {
    /// `inner`, counted in `metrics`.
    pub fn new(inner: Arc<dyn Store>, metrics: Metrics) -> MeteredStore {
        MeteredStore { inner, metrics }
    }

    fn timed<'a, T: Send + 'a>(
        &'a self,
        op: StoreOp,
        future: StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        Box::pin(async move {
            let started = Instant::now();
            let result = future.await;
            self.metrics
                .store_op(op, started.elapsed(), result.is_err());
            result
        })
    }
}

impl Store for MeteredStore {
    fn claim<'a>(
        &'a self,
        context: &'a CallContext,
        tool: &'a str,
        input: &'a InputDigest,
        lease: Duration,
    ) -> StoreFuture<'a, Claim> {
        self.timed(
            StoreOp::Claim,
            self.inner.claim(context, tool, input, lease),
        )
    }

    fn record<'a>(&'a self, settlement: &'a Settlement) -> StoreFuture<'a, ()> {
        self.timed(StoreOp::Record, self.inner.record(settlement))
    }

    fn runs_unclaimed(&self) -> bool {
        self.inner.runs_unclaimed()
    }

    fn record_unclaimed<'a>(
        &'a self,
        settlement: &'a Settlement,
        input: &'a InputDigest,
    ) -> StoreFuture<'a, ()> {
        self.timed(
            StoreOp::Record,
            self.inner.record_unclaimed(settlement, input),
        )
    }

    fn event(&self, event: StoreEvent) {
        let started = Instant::now();
        self.inner.event(event);
        self.metrics
            .store_op(StoreOp::Event, started.elapsed(), false);
    }

    fn retain<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        text: &'a [u8],
        quota: u64,
        retention: Duration,
    ) -> StoreFuture<'a, ()> {
        self.timed(
            StoreOp::Retain,
            self.inner.retain(id, session, text, quota, retention),
        )
    }

    fn output<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredOutput>> {
        self.timed(StoreOp::Output, self.inner.output(id))
    }

    fn outputs_of<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, u64)>> {
        self.timed(StoreOp::OutputsOf, self.inner.outputs_of(scope))
    }

    fn save_answers<'a>(
        &'a self,
        scope: &'a str,
        answers: &'a [(String, String)],
    ) -> StoreFuture<'a, ()> {
        self.timed(
            StoreOp::SaveAnswers,
            self.inner.save_answers(scope, answers),
        )
    }

    fn answers<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, String)>> {
        self.timed(StoreOp::Answers, self.inner.answers(scope))
    }

    fn outcomes<'a>(&'a self, filter: &'a OutcomeFilter) -> StoreFuture<'a, Vec<Recorded>> {
        self.timed(StoreOp::Outcomes, self.inner.outcomes(filter))
    }

    fn dropped_events(&self) -> u64 {
        self.inner.dropped_events()
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        // `/readyz` times its checks, those that time out too.
        self.inner.ready()
    }
}
