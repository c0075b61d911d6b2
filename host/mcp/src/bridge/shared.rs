//! What every call of one bridged server's tools shares: the server's
//! configuration and identity, its permission policy, the progress routes,
//! and the live session (absent while disconnected).

use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::service::RoleClient;

use crate::bridge::client::ProgressRoutes;
use toolhost::PluginInfo;
use toolhost::config::McpServerConfig;
use toolhost::permission::Policy;

/// The session with a bridged server.
pub(super) type Peer = rmcp::service::Peer<RoleClient>;

/// What every call of one server's tools shares.
pub(super) struct Shared {
    pub(super) config: McpServerConfig,
    pub(super) info: PluginInfo,
    pub(super) policy: Policy,
    pub(super) routes: Arc<ProgressRoutes>,
    /// The live session; `None` while disconnected.
    pub(super) peer: Mutex<Option<Peer>>,
    /// Counts the changes of the registered tools (re-listed, closed,
    /// reconnected), for whoever serves them on.
    pub(super) changes: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Option<Peer>> {
        self.peer.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn peer(&self) -> Option<Peer> {
        self.lock().clone()
    }

    pub(super) fn set_peer(&self, peer: Option<Peer>) {
        *self.lock() = peer;
    }

    /// Says the registered tools changed.
    pub(super) fn tools_changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }
}
