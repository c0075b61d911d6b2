//! The server's shared state: the location it serves, the plugins it loaded
//! (for reloads), what each session may read back, the calls waiting for a
//! permission answer, the peers to tell when the tools change, and the
//! limits on calls in flight.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;

use crate::bridge::McpConnection;
use crate::error::Error;
use crate::facade::location::Location;
use crate::manifest::mcp::McpServerConfig;
use crate::mcp::call::Pending;
use crate::mcp::sessions::SessionSources;
use crate::runtime::activation::Activation;
use crate::runtime::load::PluginOptions;

/// Tool calls in flight across all sessions; beyond it a call is refused
/// with an error saying so, rather than queued without bound.
pub const MAX_CALLS_IN_FLIGHT: usize = 1024;

/// Tool calls in flight in one session.
pub const MAX_CALLS_PER_SESSION: usize = 256;

/// How long a call suspended in a permission question waits for a 2026-07-28
/// client's retry with the answer; then it is denied.
pub const PERMISSION_ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Sessions whose retained outputs the server remembers; the oldest are
/// forgotten first (their outputs stay on disk until retention ends).
const MAX_SESSIONS: usize = 4096;

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The transport failed (stdio closed abnormally, the socket failed).
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The HTTP options are unsafe or invalid.
    #[error("{0}")]
    Config(String),
    /// Watching plugin files failed.
    #[error("cannot watch {}: {reason}", path.display())]
    Watch {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// A plugin the server loaded, remembered so `--watch` can reload it.
pub(crate) struct Loaded {
    pub(crate) path: PathBuf,
    pub(crate) options: PluginOptions,
    pub(crate) activation: Activation,
}

/// Serves a [`Location`]'s tools over MCP. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").finish_non_exhaustive()
    }
}

