//! What every command shares: the common flags, building the host, and
//! turning command-line plugins (components and manifests) into loaded,
//! activated plugins.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use toolhost::config::{
    CompileWorker, DirGrant, EnvGrant, HttpGrant, McpServerConfig, PluginOptions,
};
use toolhost::events::EventSink;
use toolhost::files::read_regular_file;
use toolhost::manifest::Source;
use toolhost::manifest::units::{parse_duration, parse_size};
use toolhost::permission::{Effect, Rule, Rules};
use toolhost::store::Store;
use toolhost::{
    Activation, Budget, BudgetOverrides, Host, HostBuilder, LoadError, Location, PluginSource,
};
#[cfg(feature = "mcp")]
use toolhost_mcp::{McpConnection, MeteredStore, Metrics};

use crate::store::StoreArgs;
use crate::{Failure, grants, prompt};

/// Instance slots of a command that makes its calls and exits (`call`,
/// `list`, `check`, `compile`, `push`): its activations plus the calls it
/// runs at once. The pooling allocator prepares every slot when the host
/// starts (a guard page per stack), so `serve`'s default of 1,000 would
/// cost a one-shot command milliseconds.
const ONE_SHOT_MAX_INSTANCES: u32 = 128;

/// Flags every command takes.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// Print machine-readable JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Fuel budget per call (roughly, wasm instructions).
    #[arg(long)]
    fuel: Option<u64>,
    /// Wall-clock deadline per call, e.g. 200ms, 5s.
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Linear-memory limit per call, e.g. 16MiB.
    #[arg(long, value_parser = parse_size)]
    memory: Option<u64>,
    /// Allow a permission: ACTION:PATTERN, e.g. edit:/tmp/* (repeatable).
    #[arg(long = "allow", value_name = "ACTION:PATTERN", value_parser = parse_allow)]
    allow: Vec<Rule>,
    /// Approve every permission request that asks, and confirm a manifest's
    /// grants.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Grant a directory read-only: HOST[::GUEST] (repeatable).
    #[arg(long = "dir", value_name = "HOST[::GUEST]")]
    dirs: Vec<String>,
    /// Grant a directory read-write: HOST[::GUEST] (repeatable).
    #[arg(long = "dir-rw", value_name = "HOST[::GUEST]")]
    dirs_rw: Vec<String>,
    /// Grant an environment variable: NAME[=VALUE] (repeatable).
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Grant outbound HTTP to an origin: [METHODS ]scheme://host[:port][/path-glob],
    /// e.g. https://api.github.com/* (repeatable).
    #[arg(long = "allow-http", value_name = "PATTERN")]
    allow_http: Vec<HttpGrant>,
    /// Also trust the root certificates in this PEM file for HTTPS.
    #[arg(long = "http-ca", value_name = "FILE")]
    http_ca: Vec<PathBuf>,
    /// Configuration passed to every plugin's `activate`, replacing a
    /// manifest's `[config]`: a JSON object, or @FILE to read one from a file.
    #[arg(long, value_name = "JSON|@FILE", value_parser = parse_config)]
    config: Option<serde_json::Value>,
    /// Show guest stdout/stderr and usage.
    #[arg(long, short)]
    pub(crate) verbose: bool,
    #[command(flatten)]
    store: StoreArgs,
    /// Compile cache directory (default: ~/.cache/toolhost).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not use the compile cache.
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Instance slots the pooling allocator reserves at start, across all
    /// plugins: live activations plus calls in flight (default: 1000 for
    /// `serve`, 128 for other commands). Each reserves address space for a
    /// linear memory; lower it where address space is capped (`ulimit -v`,
    /// valgrind).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_instances: Option<u32>,
    /// Code Mode: also advertise `execute`, which runs a JavaScript program
    /// that calls the other tools and returns what it chooses.
    #[arg(long)]
    code_mode: bool,
    #[cfg(feature = "oci")]
    #[command(flatten)]
    oci: crate::oci_args::OciArgs,
}

