//! The server's shared state: the location it serves, the plugins it loaded
//! (for reloads), what each session may read back, the calls waiting for a
//! permission answer, the peers to tell when the tools change, the calls it
//! took on, and the HTTP sessions with who made them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::{broadcast, watch};

use crate::admission::Admission;
use crate::bindings::Bindings;
use crate::bridge::McpConnection;
use crate::metrics::Metrics;
use crate::sealed::StateKeys;
use crate::sessions::SessionSources;
use toolhost::Activation;
use toolhost::Error;
use toolhost::Location;
use toolhost::PluginSource;
use toolhost::config::McpServerConfig;
use toolhost::config::PluginOptions;

/// How long `tools/list` and `tools/call` wait for plugins still loading
/// (see [`McpServer::loading`]); then they see what has loaded, and clients
/// hear of the rest as a tool-list change.
pub const MAX_LOADING_WAIT: Duration = Duration::from_secs(60);

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
    pub(crate) source: PluginSource,
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
    /// Seals and opens the request states of permission questions asked
    /// of 2026-07-28 clients (R39).
    state_keys: Mutex<Arc<StateKeys>>,
    /// 2025 peers, told when the tool list changes, by their handler.
    peers: Mutex<HashMap<u64, Peer<RoleServer>>>,
    /// Numbers the handlers (one per stdio connection or HTTP session).
    handlers: AtomicU64,
    /// 2026-07-28 subscribers listen here.
    pub(crate) tools_changed: broadcast::Sender<()>,
    /// The calls taken on, and how the server stops.
    pub(crate) admission: Arc<Admission>,
    /// The live HTTP sessions and who made each.
    pub(crate) bindings: Arc<Bindings>,
    /// Whether "ask" permission questions go to the client (else to the
    /// host's approver).
    pub(crate) ask_clients: std::sync::atomic::AtomicBool,
    /// Loadings in progress; requests that list or call tools wait for none.
    loading: watch::Sender<usize>,
    /// Whether a request saw the tools before loading ended.
    listed_early: std::sync::atomic::AtomicBool,
}

/// Plugins and servers being loaded while the server already answers: see
/// [`McpServer::loading`]. Ends when dropped.
#[derive(Debug)]
#[must_use = "loading ends when this is dropped"]
pub struct Loading {
    shared: Weak<Shared>,
}

/// One handler's place in the shared state: what it leaves behind is
/// forgotten when its connection or session ends, so an expired session
/// frees its memory.
pub(crate) struct HandlerMark {
    shared: Weak<Shared>,
    serial: u64,
    /// The MCP session it serves, once a request has named it.
    session: std::sync::OnceLock<String>,
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
                state_keys: Mutex::new(Arc::new(StateKeys::ephemeral())),
                peers: Mutex::default(),
                handlers: AtomicU64::new(0),
                tools_changed: broadcast::channel(16).0,
                admission: Admission::new(),
                bindings: Arc::default(),
                ask_clients: std::sync::atomic::AtomicBool::new(true),
                loading: watch::channel(0).0,
                listed_early: std::sync::atomic::AtomicBool::new(false),
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

    /// Seals the `requestState` of permission questions asked of
    /// 2026-07-28 clients with `keys`, so the retry can land on any replica
    /// that has them (R39). Default: a random key of this process, so
    /// only this process opens its states.
    pub fn state_keys(self, keys: StateKeys) -> McpServer {
        *lock(&self.shared.state_keys) = Arc::new(keys);
        self
    }

