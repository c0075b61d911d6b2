//! One bridged server: connect, list its tools and register them in a scope
//! the connection owns; then supervise it: re-list when the server says its
//! tools changed (the new registration lands before the old closes), close
//! its tools when it goes away, and reconnect with backoff.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::ServiceExt as _;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{
    StreamableHttpClientTransport, TokioChildProcess,
    streamable_http_client::StreamableHttpClientTransportConfig,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::bridge::client::{BridgeClient, ProgressRoutes};
use crate::bridge::shared::{Peer, Shared};
use crate::bridge::tool::BridgedTool;
use crate::bridge::{MCP_CONNECT_TIMEOUT, MCP_RECONNECT_MAX, MCP_RECONNECT_MIN};
use toolhost::Budget;
use toolhost::Error;
use toolhost::Location;
use toolhost::PluginInfo;
use toolhost::config::{McpServerConfig, McpTransport};
use toolhost::limits::{MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_ACTIVATION};
use toolhost::registry::Registration;
use toolhost::registry::Scope;
use toolhost::schema::Schema;
use toolhost::text::truncate;
use toolhost::{Tool, registry::normalize_name};

type Running = RunningService<RoleClient, BridgeClient>;

/// A live bridge to one MCP server: its tools are registered while it is
/// connected. Dropping it (or [`McpConnection::close`]) closes its tools
/// and stops the server.
pub struct McpConnection {
    shared: Arc<Shared>,
    scope: Arc<Scope>,
    shutdown: CancellationToken,
    warnings: Vec<String>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("server", &self.shared.config.name)
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}

/// What the supervisor needs to register tools again after a change or a
/// reconnection.
struct Registrar {
    shared: Arc<Shared>,
    scope: Arc<Scope>,
    budget: Budget,
    tls: Arc<rustls::ClientConfig>,
    tools_changed: Arc<Notify>,
}

impl McpConnection {
    /// Connects to the MCP server `config` describes and registers its
    /// tools in `location`, as one registration in a scope the returned
    /// connection owns (R33; R3–R7 apply as for plugins). Tools whose
    /// schemas do not compile, or that exceed the registration limits, are
    /// skipped with a warning ([`McpConnection::warnings`]); the rest
    /// register.
    ///
    /// Dropping or closing the connection closes its tools and stops the
    /// server (a child process is killed).
    pub async fn connect(
        location: &Location,
        config: McpServerConfig,
    ) -> Result<McpConnection, Error> {
        let failed = |reason: String| Error::Mcp {
            server: config.name.clone(),
            reason,
        };
        let routes = Arc::new(ProgressRoutes::default());
        let tools_changed = Arc::new(Notify::new());
        let tls = location.client_tls();
        let running = connect(&config, &tls, &routes, &tools_changed)
            .await
            .map_err(failed)?;
        let policy = location
            .policy()
            .for_plugin(format!("mcp:{}", config.name), &config.rules);
        let shared = Arc::new(Shared {
            info: server_info(&config, &running),
            config,
            policy,
            routes,
            peer: Mutex::new(Some(running.peer().clone())),
            changes: tokio::sync::watch::Sender::new(0),
        });
        let registrar = Registrar {
            shared: shared.clone(),
            scope: Arc::new(location.scope()),
            budget: location.default_budget(),
            tls,
            tools_changed,
        };
        let (registration, warnings) =
            registrar
                .register(running.peer())
                .await
                .map_err(|e| Error::Mcp {
                    server: shared.config.name.clone(),
                    reason: e,
                })?;
        let shutdown = CancellationToken::new();
        let connection = McpConnection {
            shared,
            scope: registrar.scope.clone(),
            shutdown: shutdown.clone(),
            warnings,
        };
        tokio::spawn(registrar.supervise(running, registration, shutdown));
        Ok(connection)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// The server's identity: its name, and the version it reported.
    pub fn info(&self) -> &PluginInfo {
        &self.shared.info
    }

    /// Tools skipped when connecting, and why, naming server and tool.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A receiver that sees each change of this server's registered tools
    /// (after `tools/list_changed`, a disconnection or a reconnection), for
    /// front ends that tell their own clients.
    pub fn tool_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Whether the server is connected now (its tools are registered).
    pub fn is_connected(&self) -> bool {
        self.shared.peer().is_some()
    }

    /// Closes its tools now and stops the server. Idempotent.
    pub fn close(&self) {
        self.scope.close();
        self.shutdown.cancel();
    }
}

impl Drop for McpConnection {
    fn drop(&mut self) {
        self.close();
    }
}

impl Registrar {
    /// Watches the connection until shutdown: re-lists on a change, and on
    /// a disconnection closes the tools and reconnects.
    async fn supervise(
        self,
        running: Running,
        registration: Registration,
        shutdown: CancellationToken,
    ) {
        let mut current = Some((running, registration));
        while let Some((running, registration)) = current.take() {
            let stopped = self.watch(running, registration, &shutdown).await;
            if stopped {
                return;
            }
            tracing::warn!(server = %self.shared.config.name, "MCP server went away; its tools are closed until it reconnects");
            current = self.reconnect(&shutdown).await;
        }
    }