impl Common {
    pub(crate) fn overrides(&self) -> BudgetOverrides {
        BudgetOverrides {
            fuel: self.fuel,
            timeout: self.timeout,
            memory: self.memory,
        }
    }

    /// The host for a command; `may_prompt` lets permission questions be
    /// asked on the terminal (not when stdin carries a protocol).
    pub(crate) async fn host(
        &self,
        sink: Option<Arc<dyn EventSink>>,
        may_prompt: bool,
    ) -> Result<Host, Failure> {
        let store = self.store.given().await?;
        // A command that makes its calls and exits would only waste the
        // work of instances made ahead.
        Ok(self.builder(sink, may_prompt, store, false)?.build()?)
    }

    /// The host of `serve`: its store (the embedded one too) opened now and
    /// its operations counted in `metrics`, its plugins compiled in tiers
    /// if `tiered`; permission questions are never asked on the terminal.
    #[cfg(feature = "mcp")]
    pub(crate) async fn serving_host(
        &self,
        sink: Option<Arc<dyn EventSink>>,
        metrics: &Metrics,
        tiered: bool,
    ) -> Result<Host, Failure> {
        let store = self.store.open().await?;
        let store: Arc<dyn Store> = Arc::new(MeteredStore::new(store, metrics.clone()));
        let builder = self.builder(sink, false, Some(store), true)?;
        Ok(builder.tiered_compilation(tiered).build()?)
    }

    fn builder(
        &self,
        sink: Option<Arc<dyn EventSink>>,
        may_prompt: bool,
        store: Option<Arc<dyn Store>>,
        warm: bool,
    ) -> Result<HostBuilder, Failure> {
        // The host's budget is `execute`'s (and native tools'); plugins take
        // the same overrides through their options.
        let mut builder = Host::builder()
            .rules(Rules(self.allow.clone()))
            .budget(Budget::default().with(&self.overrides()));
        if !warm {
            builder = builder
                .warm_instances(0, toolhost::limits::WARM_IDLE)
                .max_instances(ONE_SHOT_MAX_INSTANCES);
        }
        if let Some(slots) = self.max_instances {
            builder = builder.max_instances(slots);
        }
        if self.code_mode {
            builder = builder.code_mode(interpreter()?);
        }
        if let Some(sink) = sink {
            builder = builder.event_sink(sink);
        }
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if self.yes {
            builder = builder.approver(Arc::new(prompt::Yes));
        } else if may_prompt && terminal {
            builder = builder.approver(Arc::new(prompt::Terminal));
        }
        if let Some(store) = store {
            builder = builder.store(store);
        }
        // The CLI keeps its store on disk: the state directory given, else
        // the per-user one (a library host without either keeps it in
        // memory).
        builder = match self.store.state_dir() {
            Some(dir) => builder.state_dir(dir),
            None => builder.default_state_dir(),
        };
        builder = builder.store_durability(self.store.durability());
        for pem in &self.http_ca {
            builder = builder.http_root_certificates(pem);
        }
        // Compile bombs are killed at their limits in a worker: this binary.
        if let Ok(exe) = std::env::current_exe() {
            builder =
                builder.compile_worker(CompileWorker::new(exe).arg(crate::COMPILE_WORKER_COMMAND));
        }
        #[cfg(feature = "oci")]
        {
            builder = builder.distribution(self.distribution()?);
        }
        if !self.no_cache {
            builder = match &self.cache_dir {
                Some(dir) => builder.cache_dir(dir),
                None => builder.default_cache(),
            };
        }
        Ok(builder)
    }

    /// Where `oci://` plugins come from: the content store in the state
    /// directory, the trust flags, `--http-ca`.
    #[cfg(feature = "oci")]
    pub(crate) fn distribution(&self) -> Result<toolhost::oci::Distribution, Failure> {
        let state = self
            .store
            .state_dir()
            .cloned()
            .unwrap_or_else(toolhost::store::default_state_dir);
        self.oci.distribution(&state, &self.http_ca)
    }

