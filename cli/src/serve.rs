//! `toolhost serve PLUGIN|MANIFEST|DIR... [--http ADDR] [--watch]`: the
//! plugins' tools over MCP, on stdio or streamable HTTP, until the client
//! leaves or SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;
use toolhost::events::{EventSink, JsonLinesSink};
use toolhost::manifest::units::{format_duration, format_size, parse_duration, parse_size};
use toolhost_mcp::Metrics;
use toolhost_mcp::limits;
use toolhost_mcp::{AuthOptions, HttpOptions, Loading, McpServer, ServeError, StateKeys, Watcher};

use crate::common::{Common, Specs, specs};
use crate::std_tools::StdArgs;
use crate::{Failure, exit, stdio, terminal, usage};

/// The flags of `serve` besides the common ones.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Serve streamable HTTP at /mcp on ADDR (e.g. 127.0.0.1:8080)
    /// instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Serve Prometheus metrics at http://ADDR/metrics, and not beside /mcp
    /// on the --http address.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Reload a plugin when its file changes.
    #[arg(long)]
    watch: bool,
    /// Threads that run tools' calls and handle HTTP requests; stdio's
    /// protocol, compiles, the store and instances made ahead have threads
    /// of their own. Default: one per core. Fewer trade calls in parallel
    /// for fewer hand-offs between threads (over HTTP, lower latency).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_WORKERS))]
    pub(crate) workers: Option<u16>,
    /// Compile every plugin with the optimizing compiler before serving
    /// it, instead of serving at once on baseline (Winch) code while the
    /// optimized code compiles in the background.
    #[arg(long)]
    no_tiering: bool,
    /// Bearer token HTTP requests must carry; required off loopback.
    /// Repeatable (or comma-separated): each token is a caller of its own,
    /// whose sessions no other token can use.
    #[arg(
        long = "token",
        value_name = "TOKEN",
        env = "TOOLHOST_TOKEN",
        hide_env_values = true,
        value_delimiter = ','
    )]
    tokens: Vec<String>,
    /// HTTP: accept OAuth 2.1 access tokens (JWTs) from the authorization
    /// server ISSUER (repeatable): its keys are found through its RFC 8414
    /// or OpenID metadata. Needs --resource.
    #[arg(
        long = "auth-issuer",
        value_name = "ISSUER",
        env = "TOOLHOST_AUTH_ISSUER",
        value_delimiter = ',',
        requires = "resource"
    )]
    auth_issuers: Vec<String>,
    /// HTTP with --auth-issuer: this server's canonical URL, e.g.
    /// https://tools.example.com/mcp. Tokens must name it in `aud`.
    #[arg(
        long,
        value_name = "URL",
        env = "TOOLHOST_RESOURCE",
        requires = "auth_issuers"
    )]
    resource: Option<String>,
    /// HTTP with --auth-issuer: tools matching TOOL (a pattern, `*` any run)
    /// are listed and callable only with the token scope SCOPE, besides
    /// `mcp:tools` (repeatable).
    #[arg(long = "tool-scope", value_name = "TOOL=SCOPE", value_parser = tool_scope, requires = "auth_issuers")]
    tool_scopes: Vec<(String, String)>,
    /// HTTP with --auth-issuer: also accept access tokens without a `typ`
    /// (or with the generic `JWT`), for issuers that do not type them as
    /// RFC 9068 says (`at+jwt`). Such tokens cannot be told from ID tokens
    /// by type; their audience must still be --resource.
    #[arg(long, requires = "auth_issuers")]
    auth_allow_untyped_tokens: bool,
    /// Append durable events (progress, outcomes) to FILE as JSON Lines.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// On SIGINT/SIGTERM, how long calls in flight may finish.
    #[arg(long, default_value = format_duration(GRACE), value_parser = parse_duration)]
    grace: Duration,
    /// HTTP: open connections at once (at most half the descriptor limit).
    #[arg(long, value_name = "N", default_value_t = limits::MAX_CONNECTIONS)]
    max_connections: usize,
    /// HTTP: how long a client has to send a request head; also how long
    /// an idle connection stays open.
    #[arg(long, value_name = "DURATION", default_value = format_duration(limits::HEADER_READ_TIMEOUT), value_parser = parse_duration)]
    header_timeout: Duration,
    /// HTTP: how long a request body may pause between bytes.
    #[arg(long, value_name = "DURATION", default_value = format_duration(limits::BODY_IDLE_TIMEOUT), value_parser = parse_duration)]
    body_timeout: Duration,
    /// HTTP: how long a whole request body may take to arrive.
    #[arg(long, value_name = "DURATION", default_value = format_duration(limits::BODY_READ_TIMEOUT), value_parser = parse_duration)]
    body_deadline: Duration,
    /// HTTP: sessions at once; the one idle the longest makes room.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_SESSIONS)]
    max_sessions: usize,
    /// HTTP: how long a session lives without a request.
    #[arg(long, value_name = "DURATION", default_value = format_duration(limits::SESSION_IDLE_EXPIRY), value_parser = parse_duration)]
    session_idle: Duration,
    /// HTTP: request bytes held at once across all requests (bodies being
    /// read, inputs of calls not yet answered).
    #[arg(long, value_name = "SIZE", default_value = format_size(limits::MAX_BUFFERED_REQUEST_BYTES as u64), value_parser = parse_size)]
    max_buffered: u64,
    /// HTTP: also accept requests whose Host header names HOST (repeatable):
    /// the name clients or a load balancer reach this server by, e.g. a
    /// Kubernetes Service's `toolhost.default.svc`. Loopback names and the
    /// bound address are always accepted.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// The key that seals the requestState of permission questions to
    /// 2026-07-28 clients: 32 random bytes, hex or base64 (`openssl rand
    /// -hex 32`). Replicas behind one balancer share it. Default: a random
    /// key of this process.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_STATE_KEY_FILE")]
    state_key_file: Option<PathBuf>,
    /// The key replaced by --state-key-file, still accepted while replicas
    /// rotate.
    #[arg(
        long,
        value_name = "FILE",
        env = "TOOLHOST_PREVIOUS_STATE_KEY_FILE",
        requires = "state_key_file"
    )]
    previous_state_key_file: Option<PathBuf>,
}

