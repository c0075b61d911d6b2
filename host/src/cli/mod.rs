//! Argument parsing, plugin loading shared by the commands, and exit codes.

mod call;
mod check;
mod compile;
mod list;
mod prompt;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use toolhost::grants::{DirGrant, EnvGrant};
use toolhost::manifest::{Manifest, parse_duration, parse_size};
use toolhost::permission::{Rule, Rules};
use toolhost::{Activation, EventSink, Host, Limits, Location, PluginOptions};

/// Exit codes: the CLI's interface for CI.
pub(crate) mod exit {
    /// The call completed (or every check passed).
    pub const COMPLETED: u8 = 0;
    /// The tool returned a model-visible error (or a check failed).
    pub const TOOL_ERROR: u8 = 1;
    /// Bad usage or bad input: arguments, plugin files, manifests.
    pub const USAGE: u8 = 2;
    /// The call was interrupted: cancelled, deadline or fuel.
    pub const INTERRUPTED: u8 = 3;
    /// A defect or operational failure.
    pub const DEFECT: u8 = 4;
}

#[derive(Parser)]
#[command(
    name = "toolhost",
    version,
    about = "Run agent tools written as WebAssembly components"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the tools that plugins register, in load order (later wins).
    List {
        /// Plugins: .wasm components or .toml manifests.
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Call one tool and print its content (or, with --json, the outcome).
    Call {
        /// The plugin: a .wasm component or a .toml manifest.
        plugin: PathBuf,
        /// The tool's name.
        tool: String,
        /// The input as JSON, or `-` to read it from stdin.
        #[arg(long, short, default_value = "{}")]
        input: String,
        #[command(flatten)]
        common: Common,
    },
    /// Load, activate and validate plugins, and run their sample calls.
    Check {
        /// Plugins: .wasm components or .toml manifests.
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Compile plugins into the compile cache.
    Compile {
        /// Plugins: .wasm components or .toml manifests.
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

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
    #[arg(long = "allow", value_name = "ACTION:PATTERN")]
    allow: Vec<Rule>,
    /// Approve every permission request that asks.
    #[arg(long)]
    yes: bool,
    /// Grant a directory read-only: HOST[::GUEST] (repeatable).
    #[arg(long = "dir", value_name = "HOST[::GUEST]")]
    dirs: Vec<String>,
    /// Grant a directory read-write: HOST[::GUEST] (repeatable).
    #[arg(long = "dir-rw", value_name = "HOST[::GUEST]")]
    dirs_rw: Vec<String>,
    /// Grant an environment variable: NAME[=VALUE] (repeatable).
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Show guest stdout/stderr and usage.
    #[arg(long, short)]
    pub(crate) verbose: bool,
    /// Where oversized outputs are retained.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Compile cache directory (default: ~/.cache/toolhost).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not use the compile cache.
    #[arg(long)]
    no_cache: bool,
}

/// An error that maps to an exit code.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        let error = e.into();
        // Plugin files, manifests and arguments are the user's input.
        let code = match error.downcast_ref::<toolhost::Error>() {
            Some(toolhost::Error::Load(_) | toolhost::Error::Grant(_)) => exit::USAGE,
            _ => exit::DEFECT,
        };
        Failure { code, error }
    }
}

pub(crate) fn usage(error: anyhow::Error) -> Failure {
    Failure {
        code: exit::USAGE,
        error,
    }
}

pub(crate) fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::COMPLETED
            });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::DEFECT);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::List { plugins, common } => list::run(&plugins, &common).await,
            Command::Call {
                plugin,
                tool,
                input,
                common,
            } => call::run(&plugin, &tool, &input, &common).await,
            Command::Check { plugins, common } => check::run(&plugins, &common).await,
            Command::Compile { plugins, common } => compile::run(&plugins, &common),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {}", one_line(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

impl Common {
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel,
            timeout: self.timeout,
            memory: self.memory,
        }
    }

    pub(crate) fn host(&self, sink: Option<Arc<dyn EventSink>>) -> Result<Host, Failure> {
        let mut builder = Host::builder().rules(Rules(self.allow.clone()));
        if let Some(sink) = sink {
            builder = builder.event_sink(sink);
        }
        if self.yes {
            builder = builder.approver(Arc::new(prompt::Yes));
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            builder = builder.approver(Arc::new(prompt::Terminal));
        }
        if let Some(dir) = &self.output_dir {
            builder = builder.output_dir(dir);
        }
        if !self.no_cache {
            builder = match &self.cache_dir {
                Some(dir) => builder.cache_dir(dir),
                None => builder.default_cache(),
            };
        }
        Ok(builder.build()?)
    }

    /// Grants and limits from flags, over what a manifest says.
    fn apply(&self, options: &mut PluginOptions) {
        let limits = self.limits();
        options.limits = Limits {
            fuel: limits.fuel.or(options.limits.fuel),
            timeout: limits.timeout.or(options.limits.timeout),
            memory: limits.memory.or(options.limits.memory),
        };
        let dirs = self.dirs.iter().map(|d| DirGrant::parse(d, false));
        let rw = self.dirs_rw.iter().map(|d| DirGrant::parse(d, true));
        options.grants.dirs.extend(dirs.chain(rw));
        options
            .grants
            .env
            .extend(self.env.iter().map(|e| EnvGrant::parse(e)));
    }
}

/// A plugin named on the command line: a component or a manifest entry.
pub(crate) struct Spec {
    pub(crate) path: PathBuf,
    pub(crate) samples: Option<PathBuf>,
    pub(crate) options: PluginOptions,
}

/// Expands `.wasm` paths and manifests into plugin specs.
pub(crate) fn specs(paths: &[PathBuf], common: &Common) -> Result<Vec<Spec>, Failure> {
    let mut out = Vec::new();
    for path in paths {
        if path.extension().is_some_and(|e| e == "toml") {
            for m in Manifest::load(path).map_err(toolhost::Error::from)? {
                let mut options = m.options;
                common.apply(&mut options);
                out.push(Spec {
                    path: m.path,
                    samples: m.samples,
                    options,
                });
            }
        } else {
            let mut options = PluginOptions::default();
            common.apply(&mut options);
            out.push(Spec {
                samples: samples_beside(path),
                path: path.clone(),
                options,
            });
        }
    }
    Ok(out)
}

/// `name.samples.toml` beside `name.wasm`, if it exists.
fn samples_beside(wasm: &Path) -> Option<PathBuf> {
    let candidate = wasm.with_extension("samples.toml");
    candidate.exists().then_some(candidate)
}

/// Loads and activates every spec into one location, in order.
pub(crate) async fn activate_all(
    host: &Host,
    specs: &[Spec],
) -> Result<(Location, Vec<Activation>), Failure> {
    let location =
        host.location(std::env::current_dir().context("cannot read the current directory")?);
    let mut activations = Vec::new();
    for spec in specs {
        activations.push(location.load(&spec.path, &spec.options).await?);
    }
    Ok((location, activations))
}