    /// Grants, limits and configuration from flags, over what a manifest
    /// says.
    pub(crate) fn apply(&self, options: &mut PluginOptions) {
        options.overrides = self.overrides().or(options.overrides);
        if let Some(config) = &self.config {
            options.config = config.clone();
        }
        let dirs = self.dirs.iter().map(|d| parse_dir(d, false));
        let rw = self.dirs_rw.iter().map(|d| parse_dir(d, true));
        options.grants.dirs.extend(dirs.chain(rw));
        options
            .grants
            .env
            .extend(self.env.iter().map(|e| parse_env(e)));
        options.grants.http.extend(self.allow_http.iter().cloned());
    }
}

/// The Code Mode interpreter this binary embeds.
#[cfg(feature = "code-mode")]
fn interpreter() -> Result<&'static [u8], Failure> {
    Ok(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/interpreter.wasm"
    )))
}

#[cfg(not(feature = "code-mode"))]
fn interpreter() -> Result<&'static [u8], Failure> {
    Err(crate::usage(anyhow::anyhow!(
        "this toolhost was built without Code Mode (the `code-mode` feature); rebuild it with default features to use --code-mode"
    )))
}

/// A plugin named on the command line: a component or a manifest entry.
pub(crate) struct Spec {
    pub(crate) source: PluginSource,
    pub(crate) samples: Option<PathBuf>,
    pub(crate) options: PluginOptions,
}

/// What the command line names: plugins, and MCP servers to bridge in.
pub(crate) struct Specs {
    pub(crate) plugins: Vec<Spec>,
    pub(crate) servers: Vec<McpServerConfig>,
}

