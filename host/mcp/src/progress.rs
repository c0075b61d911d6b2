//! A call's progress as `notifications/progress` (R24, R32): strictly
//! increasing `progress`, `total` and `message` from the update when it has
//! them, at most one notification per [`MIN_INTERVAL`], and always the last.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use toolhost::events::{EventSink, ProgressEvent};

/// The shortest gap between two notifications of one call: ~20 per second.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// Receives the call's updates; only the latest matters. The task that
/// sends them starts with the first, so a call that reports none (most;
/// and clients such as rmcp's send a token with every call) costs nothing.
pub(crate) struct Forwarder {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    runtime: Handle,
    latest: OnceLock<watch::Sender<Option<Value>>>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl EventSink for Forwarder {
    fn progress(&self, event: &ProgressEvent) {
        let latest = self.latest.get_or_init(|| self.start());
        latest.send_replace(Some(event.update.clone()));
    }
}

impl Forwarder {
    /// Starts the task that sends updates; it ends, after sending the last,
    /// once the forwarder is dropped.
    fn start(&self) -> watch::Sender<Option<Value>> {
        let (latest, mut updates) = watch::channel(None);
        let (peer, token) = (self.peer.clone(), self.token.clone());
        let task = self.runtime.spawn(async move {
            let mut last = 0.0;
            while updates.changed().await.is_ok() {
                let Some(update) = updates.borrow_and_update().clone() else {
                    continue;
                };
                let notification = notification(&token, &update, last);
                last = notification.progress;
                if peer.notify_progress(notification).await.is_err() {
                    break;
                }
                tokio::time::sleep(MIN_INTERVAL).await;
            }
        });
        *lock(&self.task) = Some(task);
        latest
    }
}

fn lock(task: &Mutex<Option<JoinHandle<()>>>) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
    // Its one critical section is a store or a take.
    task.lock().unwrap_or_else(|e| e.into_inner())
}

/// The last notification of a call, still to go out when its result is
/// ready.
pub(crate) struct Flush(Arc<Mutex<Option<JoinHandle<()>>>>);

impl Flush {
    /// Waits up to `limit` for the last notification to be sent, once the
    /// call (and so its forwarder) is gone; at once if it reported none.
    pub(crate) async fn wait(self, limit: Duration) {
        let task = lock(&self.0).take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(limit, task).await;
        }
    }
}

/// Forwards a call's progress to `peer` under `token` (from a task on the
/// current runtime, started at the first update); and what waits for the
/// last notification.
pub(crate) fn forward(peer: Peer<RoleServer>, token: ProgressToken) -> (Arc<Forwarder>, Flush) {
    let task = Arc::new(Mutex::new(None));
    let forwarder = Forwarder {
        peer,
        token,
        runtime: Handle::current(),
        latest: OnceLock::new(),
        task: task.clone(),
    };
    (Arc::new(forwarder), Flush(task))
}

fn notification(token: &ProgressToken, update: &Value, last: f64) -> ProgressNotificationParam {
    let progress = update["progress"]
        .as_f64()
        .filter(|p| *p > last)
        .unwrap_or(last + 1.0);
    let message = update["message"]
        .as_str()
        .map_or_else(|| update.to_string(), str::to_owned);
    let mut param = ProgressNotificationParam::new(token.clone(), progress).with_message(message);
    if let Some(total) = update["total"].as_f64() {
        param = param.with_total(total);
    }
    param
}