pub(crate) struct Shared {
    pub(crate) location: Location,
    plugins: Mutex<Vec<Loaded>>,
    /// The MCP servers bridged in: their tools are served with the rest.
    bridges: Mutex<Vec<McpConnection>>,
    /// The MCP servers each session gets its own of.
    pub(crate) session_sources: SessionSources,
    /// Retained-output ids each session produced: only it may read them.
    outputs: Mutex<SessionOutputs>,
    /// Calls suspended in a permission question, by their handle.
    pub(crate) pending: Mutex<HashMap<String, Pending>>,
    /// 2025 peers, told when the tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// 2026-07-28 subscribers listen here.
    pub(crate) tools_changed: broadcast::Sender<()>,
    pub(crate) in_flight: Arc<Semaphore>,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Whether "ask" permission questions go to the client (else to the
    /// host's approver).
    pub(crate) ask_clients: std::sync::atomic::AtomicBool,
    /// Cancelled when the server begins to shut down: no new calls.
    pub(crate) draining: CancellationToken,
    /// Cancelled when the server shuts down: every call's token is a child.
    pub(crate) shutdown: CancellationToken,
}

/// Retained-output ids by session, oldest session first.
#[derive(Default)]
struct SessionOutputs {
    ids: HashMap<String, HashSet<String>>,
    order: VecDeque<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a plain insert, remove or lookup.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl McpServer {
    /// A server for `location`'s tools. Plugins loaded with
    /// [`McpServer::load`] can be reloaded by [`McpServer::watch`].
    pub fn new(location: Location) -> McpServer {
        McpServer {
            shared: Arc::new(Shared {
                location,
                plugins: Mutex::default(),
                bridges: Mutex::default(),
                session_sources: SessionSources::default(),
                outputs: Mutex::default(),
                pending: Mutex::default(),
                peers: Mutex::default(),
                tools_changed: broadcast::channel(16).0,
                in_flight: Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT)),
                sessions: Mutex::default(),
                ask_clients: std::sync::atomic::AtomicBool::new(true),
                draining: CancellationToken::new(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    /// Whether permission questions the rules leave to "ask" go to the MCP
    /// client that made the call. Default: true. With false the host's
    /// approver answers them (e.g. one that approves everything).
    pub fn ask_clients(self, ask: bool) -> McpServer {
        self.shared
            .ask_clients
            .store(ask, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Loads and activates the plugin at `path` into the served location.
    pub async fn load(&self, path: impl AsRef<Path>, options: PluginOptions) -> Result<(), Error> {
        let path = path.as_ref().to_owned();
        let activation = self.shared.location.load(&path, &options).await?;
        lock(&self.shared.plugins).push(Loaded {
            path,
            options,
            activation,
        });
        Ok(())
    }

    /// Bridges in the MCP server `config` describes: its tools are served
    /// under the same policy and event log as the plugins' (a gateway).
    /// Gives the warnings for the tools it skipped. A `per_session` server
    /// is connected for each MCP session on its first request instead.
    pub async fn connect_mcp(&self, config: McpServerConfig) -> Result<Vec<String>, Error> {
        if config.per_session {
            self.shared.session_sources.add(config);
            return Ok(Vec::new());
        }
        let connection = self.shared.location.connect_mcp(config).await?;
        let warnings = connection.warnings().to_vec();
        let mut changes = connection.tool_changes();
        lock(&self.shared.bridges).push(connection);
        // Clients hear of the bridged server's changes as of a reload's.
        let shared = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                shared.tools_changed().await;
            }
        });
        Ok(warnings)
    }

    /// Stops the server: no new calls; calls in flight may finish within
    /// `grace`, then the rest are cancelled.
    pub async fn shut_down(&self, grace: Duration) {
        self.shared.draining.cancel();
        let idle = self.shared.in_flight.clone();
        let all = u32::try_from(MAX_CALLS_IN_FLIGHT).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(grace, idle.acquire_many(all)).await;
        self.shared.shutdown.cancel();
    }
}

impl Shared {
    /// The paths of the loaded plugins.
    pub(crate) fn plugin_paths(&self) -> Vec<PathBuf> {
        lock(&self.plugins).iter().map(|l| l.path.clone()).collect()
    }

    /// Reloads every plugin loaded from `path`, gap-free (the new
    /// activation overlays the old before the old closes), then tells every
    /// client the tool list changed.
    pub(crate) async fn reload(&self, path: &Path) -> Result<(), Error> {
        let stale: Vec<(usize, PluginOptions)> = lock(&self.plugins)
            .iter()
            .enumerate()
            .filter(|(_, l)| l.path == path)
            .map(|(i, l)| (i, l.options.clone()))
            .collect();
        for (index, options) in stale {
            let fresh = self.location.load(path, &options).await?;
            let old = std::mem::replace(&mut lock(&self.plugins)[index].activation, fresh);
            old.unload();
        }
        self.tools_changed().await;
        Ok(())
    }

    /// Tells 2025 peers and 2026 subscribers that the tool list changed.
    async fn tools_changed(&self) {
        let _ = self.tools_changed.send(());
        let peers: Vec<Peer<RoleServer>> = lock(&self.peers).clone();
        let mut alive = Vec::with_capacity(peers.len());
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                alive.push(peer);
            }
        }
        *lock(&self.peers) = alive;
    }

    pub(crate) fn add_peer(&self, peer: Peer<RoleServer>) {
        lock(&self.peers).push(peer);
    }

    /// Remembers that `session` produced the retained output `id`.
    pub(crate) fn record_output(&self, session: &str, id: String) {
        let mut outputs = lock(&self.outputs);
        if !outputs.ids.contains_key(session) {
            if outputs.order.len() >= MAX_SESSIONS
                && let Some(oldest) = outputs.order.pop_front()
            {
                outputs.ids.remove(&oldest);
            }
            outputs.order.push_back(session.to_owned());
        }
        outputs
            .ids
            .entry(session.to_owned())
            .or_default()
            .insert(id);
    }

    /// Whether `session` may read the retained output `id`.
    pub(crate) fn may_read(&self, session: &str, id: &str) -> bool {
        lock(&self.outputs)
            .ids
            .get(session)
            .is_some_and(|ids| ids.contains(id))
    }

    /// The retained-output ids of `session`.
    pub(crate) fn outputs_of(&self, session: &str) -> Vec<String> {
        lock(&self.outputs)
            .ids
            .get(session)
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The in-flight limit of `session`.
    pub(crate) fn session_slots(&self, session: &str) -> Arc<Semaphore> {
        let mut sessions = lock(&self.sessions);
        if !sessions.contains_key(session) && sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, slots| slots.available_permits() < MAX_CALLS_PER_SESSION);
        }
        sessions
            .entry(session.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(MAX_CALLS_PER_SESSION)))
            .clone()
    }

    pub(crate) fn take_pending(&self, handle: &str) -> Option<Pending> {
        lock(&self.pending).remove(handle)
    }

    pub(crate) fn put_pending(&self, handle: String, pending: Pending) {
        lock(&self.pending).insert(handle, pending);
    }
}