/// Expands `.wasm` paths and manifests into plugin specs and MCP servers.
pub(crate) fn specs(paths: &[PathBuf], common: &Common) -> Result<Specs, Failure> {
    let mut out = Specs {
        plugins: Vec::new(),
        servers: Vec::new(),
    };
    for path in paths {
        if path.extension().is_none_or(|e| e != "toml") {
            let mut options = PluginOptions::default();
            common.apply(&mut options);
            out.plugins.push(Spec {
                samples: samples_beside(path),
                source: PluginSource::from_path(path),
                options,
            });
            continue;
        }
        for source in Source::load(path).map_err(toolhost::Error::from)? {
            match source {
                Source::Plugin(m) => {
                    // Before the flags' grants join them: those are the user's own.
                    grants::review(path, &m, common.yes)?;
                    let source = m.source();
                    let mut options = m.options;
                    common.apply(&mut options);
                    out.plugins.push(Spec {
                        source,
                        samples: m.samples,
                        options,
                    });
                }
                Source::Mcp(mut server) => {
                    if !cfg!(feature = "mcp") {
                        return Err(crate::usage(anyhow::anyhow!(
                            "{} names an MCP server, and this toolhost was built without MCP (the `mcp` feature); rebuild it with default features",
                            path.display()
                        )));
                    }
                    grants::review_mcp(path, &server, common.yes)?;
                    server.timeout = common.timeout.or(server.timeout);
                    out.servers.push(server);
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// `name.samples.toml` beside `name.wasm`, if it exists.
fn samples_beside(wasm: &Path) -> Option<PathBuf> {
    let candidate = wasm.with_extension("samples.toml");
    candidate.exists().then_some(candidate)
}

/// What keeps a command's tools registered: activations and bridges.
pub(crate) struct Held {
    pub(crate) _activations: Vec<Activation>,
    #[cfg(feature = "mcp")]
    pub(crate) _connections: Vec<McpConnection>,
}

/// Loads and activates every plugin into one location, in order, then
/// connects every MCP server; a server's skipped tools are noted on stderr.
pub(crate) async fn activate_all(host: &Host, specs: &Specs) -> Result<(Location, Held), Failure> {
    let location =
        host.location(std::env::current_dir().context("cannot read the current directory")?);
    let mut activations = Vec::new();
    for spec in &specs.plugins {
        activations.push(location.load(&spec.source, &spec.options).await?);
    }
    let held = Held {
        _activations: activations,
        #[cfg(feature = "mcp")]
        _connections: connect_all(&location, &specs.servers).await?,
    };
    Ok((location, held))
}

/// Connects every MCP server into `location`; a server's skipped tools are
/// noted on stderr.
#[cfg(feature = "mcp")]
async fn connect_all(
    location: &Location,
    servers: &[McpServerConfig],
) -> Result<Vec<McpConnection>, Failure> {
    let mut connections = Vec::new();
    for server in servers {
        let connection = McpConnection::connect(location, server.clone()).await?;
        for warning in connection.warnings() {
            crate::stdio::note(&crate::terminal::line(warning));
        }
        connections.push(connection);
    }
    Ok(connections)
}

/// `--allow ACTION:PATTERN` is an allow rule.
fn parse_allow(spec: &str) -> Result<Rule, String> {
    match spec.split_once(':') {
        Some((action, resource)) if !action.is_empty() && !resource.is_empty() => {
            Ok(Rule::new(action, resource, Effect::Allow))
        }
        _ => Err(format!(
            "`{spec}` is not ACTION:PATTERN; write for example `edit:/tmp/*` or `read:*`"
        )),
    }
}

/// The largest file `--config @FILE` reads: configuration, not data.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// `--config JSON|@FILE`: a JSON object, given inline or read from a file.
fn parse_config(spec: &str) -> Result<serde_json::Value, String> {
    let (text, source) = match spec.strip_prefix('@') {
        Some(path) => {
            let text = read_bounded(Path::new(path), MAX_CONFIG_BYTES)
                .map_err(|e| format!("cannot read {path}: {e}"))?;
            (text, path)
        }
        None => (spec.to_owned(), "the argument"),
    };
    match serde_json::from_str(&text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!(
            "{source} is JSON but not an object; write for example '{{\"mode\": \"fast\"}}'"
        )),
        Err(e) => Err(format!(
            "{source} is not valid JSON ({e}); pass a JSON object, or @FILE to read one"
        )),
    }
}

/// Reads a regular file of at most `max` bytes as text, by the library's
/// bounded reader: opened without blocking, so a FIFO in its place cannot
/// stall the CLI (R31). Its errors are put as a samples or config file's.
pub(crate) fn read_bounded(path: &Path, max: u64) -> anyhow::Result<String> {
    let bytes = read_regular_file(path, max).map_err(|e| match e {
        LoadError::Read { source, .. } => source.into(),
        LoadError::NotAFile { .. } => anyhow::anyhow!("it is not a regular file"),
        LoadError::TooLarge { limit, .. } => {
            anyhow::anyhow!("it is larger than {} KiB", limit / 1024)
        }
        other => other.into(),
    })?;
    String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("it is not UTF-8 text ({e})"))
}

/// `--dir HOST[::GUEST]`.
fn parse_dir(spec: &str, writable: bool) -> DirGrant {
    let (host, guest) = match spec.split_once("::") {
        Some((h, g)) => (h, Some(g.to_owned())),
        None => (spec, None),
    };
    DirGrant {
        host: PathBuf::from(host),
        guest,
        writable,
    }
}

/// `--env NAME[=VALUE]`.
fn parse_env(spec: &str) -> EnvGrant {
    match spec.split_once('=') {
        Some((name, value)) => EnvGrant {
            name: name.to_owned(),
            value: Some(value.to_owned()),
        },
        None => EnvGrant {
            name: spec.to_owned(),
            value: None,
        },
    }
}
