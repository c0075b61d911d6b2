//! Which tool calls the server takes on, and how it stops (R37): a bounded
//! number per session and waiting in all, the server's slots shared fairly
//! between sessions, every call task tracked so that a stop waits for
//! their outcomes, and a count of outcomes the event sink could not record.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::model::ErrorData;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::metrics::Metrics;
use crate::results::BUSY_ERROR_CODE;
use toolhost::slots::{FairSlots, SlotPermit};
use toolhost::{
    Outcome, Settlement,
    outcome::{Culprit, FaultKind},
};

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
    /// Every call's settling work, polled by its request or in a task.
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

    /// A call's settling work, counted where a stop can wait for it; the
    /// request that waits for the call polls it (see [`Settling`]). Work
    /// that does not end in its first poll moves to `offload`'s runtime,
    /// when given.
    pub(crate) fn settling<F>(&self, work: F, offload: Option<Handle>) -> Settling
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Settling {
            work: Work::Here(Box::pin(work)),
            tasks: self.tasks.clone(),
            offload,
            _counted: self.tasks.token(),
        }
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

/// A call's settling work, polled in the task of the request that waits
/// for it rather than in a task of its own: handing a call to another task
/// and its result back took two more of tokio's hand-offs per call, after
/// which tokio wakes an idle worker thread to share the work, a wake-up on
/// the path of every reply. If the request is dropped before the work ends,
/// the rest moves into a task of its own, so the call's outcome is recorded
/// however its request ends.
///
/// Where the requests run on a front door's thread of their own (stdio),
/// work still pending after its first poll (a tool that computes past a
/// fuel yield, or waits) moves to the tool runtime's workers, so calls
/// that take time run in parallel while a call that ends at once never
/// leaves the front door's thread.
pub(crate) struct Settling {
    work: Work,
    tasks: TaskTracker,
    /// The runtime that pending work moves to; none: it stays here.
    offload: Option<Handle>,
    /// Counts the work among the tracker's tasks while it is polled here.
    _counted: TaskTrackerToken,
}

