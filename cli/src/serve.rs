//! `toolhost serve PLUGIN|MANIFEST|DIR... [--http ADDR] [--watch]`: the
//! plugins' tools over MCP, on stdio or streamable HTTP, until the client
//! leaves or SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use toolhost::{EventSink, HttpOptions, JsonLinesSink, McpServer, ServeError};

use crate::common::{Common, specs};
use crate::{Failure, exit, stdio, terminal, usage};

/// What `serve` takes besides the common flags.
pub(crate) struct Serve {
    pub(crate) plugins: Vec<PathBuf>,
    pub(crate) http: Option<SocketAddr>,
    pub(crate) watch: bool,
    pub(crate) token: Option<String>,
    pub(crate) events: Option<PathBuf>,
    pub(crate) grace: Duration,
}

pub(crate) async fn run(serve: Serve, common: &Common) -> Result<u8, Failure> {
    let paths = expand(&serve.plugins)?;
    let sink: Option<Arc<dyn EventSink>> = match &serve.events {
        Some(file) => Some(Arc::new(JsonLinesSink::open(file).with_context(|| {
            format!("cannot open the event log {}", file.display())
        })?)),
        None => None,
    };
    // Stdin may carry the protocol: never prompt on it.
    let host = common.host(sink, false)?;
    let location =
        host.location(std::env::current_dir().context("cannot read the current directory")?);
    let server = McpServer::new(location).ask_clients(!common.yes);
    let specs = specs(&paths, common)?;
    for spec in specs.plugins {
        server.load(&spec.path, spec.options).await?;
    }
    for config in specs.servers {
        for warning in server.connect_mcp(config).await? {
            stdio::note(&terminal::line(&warning));
        }
    }
    let _watcher = if serve.watch {
        Some(server.watch().map_err(serve_failure)?)
    } else {
        None
    };
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    match serve.http {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))
                .map_err(usage)?;
            let options = HttpOptions {
                token: serve.token,
                grace: serve.grace,
                ..HttpOptions::default()
            };
            let http = server.http(listener, options).map_err(serve_failure)?;
            let bound = http.local_addr();
            stdio::note(&format!("toolhost: serving MCP at http://{bound}/mcp"));
            http.run(stop).await.map_err(serve_failure)?;
        }
        None => server
            .serve_stdio(stop, serve.grace)
            .await
            .map_err(serve_failure)?,
    }
    Ok(exit::COMPLETED)
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
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    stop.cancel();
}