    /// Serves one connection; true when shutdown ended it.
    async fn watch(
        &self,
        running: Running,
        registration: Registration,
        shutdown: &CancellationToken,
    ) -> bool {
        let peer = running.peer().clone();
        self.shared.set_peer(Some(peer.clone()));
        let stop = running.cancellation_token();
        let ended = running.waiting();
        tokio::pin!(ended);
        let mut registration = registration;
        let stopped = loop {
            tokio::select! {
                () = shutdown.cancelled() => {
                    stop.cancel();
                    let _ = ended.await;
                    break true;
                }
                _ = &mut ended => break false,
                () = self.tools_changed.notified() => match self.register(&peer).await {
                    // The new registration is in before the old one closes.
                    Ok((new, skipped)) => {
                        log_skipped(&skipped);
                        registration = new;
                        self.shared.tools_changed();
                    }
                    Err(e) => tracing::warn!(server = %self.shared.config.name, "cannot re-list tools: {e}"),
                },
            }
        };
        self.shared.set_peer(None);
        registration.close();
        self.shared.tools_changed();
        stopped
    }

    /// Connects again, waiting longer after each failure; `None` on shutdown.
    async fn reconnect(&self, shutdown: &CancellationToken) -> Option<(Running, Registration)> {
        let mut waits = reconnect_waits();
        loop {
            let wait = waits.next().unwrap_or(MCP_RECONNECT_MAX);
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(wait) => {}
            }
            let attempt = async {
                let running = connect(
                    &self.shared.config,
                    &self.tls,
                    &self.shared.routes,
                    &self.tools_changed,
                )
                .await?;
                let (registration, skipped) = self.register(running.peer()).await?;
                log_skipped(&skipped);
                Ok::<_, String>((running, registration))
            };
            match attempt.await {
                Ok(connected) => {
                    self.shared.tools_changed();
                    return Some(connected);
                }
                Err(e) => {
                    tracing::warn!(server = %self.shared.config.name, "reconnecting failed: {e}");
                }
            }
        }
    }

    /// Lists the server's tools and registers them as one registration;
    /// gives it with the warnings for the tools skipped.
    async fn register(&self, peer: &Peer) -> Result<(Registration, Vec<String>), String> {
        let listed = tokio::time::timeout(MCP_CONNECT_TIMEOUT, peer.list_all_tools())
            .await
            .map_err(|_| format!("tools/list took longer than {MCP_CONNECT_TIMEOUT:?}"))?
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let (tools, warnings) = self.tools(listed);
        let registration = self
            .scope
            .register(tools)
            .map_err(|e| format!("cannot register its tools: {e}"))?;
        Ok((registration, warnings))
    }

    /// The listed tools that can be registered, named with the prefix, and
    /// a warning for each one skipped.
    fn tools(&self, listed: Vec<rmcp::model::Tool>) -> (Vec<(String, Tool)>, Vec<String>) {
        let server = &self.shared.config.name;
        let mut tools: Vec<(String, Tool)> = Vec::new();
        let mut warnings = Vec::new();
        for remote in listed {
            let name = remote.name.to_string();
            let skip = |why: String| format!("MCP server `{server}`, tool `{name}` skipped: {why}");
            if tools.len() == MAX_TOOLS_PER_ACTIVATION {
                warnings.push(skip(format!(
                    "a server may register at most {MAX_TOOLS_PER_ACTIVATION} tools"
                )));
                continue;
            }
            match self.tool(remote) {
                Ok((effective, tool)) if tools.iter().all(|(n, _)| *n != effective) => {
                    tools.push((effective, tool));
                }
                Ok((effective, _)) => warnings.push(skip(format!(
                    "its name `{effective}` is taken by another of its tools"
                ))),
                Err(why) => warnings.push(skip(why)),
            }
        }
        (tools, warnings)
    }

    /// One listed tool as a registrable tool and its effective name.
    fn tool(&self, remote: rmcp::model::Tool) -> Result<(String, Tool), String> {
        let effective = normalize_name(&self.shared.config.tool_name(&remote.name))
            .map_err(|e| e.to_string())?;
        let description = remote.description.as_deref().unwrap_or_default();
        if description.len() > MAX_DESCRIPTION_BYTES {
            return Err(format!(
                "its description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}",
                description.len()
            ));
        }
        let input = schema(
            "input",
            serde_json::Value::Object((*remote.input_schema).clone()),
        )?;
        let output = remote
            .output_schema
            .map(|s| schema("output", serde_json::Value::Object((*s).clone())))
            .transpose()?;
        let budget = Budget {
            timeout: self.shared.config.timeout.unwrap_or(self.budget.timeout),
            ..self.budget
        };
        let executor = Arc::new(BridgedTool {
            shared: self.shared.clone(),
            remote: remote.name.to_string(),
        });
        let tool = Tool::from_parts(description.to_owned(), input, output, executor);
        Ok((effective, tool.with_budget(budget)))
    }
}