/// --grace's default: the CLI's own, as the library takes a grace per stop.
const GRACE: Duration = Duration::from_secs(10);

/// The most threads --workers starts: far above the cores a host has, each
/// a thread with its own stack.
pub(crate) const MAX_WORKERS: i64 = 256;

/// `TOOL=SCOPE`, for --tool-scope.
fn tool_scope(given: &str) -> Result<(String, String), String> {
    match given.split_once('=') {
        Some((tool, scope)) if !tool.is_empty() && !scope.is_empty() && !scope.contains(' ') => {
            Ok((tool.to_owned(), scope.to_owned()))
        }
        _ => Err(format!(
            "{given:?} is not TOOL=SCOPE (e.g. `write_*=files:write`; a scope has no spaces)"
        )),
    }
}

impl ServeArgs {
    pub(crate) fn into_serve(self, plugins: Vec<PathBuf>) -> Serve {
        let auth = self.resource.map(|resource| AuthOptions {
            issuers: self.auth_issuers,
            resource,
            tool_scopes: self.tool_scopes,
            untyped_tokens: self.auth_allow_untyped_tokens,
        });
        let options = HttpOptions {
            tokens: self.tokens,
            auth,
            hosts: self.allow_hosts,
            max_connections: self.max_connections,
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            body_deadline: self.body_deadline,
            max_sessions: self.max_sessions,
            session_idle: self.session_idle,
            max_buffered_bytes: usize::try_from(self.max_buffered).unwrap_or(usize::MAX),
            metrics: self.metrics.is_none(),
            ..HttpOptions::default()
        };
        Serve {
            plugins,
            state_keys: self
                .state_key_file
                .map(|key| (key, self.previous_state_key_file)),
            http: self.http,
            metrics: self.metrics,
            watch: self.watch,
            tiered: !self.no_tiering,
            events: self.events,
            grace: self.grace,
            options,
        }
    }
}

