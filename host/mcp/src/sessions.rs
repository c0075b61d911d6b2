//! MCP servers placed per MCP session (R35): a manifest's `per_session`
//! servers are connected into a session's own placement on its first
//! request, so each client gets its own, visible only to it; they close when
//! the session ends or is forgotten (the oldest beyond `MAX_PLACED_SESSIONS`),
//! or the server stops.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OnceCell;

use crate::bridge::McpConnection;
use toolhost::Location;
use toolhost::config::McpServerConfig;

/// Sessions with their own servers at once; beyond it the oldest session's
/// servers are closed (each may be a child process).
const MAX_PLACED_SESSIONS: usize = 64;

/// The per-session servers, and the sessions that have them.
#[derive(Default)]
pub(crate) struct SessionSources {
    configs: Mutex<Vec<McpServerConfig>>,
    placed: Mutex<Placed>,
}

/// Each session's placement, set up once; a session's servers connect
/// outside the map's lock, so a slow server delays only its own session.
#[derive(Default)]
struct Placed {
    sessions: HashMap<String, Arc<OnceCell<Session>>>,
    order: VecDeque<String>,
}

/// One session's placement and what keeps its servers connected.
struct Session {
    location: Location,
    _connections: Vec<McpConnection>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.location.end_session();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a plain insert, remove or lookup.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl SessionSources {
    /// Connects `config` into each session from its first request on.
    pub(crate) fn add(&self, config: McpServerConfig) {
        lock(&self.configs).push(config);
    }

    /// Where `session`'s requests see their tools: its own placement over
    /// `base` when there are per-session servers, else `base`. A request
    /// without a session (stateless HTTP) gets `base`.
    pub(crate) async fn location(&self, base: &Location, session: &str) -> Location {
        let configs = lock(&self.configs).clone();
        if configs.is_empty() || session.starts_with("request:") {
            return base.clone();
        }
        let cell = self.cell(session);
        // Boxed: connecting is ~6.7 KB of future, and without it every
        // request's future (moved into a task per request) carries that
        // space, though only servers with per-session sources need it.
        let placed = Box::pin(cell.get_or_init(|| connect(base.session(session), configs))).await;
        placed.location.clone()
    }

    /// Closes `session`'s servers, if it has any: the session ended.
    pub(crate) fn forget(&self, session: &str) {
        let mut placed = lock(&self.placed);
        if placed.sessions.remove(session).is_some() {
            placed.order.retain(|s| s != session);
        }
    }

    /// The session's cell, made (and the oldest session forgotten beyond
    /// the limit) on its first request.
    fn cell(&self, session: &str) -> Arc<OnceCell<Session>> {
        let mut placed = lock(&self.placed);
        if let Some(cell) = placed.sessions.get(session) {
            return cell.clone();
        }
        if placed.order.len() >= MAX_PLACED_SESSIONS
            && let Some(oldest) = placed.order.pop_front()
        {
            placed.sessions.remove(&oldest);
        }
        let cell = Arc::new(OnceCell::new());
        placed.order.push_back(session.to_owned());
        placed.sessions.insert(session.to_owned(), cell.clone());
        cell
    }
}

/// Connects every per-session server into the session's placement; one
/// that fails is logged, and the session still gets every other tool.
async fn connect(location: Location, configs: Vec<McpServerConfig>) -> Session {
    let mut connections = Vec::new();
    for config in configs {
        match crate::McpConnection::connect(&location, config).await {
            Ok(connection) => connections.push(connection),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    Session {
        location,
        _connections: connections,
    }
}
