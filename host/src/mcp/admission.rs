//! Which tool calls the server takes on, and how it stops (R37): a bounded
//! number per session and waiting in all, the server's slots shared fairly
//! between sessions, every call task tracked so that a stop waits for
//! their outcomes, and a count of outcomes the event sink could not record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::ErrorData;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::mcp::metrics::Metrics;
use crate::mcp::results::BUSY_ERROR_CODE;
use crate::model::outcome::{Culprit, FaultKind, Outcome, Settlement};
use crate::wasm::slots::{FairSlots, SlotPermit};

/// Tool calls running at once across all sessions; more wait for a slot,
/// which is given to the sessions in turn, so one client cannot starve
/// another.
pub const MAX_CALLS_IN_FLIGHT: usize = 1024;

/// Tool calls one session may have running or waiting at once; beyond it
/// the session's calls are refused with an error saying so.
pub const MAX_CALLS_PER_SESSION: usize = 256;

/// Tool calls waiting for a slot across all sessions: each holds its input.
pub const MAX_CALLS_WAITING: usize = 4096;

/// How long a call waits for one of the server's slots before it is
/// refused as busy, without having run.
pub const MAX_SLOT_WAIT: Duration = Duration::from_secs(30);

/// How long a stopping server waits, after cancelling the calls still
/// running, for their outcomes to be recorded; what is left is counted
/// as lost.
pub const OUTCOME_FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// The calls the server has taken on.
pub(crate) struct Admission {
    slots: FairSlots,
    /// Calls running or waiting, per session.
    per_session: Mutex<HashMap<Arc<str>, usize>>,
    waiting: Arc<AtomicUsize>,
    /// Every call's settling task.
    tasks: TaskTracker,
    lost: AtomicUsize,
    /// Cancelled when the server begins to stop: no new calls.
    pub(crate) draining: CancellationToken,
    /// Cancelled when the calls still running must stop: every call's
    /// token is a child.
    pub(crate) stopping: CancellationToken,
    /// What `/metrics` counts; set once, before the first call.
    pub(crate) metrics: OnceLock<Metrics>,
}

/// A call the server took on: it counts against its session until dropped.
pub(crate) struct Admitted {
    admission: Arc<Admission>,
    session: Arc<str>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a plain counter update.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn busy(message: String) -> ErrorData {
    ErrorData::new(BUSY_ERROR_CODE, message, None)
}

impl Admission {
    pub(crate) fn new() -> Arc<Admission> {
        Arc::new(Admission {
            slots: FairSlots::new(MAX_CALLS_IN_FLIGHT),
            per_session: Mutex::default(),
            waiting: Arc::default(),
            tasks: TaskTracker::new(),
            lost: AtomicUsize::new(0),
            draining: CancellationToken::new(),
            stopping: CancellationToken::new(),
            metrics: OnceLock::new(),
        })
    }

    /// The metrics calls are counted in.
    pub(crate) fn metrics(&self) -> &Metrics {
        self.metrics.get_or_init(Metrics::new)
    }

    /// The server's slots in use now.
    pub(crate) fn slots_held(&self) -> usize {
        self.slots.held()
    }

    /// Takes on a call of `session`, or says why not.
    pub(crate) fn admit(self: &Arc<Self>, session: &str) -> Result<Admitted, ErrorData> {
        if self.draining.is_cancelled() {
            return Err(busy(
                "the server is stopping and takes no new calls; retry on another server or after it restarts".into(),
            ));
        }
        let mut counts = lock(&self.per_session);
        let count = counts.entry(session.into()).or_default();
        if *count >= MAX_CALLS_PER_SESSION {
            return Err(busy(format!(
                "this session already has {MAX_CALLS_PER_SESSION} tool calls running or waiting; retry when one has finished"
            )));
        }
        *count += 1;
        self.metrics().admitted();
        Ok(Admitted {
            admission: self.clone(),
            session: session.into(),
        })
    }

    /// Runs a call's settling task where a stop can wait for it.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(task);
    }

    /// Counts a settlement in the metrics, and as lost when the event sink
    /// could not record its outcome.
    pub(crate) fn settled(&self, settlement: &Settlement) {
        self.metrics().settled(settlement);
        if let Outcome::Defect {
            culprit: Culprit::Host(fault),
            ..
        } = &settlement.outcome
            && fault.kind == FaultKind::Sink
        {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Outcomes that could not be recorded: the sink failed, or a call did
    /// not end in time when the server stopped.
    pub(crate) fn lost(&self) -> usize {
        self.lost.load(Ordering::Relaxed)
    }

    /// Stops taking calls; lets those running finish within `grace`,
    /// cancels the rest and waits (bounded) until each has its outcome.
    pub(crate) async fn stop(&self, grace: Duration) {
        self.draining.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
        self.stopping.cancel();
        if tokio::time::timeout(OUTCOME_FLUSH_LIMIT, self.tasks.wait())
            .await
            .is_err()
        {
            let left = self.tasks.len();
            tracing::error!(
                "{left} tool calls did not end within {OUTCOME_FLUSH_LIMIT:?} of being cancelled; their outcomes are lost"
            );
            self.lost.fetch_add(left, Ordering::Relaxed);
        }
    }
}

impl Admitted {
    /// Waits for one of the server's slots, served to the sessions in
    /// turn. `None` when no slot came within [`MAX_SLOT_WAIT`] (or too
    /// many calls wait already); cancellation ends the wait with a slot-less
    /// `Some`, so the call settles at once as cancelled and its outcome is
    /// recorded.
    pub(crate) async fn slot(&self, cancel: &CancellationToken) -> Option<Option<SlotPermit>> {
        let metrics = self.admission.metrics();
        if let Some(permit) = self.admission.slots.try_acquire(&self.session) {
            metrics.slot_at_once();
            return Some(Some(permit));
        }
        let waiting = &self.admission.waiting;
        if waiting.fetch_add(1, Ordering::Relaxed) >= MAX_CALLS_WAITING {
            waiting.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let queued = Instant::now();
        metrics.queued();
        let slot = self.admission.slots.acquire(&self.session);
        let got = tokio::select! {
            permit = slot => Some(Some(permit)),
            () = cancel.cancelled() => Some(None),
            () = tokio::time::sleep(MAX_SLOT_WAIT) => None,
        };
        waiting.fetch_sub(1, Ordering::Relaxed);
        metrics.dequeued(queued.elapsed());
        got
    }

    /// The refusal of a call that got no slot.
    pub(crate) fn refusal() -> ErrorData {
        busy(format!(
            "the server already runs {MAX_CALLS_IN_FLIGHT} tool calls and no slot freed within {MAX_SLOT_WAIT:?}; retry later"
        ))
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.admission.metrics().released();
        let mut counts = lock(&self.admission.per_session);
        if let Some(count) = counts.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.session);
            }
        }
    }
}