/// The waits between reconnection attempts: from [`MCP_RECONNECT_MIN`],
/// doubling, each plus up to as much again at random so that replicas which
/// lost the same server do not retry in step; never longer than
/// [`MCP_RECONNECT_MAX`] (once there, the offsets the earlier jitter gave
/// them remain), and without end.
fn reconnect_waits() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder as _;
    backon::ExponentialBuilder::new()
        .with_min_delay(MCP_RECONNECT_MIN)
        .with_max_delay(MCP_RECONNECT_MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
        .map(|wait| wait.min(MCP_RECONNECT_MAX))
}

/// Tools skipped when registering again, where no caller sees the
/// warnings.
fn log_skipped(warnings: &[String]) {
    for warning in warnings {
        tracing::warn!("{warning}");
    }
}

/// A schema from a server, bounded and compiled.
fn schema(which: &str, value: serde_json::Value) -> Result<Schema, String> {
    let bytes = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its {which} schema is {bytes} bytes; the limit is {MAX_SCHEMA_BYTES}"
        ));
    }
    Schema::compile(value).map_err(|e| format!("its {which} schema does not compile: {e}"))
}

/// The longest server version kept: it names the server in messages.
const MAX_VERSION_BYTES: usize = 64;

/// The server's identity as a plugin's: its name, the version it reported
/// (bounded: the server chose it).
fn server_info(config: &McpServerConfig, running: &Running) -> PluginInfo {
    let version = running
        .peer()
        .peer_info()
        .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone()))
        .map_or_else(|| "unknown".into(), |v| truncate(v, MAX_VERSION_BYTES));
    let path = match &config.transport {
        McpTransport::Stdio { command, .. } => PathBuf::from(command),
        McpTransport::Http { url, .. } => PathBuf::from(url),
        _ => PathBuf::from(&config.name),
    };
    PluginInfo {
        name: config.name.clone(),
        version,
        path,
        digest: String::new(),
        from_cache: false,
    }
}

/// Starts (or reaches) the server and completes the MCP handshake.
async fn connect(
    config: &McpServerConfig,
    tls: &rustls::ClientConfig,
    routes: &Arc<ProgressRoutes>,
    tools_changed: &Arc<Notify>,
) -> Result<Running, String> {
    let client = BridgeClient {
        routes: routes.clone(),
        tools_changed: tools_changed.clone(),
    };
    let handshake = async {
        let served = match &config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                client
                    .serve(child(command, args, env, cwd.as_deref())?)
                    .await
            }
            McpTransport::Http {
                url,
                headers,
                bearer_token_env,
            } => {
                let http = http_config(url, headers, bearer_token_env.as_deref())?;
                let reqwest = reqwest::Client::builder()
                    .tls_backend_preconfigured(tls.clone())
                    .build()
                    .map_err(|e| format!("cannot set up HTTPS: {e}"))?;
                client
                    .serve(StreamableHttpClientTransport::with_client(reqwest, http))
                    .await
            }
            _ => return Err("this MCP transport is not supported by the bridge".into()),
        };
        served.map_err(|e| format!("the MCP handshake failed: {e}"))
    };
    tokio::time::timeout(MCP_CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| format!("no MCP handshake within {MCP_CONNECT_TIMEOUT:?}"))?
}

/// The child process of a stdio server: only `PATH`, `HOME` and its own
/// environment; stderr discarded.
fn child(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<TokioChildProcess, String> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear();
    for inherited in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(inherited) {
            cmd.env(inherited, value);
        }
    }
    cmd.envs(env);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let (process, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    Ok(process)
}

/// The streamable HTTP transport's settings: the configured headers and
/// bearer token.
fn http_config(
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer_token_env: Option<&str>,
) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` is not an HTTP header name"))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{name}` is not valid in HTTP"))?;
        custom.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(var) = bearer_token_env {
        let token = std::env::var(var)
            .map_err(|_| format!("the bearer token variable `{var}` is not set"))?;
        config = config.auth_header(token);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_waits_double_with_jitter_up_to_the_max_and_never_end() {
        let waits: Vec<Duration> = reconnect_waits().take(100).collect();
        assert_eq!(waits.len(), 100);
        assert!(waits[0] >= MCP_RECONNECT_MIN && waits[0] < MCP_RECONNECT_MIN * 2);
        assert!(waits[1] >= MCP_RECONNECT_MIN * 2 && waits[1] < MCP_RECONNECT_MIN * 4);
        assert!(waits.iter().all(|w| *w <= MCP_RECONNECT_MAX));
        assert_eq!(waits[99], MCP_RECONNECT_MAX);
    }
}
