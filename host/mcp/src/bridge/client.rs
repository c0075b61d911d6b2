//! The bridge's side of an MCP session: routes the server's progress
//! notifications to the call they belong to, and wakes the connection when
//! the server says its tool list changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::ClientHandler;
use rmcp::model::{ClientConfig, Implementation, ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use toolhost::events::CallEvents;

/// The calls in flight that asked for progress, by their progress token.
#[derive(Default)]
pub(super) struct ProgressRoutes(Mutex<HashMap<ProgressToken, CallEvents>>);

impl ProgressRoutes {
    fn lock(&self) -> MutexGuard<'_, HashMap<ProgressToken, CallEvents>> {
        // Entries are only inserted or removed whole: poison is harmless.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends progress with `token` to `events` until the route is dropped.
    pub(super) fn route(self: &Arc<Self>, token: ProgressToken, events: CallEvents) -> Route {
        self.lock().insert(token.clone(), events);
        Route {
            routes: self.clone(),
            token,
        }
    }
}

/// One call's progress route; dropping it removes the route.
pub(super) struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// The client handler of one connection.
pub(super) struct BridgeClient {
    pub(super) routes: Arc<ProgressRoutes>,
    pub(super) tools_changed: Arc<Notify>,
}

impl ClientHandler for BridgeClient {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Progress for a call that already ended (or never asked) is dropped.
        let events = self.routes.lock().get(&params.progress_token).cloned();
        if let Some(events) = events {
            events.report(progress_update(&params));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.client_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        config
    }
}

/// An MCP progress notification as a progress update: its progress, and
/// its total and message when it has them.
fn progress_update(params: &ProgressNotificationParam) -> Value {
    let mut update = Map::new();
    update.insert("progress".into(), json!(params.progress));
    if let Some(total) = params.total {
        update.insert("total".into(), json!(total));
    }
    if let Some(message) = &params.message {
        update.insert("message".into(), json!(message));
    }
    Value::Object(update)
}
