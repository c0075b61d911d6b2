//! MCP servers placed per MCP session (R35): a manifest's `per_session`
//! servers are connected into a session's own placement on its first
//! request, so each client gets its own, visible only to it; they close when
//! the session is forgotten (the oldest beyond `MAX_PLACED_SESSIONS`) or the
//! server stops.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::bridge::McpConnection;
use crate::facade::location::Location;
use crate::manifest::mcp::McpServerConfig;

/// Sessions with their own servers at once; beyond it the oldest session's
/// servers are closed (each may be a child process).
const MAX_PLACED_SESSIONS: usize = 64;

/// The per-session servers, and the sessions that have them.
#[derive(Default)]
pub(crate) struct SessionSources {
    configs: Mutex<Vec<McpServerConfig>>,
    placed: tokio::sync::Mutex<Placed>,
}

#[derive(Default)]
struct Placed {
    sessions: HashMap<String, Session>,
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

impl SessionSources {
    /// Connects `config` into each session from its first request on.
    pub(crate) fn add(&self, config: McpServerConfig) {
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(config);
    }

    /// Where `session`'s requests see their tools: its own placement over
    /// `base` when there are per-session servers, else `base`. A request
    /// without a session (stateless HTTP) gets `base`.
    pub(crate) async fn location(&self, base: &Location, session: &str) -> Location {
        let configs = self
            .configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if configs.is_empty() || session.starts_with("request:") {
            return base.clone();
        }
        let mut placed = self.placed.lock().await;
        if let Some(known) = placed.sessions.get(session) {
            return known.location.clone();
        }
        let location = base.session(session);
        let mut connections = Vec::new();
        for config in configs {
            match location.connect_mcp(config).await {
                Ok(connection) => connections.push(connection),
                // The session still gets every other tool.
                Err(e) => tracing::warn!("session {session}: {e}"),
            }
        }
        if placed.order.len() >= MAX_PLACED_SESSIONS
            && let Some(oldest) = placed.order.pop_front()
        {
            placed.sessions.remove(&oldest);
        }
        placed.order.push_back(session.to_owned());
        placed.sessions.insert(
            session.to_owned(),
            Session {
                location: location.clone(),
                _connections: connections,
            },
        );
        location
    }
}
