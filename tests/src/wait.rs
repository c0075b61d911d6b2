//! Waiting on an event, never on the clock: a test that needs the other
//! side to have got somewhere waits for the sign that it has (a progress
//! update, an outcome, a file's line), always within a bound, so a broken
//! build fails with what it waited for instead of hanging.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use toolhost::Settlement;
use toolhost::events::{EventSink, ProgressEvent, RequestEvent, SinkFuture};

/// How long a test waits for any one event: far beyond what it takes on a
/// loaded machine, so reaching it means the event is not coming.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How often [`eventually`] and [`wait_until`] look again at a condition
/// nothing signals (another process's file, a process table).
const POLL: Duration = Duration::from_millis(20);

/// Awaits `event`, failing the test when it has not happened within
/// [`PATIENCE`].
pub async fn within<F: Future>(what: &str, event: F) -> F::Output {
    match tokio::time::timeout(PATIENCE, event).await {
        Ok(out) => out,
        Err(_) => panic!("waited {PATIENCE:?} for {what}"),
    }
}

/// Waits until `condition` holds, looking every 20 ms, for a state nothing
/// signals (what another process wrote, a snapshot's tools); fails the test
/// after [`PATIENCE`]. The pause is the poll's interval, not an ordering.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
}

/// Blocks until `done` holds or `limit` has passed, looking every 20 ms;
/// whether it held. For tests without a runtime, watching another process.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        // The poll's interval, not an ordering.
        std::thread::sleep(POLL);
    }
}

/// What a [`Recorder`] has been told, in order.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    pub progress: Vec<ProgressEvent>,
    pub requests: Vec<RequestEvent>,
    pub settled: Vec<Settlement>,
}

impl Recorded {
    /// Whether the call `call_id` has reported progress.
    pub fn progressed(&self, call_id: &str) -> bool {
        self.progress.iter().any(|e| e.context.call_id == call_id)
    }

    /// The recorded settlements of `tool`, in order.
    pub fn of(&self, tool: &str) -> Vec<Settlement> {
        self.settled
            .iter()
            .filter(|s| s.tool == tool)
            .cloned()
            .collect()
    }
}

/// An event sink (a host's or one call's) that records every event and
/// lets a test wait for the one it needs ([`Recorder::until`]).
#[derive(Debug)]
pub struct Recorder(watch::Sender<Recorded>);

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder(watch::Sender::new(Recorded::default()))
    }
}

impl EventSink for Recorder {
    fn progress(&self, event: &ProgressEvent) {
        self.0.send_modify(|r| r.progress.push(event.clone()));
    }

    fn request(&self, event: &RequestEvent) {
        self.0.send_modify(|r| r.requests.push(event.clone()));
    }

    fn outcome<'a>(&'a self, settlement: &'a Settlement) -> SinkFuture<'a> {
        self.0.send_modify(|r| r.settled.push(settlement.clone()));
        Box::pin(std::future::ready(Ok(())))
    }
}

impl Recorder {
    /// What it has recorded so far.
    pub fn recorded(&self) -> Recorded {
        self.0.borrow().clone()
    }

    /// The progress updates so far.
    pub fn progress(&self) -> Vec<ProgressEvent> {
        self.0.borrow().progress.clone()
    }

    /// The audited requests so far.
    pub fn requests(&self) -> Vec<RequestEvent> {
        self.0.borrow().requests.clone()
    }

    /// The settlements so far.
    pub fn settled(&self) -> Vec<Settlement> {
        self.0.borrow().settled.clone()
    }

    /// The settlements of `tool` so far, in order.
    pub fn of(&self, tool: &str) -> Vec<Settlement> {
        self.0.borrow().of(tool)
    }

    /// Waits (within [`PATIENCE`]) until what it recorded satisfies `done`.
    pub async fn until(&self, what: &str, mut done: impl FnMut(&Recorded) -> bool) {
        let mut seen = self.0.subscribe();
        within(what, seen.wait_for(|r| done(r)))
            .await
            .expect("the recorder outlives its receivers");
    }

    /// Waits until the call `call_id` has reported progress: it is running.
    pub async fn started(&self, call_id: &str) {
        self.until(&format!("call {call_id} to report progress"), |r| {
            r.progressed(call_id)
        })
        .await;
    }
}