    /// Marks plugins as loading, so a server can answer `initialize`,
    /// `server/discover` and `ping` at once while they compile: until the
    /// returned [`Loading`] is dropped, `tools/list` and `tools/call` wait
    /// for it (at most [`MAX_LOADING_WAIT`]), and clients that saw the tools
    /// before it ended are told the tool list changed.
    pub fn loading(&self) -> Loading {
        self.shared.loading.send_modify(|n| *n += 1);
        Loading {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Loads and activates the plugin `source` names into the served
    /// location.
    pub async fn load(
        &self,
        source: impl Into<PluginSource>,
        options: PluginOptions,
    ) -> Result<(), Error> {
        let source = source.into();
        let activation = self.shared.location.load(&source, &options).await?;
        lock(&self.shared.plugins).push(Loaded {
            source,
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
        let connection = crate::McpConnection::connect(&self.shared.location, config).await?;
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

    /// Stops the server's calls: no new ones; those running may finish
    /// within `grace`, then the rest are cancelled. Returns once every call
    /// has its outcome (or, after [`OUTCOME_FLUSH_LIMIT`], counts the
    /// missing ones as lost).
    ///
    /// [`OUTCOME_FLUSH_LIMIT`]: crate::limits::OUTCOME_FLUSH_LIMIT
    pub async fn shut_down(&self, grace: Duration) {
        self.shared.admission.stop(grace).await;
    }

    /// Outcomes the server could not record: the event sink failed, or a
    /// call did not end in time at a stop. Non-zero means the event log
    /// misses calls that clients made.
    pub fn lost_outcomes(&self) -> usize {
        self.shared.admission.lost()
    }
}

impl Shared {
    /// The files the loaded plugins came from (bytes in memory and
    /// registry references, content-addressed, have none to watch).
    pub(crate) fn plugin_files(&self) -> Vec<PathBuf> {
        let plugins = lock(&self.plugins);
        plugins
            .iter()
            .filter_map(|l| l.source.file().map(Path::to_owned))
            .collect()
    }

    /// Reloads every plugin loaded from `path`, gap-free (the new
    /// activation overlays the old before the old closes), then tells every
    /// client the tool list changed.
    pub(crate) async fn reload(&self, path: &Path) -> Result<(), Error> {
        let stale: Vec<(usize, PluginOptions)> = lock(&self.plugins)
            .iter()
            .enumerate()
            .filter(|(_, l)| l.source.file() == Some(path))
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
        let peers: Vec<(u64, Peer<RoleServer>)> = lock(&self.peers)
            .iter()
            .map(|(serial, peer)| (*serial, peer.clone()))
            .collect();
        for (serial, peer) in peers {
            if peer.notify_tool_list_changed().await.is_err() {
                lock(&self.peers).remove(&serial);
            }
        }
    }

    /// Waits (bounded) until no loading is in progress.
    pub(crate) async fn loaded(&self) {
        let mut loading = self.loading.subscribe();
        let done = tokio::time::timeout(MAX_LOADING_WAIT, loading.wait_for(|n| *n == 0)).await;
        if !matches!(done, Ok(Ok(_))) {
            self.listed_early
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A mark for a new handler.
    pub(crate) fn mark(self: &Arc<Self>) -> Arc<HandlerMark> {
        Arc::new(HandlerMark {
            shared: Arc::downgrade(self),
            serial: self.handlers.fetch_add(1, Ordering::Relaxed),
            session: std::sync::OnceLock::new(),
        })
    }

    pub(crate) fn add_peer(&self, mark: &HandlerMark, peer: Peer<RoleServer>) {
        lock(&self.peers).insert(mark.serial, peer);
    }

    /// Forgets what `session` left behind: its binding and its per-session
    /// servers. Its retained outputs stay in the store until retention
    /// ends.
    /// The OpenMetrics text of this server's metrics now.
    pub(crate) fn encode_metrics(&self) -> String {
        self.admission
            .metrics()
            .encode(self.admission.slots_held(), self.bindings.len())
    }

    /// The keys that seal and open request states.
    pub(crate) fn state_keys(&self) -> Arc<StateKeys> {
        lock(&self.state_keys).clone()
    }

    fn forget_session(&self, session: &str) {
        self.bindings.forget(session);
        self.session_sources.forget(session);
    }
}

impl Drop for Loading {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut last = false;
        shared.loading.send_modify(|n| {
            *n -= 1;
            last = *n == 0;
        });
        if last
            && shared
                .listed_early
                .swap(false, std::sync::atomic::Ordering::Relaxed)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { shared.tools_changed().await });
        }
    }
}

impl HandlerMark {
    /// Records the MCP session this handler serves (its first request
    /// that names one).
    pub(crate) fn serves(&self, session: &str) {
        let _ = self.session.set(session.to_owned());
    }
}

impl Drop for HandlerMark {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        lock(&shared.peers).remove(&self.serial);
        if let Some(session) = self.session.get() {
            shared.forget_session(session);
        }
    }
}

impl McpServer {
    /// Counts this server's calls, sessions and HTTP requests in `metrics`
    /// (e.g. the ones a [`MeteredStore`](crate::MeteredStore) counts the store's operations in).
    /// Call it before serving: a server whose metrics were already used
    /// keeps those. Default: metrics of its own.
    pub fn with_metrics(self, metrics: Metrics) -> McpServer {
        if self.shared.admission.metrics.set(metrics).is_err() {
            tracing::warn!("the server already counts in other metrics; these are not used");
        }
        self.metrics();
        self
    }

    /// The metrics this server counts in.
    pub fn metrics(&self) -> Metrics {
        let metrics = self.shared.admission.metrics();
        metrics.serve(&self.shared.location);
        metrics.clone()
    }

    /// The OpenMetrics text of this server's metrics now.
    pub fn encode_metrics(&self) -> String {
        self.shared.encode_metrics()
    }
}
