//! A call's progress as `notifications/progress` (R24, R32): strictly
//! increasing `progress`, `total` and `message` from the update when it has
//! them, at most one notification per [`MIN_INTERVAL`], and always the last.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::model::event::{EventSink, ProgressEvent};

/// The shortest gap between two notifications of one call: ~20 per second.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// Receives the call's updates; only the latest matters.
pub(crate) struct Forwarder {
    latest: watch::Sender<Option<Value>>,
}

impl EventSink for Forwarder {
    fn progress(&self, event: &ProgressEvent) {
        self.latest.send_replace(Some(event.update.clone()));
    }
}

/// Starts forwarding to `peer` under `token`. The task ends, after sending
/// the last update, once every handle on the forwarder is dropped.
pub(crate) fn forward(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> (Arc<Forwarder>, JoinHandle<()>) {
    let (latest, mut updates) = watch::channel(None);
    let task = tokio::spawn(async move {
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
    (Arc::new(Forwarder { latest }), task)
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