/// What `serve` takes besides the common flags.
pub(crate) struct Serve {
    pub(crate) plugins: Vec<PathBuf>,
    /// The state key file, and the previous one.
    pub(crate) state_keys: Option<(PathBuf, Option<PathBuf>)>,
    pub(crate) http: Option<SocketAddr>,
    /// Where metrics are served apart from /mcp.
    pub(crate) metrics: Option<SocketAddr>,
    pub(crate) watch: bool,
    /// Whether plugins are compiled in tiers (baseline first).
    pub(crate) tiered: bool,
    pub(crate) events: Option<PathBuf>,
    pub(crate) grace: Duration,
    pub(crate) options: HttpOptions,
}

pub(crate) async fn run(serve: Serve, std: &StdArgs, common: &Common) -> Result<u8, Failure> {
    let paths = expand(&serve.plugins)?;
    let mut specs = specs(&paths, common)?;
    std.add(&mut specs, common)?;
    let sink: Option<Arc<dyn EventSink>> = match &serve.events {
        Some(file) => Some(Arc::new(JsonLinesSink::open(file).with_context(|| {
            format!("cannot open the event log {}", file.display())
        })?)),
        None => None,
    };
    // Stdin may carry the protocol: never prompt on it.
    let metrics = Metrics::new();
    let host = common.serving_host(sink, &metrics, serve.tiered).await?;
    let location =
        host.location(std::env::current_dir().context("cannot read the current directory")?);
    let mut server = McpServer::new(location).ask_clients(!common.yes);
    if let Some((key, previous)) = &serve.state_keys {
        let keys = StateKeys::from_files(key, previous.as_deref()).map_err(|e| usage(e.into()))?;
        server = server.state_keys(keys);
    }
    let server = server.with_metrics(metrics);
    let _metrics = serve_metrics(&server, serve.metrics).await?;
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    // Clients are answered while the plugins compile: requests for tools
    // wait for them.
    let loading = server.loading();
    let serving = transport(&server, &serve, stop.clone()).await?;
    let mut serving = std::pin::pin!(serving);
    let loaded = tokio::select! {
        loaded = load(&server, specs, serve.watch, loading) => loaded,
        served = &mut serving => return finished(&server, served),
    };
    let _watcher = match loaded {
        Ok(watcher) => watcher,
        Err(failure) => {
            stop.cancel();
            let _ = serving.await;
            return Err(failure);
        }
    };
    finished(&server, serving.await)
}

/// Loads every plugin and bridged server, then starts watching; loading
/// ends (and waiting requests go on) when this returns.
async fn load(
    server: &McpServer,
    specs: Specs,
    watch: bool,
    _loading: Loading,
) -> Result<Option<Watcher>, Failure> {
    for spec in specs.plugins {
        server.load(spec.source, spec.options).await?;
    }
    for config in specs.servers {
        for warning in server.connect_mcp(config).await? {
            stdio::note(&terminal::line(&warning));
        }
    }
    if !watch {
        return Ok(None);
    }
    Ok(Some(server.watch().map_err(serve_failure)?))
}

/// The transport, bound and ready: it serves until `stop`.
async fn transport(
    server: &McpServer,
    serve: &Serve,
    stop: CancellationToken,
) -> Result<impl std::future::Future<Output = Result<(), ServeError>> + use<>, Failure> {
    let server = server.clone();
    let grace = serve.grace;
    let http = match serve.http {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))
                .map_err(usage)?;
            let options = HttpOptions {
                grace,
                ..serve.options.clone()
            };
            let http = server.http(listener, options).map_err(serve_failure)?;
            stdio::note(&format!(
                "toolhost: serving MCP at http://{}/mcp",
                http.local_addr()
            ));
            Some(http)
        }
        None => None,
    };
    Ok(async move {
        match http {
            Some(http) => http.run(stop).await,
            None => server.serve_stdio(stop, grace).await,
        }
    })
}