/// Where a call's settling work is.
enum Work {
    /// Polled by the request's own task.
    Here(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// Moved to a task of its own on the offload runtime.
    Moved(JoinHandle<()>),
    Done,
}

impl Settling {
    /// Moves pending work to a task on `offload`'s runtime.
    fn offload(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(handle) = &self.offload else {
            return Poll::Pending;
        };
        let work = match std::mem::replace(&mut self.work, Work::Done) {
            Work::Here(work) => work,
            moved_or_done => {
                self.work = moved_or_done;
                return Poll::Pending;
            }
        };
        let mut moved = self.tasks.spawn_on(work, handle);
        // Polled once here so the task's end wakes this request.
        let polled = Pin::new(&mut moved).poll(cx).map(|_| ());
        self.work = Work::Moved(moved);
        polled
    }
}

impl Future for Settling {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let polled = match &mut self.work {
            Work::Here(work) => work.as_mut().poll(cx),
            // A panic in the work ends it like a return: the request then
            // hears the call ended without a step.
            Work::Moved(moved) => Pin::new(moved).poll(cx).map(|_| ()),
            Work::Done => return Poll::Ready(()),
        };
        if polled.is_ready() {
            self.work = Work::Done;
            return Poll::Ready(());
        }
        self.offload(cx)
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        let Work::Here(work) = std::mem::replace(&mut self.work, Work::Done) else {
            // A moved task goes on by itself, counted by the tracker.
            return;
        };
        // Counted by the tracker from here on; the token drops after.
        match &self.offload {
            Some(handle) => drop(self.tasks.spawn_on(work, handle)),
            None if Handle::try_current().is_ok() => drop(self.tasks.spawn(work)),
            None => {}
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    /// Polls `settling` once, as a request that is then dropped would.
    async fn poll_once(settling: &mut Settling) -> Poll<()> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *settling).poll(cx))).await
    }

    #[tokio::test]
    async fn a_stop_counts_settling_work_while_its_request_polls_it() {
        let admission = Admission::new();
        let (go, gone) = tokio::sync::oneshot::channel::<()>();
        let mut settling = admission.settling(
            async move {
                let _ = gone.await;
            },
            None,
        );
        assert!(poll_once(&mut settling).await.is_pending());
        assert_eq!(admission.tasks.len(), 1);
        go.send(()).expect("the work waits");
        tokio::time::timeout(Duration::from_secs(10), &mut settling)
            .await
            .expect("the work ends once let go");
        drop(settling);
        assert_eq!(admission.tasks.len(), 0);
    }

    #[tokio::test]
    async fn settling_work_dropped_unfinished_finishes_in_a_task_of_its_own() {
        let admission = Admission::new();
        let finished = Arc::new(AtomicBool::new(false));
        let (go, gone) = tokio::sync::oneshot::channel::<()>();
        let mut settling = admission.settling(
            {
                let finished = finished.clone();
                async move {
                    let _ = gone.await;
                    finished.store(true, Ordering::SeqCst);
                }
            },
            None,
        );
        assert!(poll_once(&mut settling).await.is_pending());
        drop(settling);
        assert_eq!(admission.tasks.len(), 1, "the work moved to a task");
        go.send(()).expect("the moved work still waits");
        admission.tasks.close();
        tokio::time::timeout(Duration::from_secs(10), admission.tasks.wait())
            .await
            .expect("a stop sees the moved work end");
        assert!(finished.load(Ordering::SeqCst));
    }

    /// Work that reports the name of the thread its last step ran on;
    /// with `first_step_waits`, it is pending after its first poll; with
    /// `gate`, it waits for it before that step.
    fn where_it_ran(
        first_step_waits: bool,
        gate: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> (
        impl Future<Output = ()> + Send,
        tokio::sync::oneshot::Receiver<String>,
    ) {
        let (ran, on) = tokio::sync::oneshot::channel();
        let work = async move {
            if first_step_waits {
                tokio::task::yield_now().await;
            }
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            let thread = std::thread::current().name().unwrap_or_default().to_owned();
            let _ = ran.send(thread);
        };
        (work, on)
    }

    #[tokio::test]
    async fn settling_work_pending_after_its_first_poll_moves_to_the_offload_runtime() {
        let offload = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("offload")
            .build()
            .expect("a runtime");
        let admission = Admission::new();
        let here = std::thread::current().name().unwrap_or_default().to_owned();
        let (at_once, ran) = where_it_ran(false, None);
        let settling = admission.settling(at_once, Some(offload.handle().clone()));
        tokio::time::timeout(Duration::from_secs(10), settling)
            .await
            .expect("work that ends at once ends");
        assert_eq!(ran.await.expect("it ran"), here, "it never left");

        let (waits, ran) = where_it_ran(true, None);
        let settling = admission.settling(waits, Some(offload.handle().clone()));
        tokio::time::timeout(Duration::from_secs(10), settling)
            .await
            .expect("moved work wakes its request when it ends");
        assert_eq!(ran.await.expect("it ran"), "offload");

        // Held at its gate, so it is still running when its request goes.
        let (go, gate) = tokio::sync::oneshot::channel();
        let (waits, ran) = where_it_ran(false, Some(gate));
        let mut settling = admission.settling(waits, Some(offload.handle().clone()));
        assert!(poll_once(&mut settling).await.is_pending());
        drop(settling);
        go.send(()).expect("the moved work waits at its gate");
        let ran = tokio::time::timeout(Duration::from_secs(10), ran).await;
        assert_eq!(ran.expect("in time").expect("it ran"), "offload");
        admission.tasks.close();
        tokio::time::timeout(Duration::from_secs(10), admission.tasks.wait())
            .await
            .expect("a stop sees the moved work end");
        offload.shutdown_background();
    }
}