/// Serves metrics at `addr` until the returned guard is dropped: past the
/// end of a stop, so a scrape sees the drain.
async fn serve_metrics(
    server: &McpServer,
    addr: Option<SocketAddr>,
) -> Result<Option<tokio_util::sync::DropGuard>, Failure> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for metrics"))
        .map_err(usage)?;
    let local = listener
        .local_addr()
        .with_context(|| format!("cannot listen on {addr} for metrics"))?;
    let stop = CancellationToken::new();
    let server = server.clone();
    let serving = stop.clone();
    tokio::spawn(async move { server.serve_metrics(listener, serving).await });
    stdio::note(&format!(
        "toolhost: serving metrics at http://{local}/metrics"
    ));
    Ok(Some(stop.drop_guard()))
}

/// The exit code once serving ended: a failed transport is operational,
/// and so is an outcome the event log could not record.
fn finished(server: &McpServer, served: Result<(), ServeError>) -> Result<u8, Failure> {
    served.map_err(serve_failure)?;
    match server.lost_outcomes() {
        0 => Ok(exit::COMPLETED),
        lost => Err(Failure {
            code: exit::DEFECT,
            error: anyhow::anyhow!(
                "{lost} outcomes could not be recorded in the event log; see the errors above"
            ),
        }),
    }
}

/// Unsafe options are the user's to fix (exit 2); a failed transport is
/// operational (exit 4).
fn serve_failure(e: ServeError) -> Failure {
    match e {
        ServeError::Config(_) | ServeError::Watch { .. } => usage(e.into()),
        other => other.into(),
    }
}

/// Plugins named by path; a directory stands for the `.wasm` components in
/// it, its `toolhost.toml` and those of its subdirectories, in name order.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in read_dir(path)? {
            if entry.is_dir() {
                let manifest = entry.join("toolhost.toml");
                if manifest.is_file() {
                    found.push(manifest);
                }
            } else if entry.extension().is_some_and(|e| e == "wasm")
                || entry.file_name().is_some_and(|n| n == "toolhost.toml")
            {
                found.push(entry);
            }
        }
        if found.is_empty() {
            return Err(usage(anyhow::anyhow!(
                "{} holds no .wasm component and no toolhost.toml; name plugin files or manifests",
                path.display()
            )));
        }
        out.extend(found);
    }
    Ok(out)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))
        .map_err(usage)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries)
}

/// SIGINT or SIGTERM: stop accepting, let calls finish within the grace
/// period, cancel the rest.
async fn stop_on_signal(stop: CancellationToken) {
    // Never, if the signals cannot be watched: a failed registration is not
    // a request to stop.
    crate::signalled().await;
    stop.cancel();
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn defaults_are_the_library_constants() {
        let serve = Flags::try_parse_from(["serve"]).unwrap().serve;
        assert_eq!(serve.grace, GRACE);
        assert_eq!(serve.header_timeout, limits::HEADER_READ_TIMEOUT);
        assert_eq!(serve.body_timeout, limits::BODY_IDLE_TIMEOUT);
        assert_eq!(serve.body_deadline, limits::BODY_READ_TIMEOUT);
        assert_eq!(serve.session_idle, limits::SESSION_IDLE_EXPIRY);
        assert_eq!(
            serve.max_buffered,
            limits::MAX_BUFFERED_REQUEST_BYTES as u64
        );
        assert_eq!(serve.max_connections, limits::MAX_CONNECTIONS);
        assert_eq!(serve.max_sessions, limits::MAX_SESSIONS);
    }
}
