//! The `toolhost` command: the same engine for plugin authors and CI.
//! Argument parsing, the commands, and the exit codes that are its
//! interface.

#[cfg(unix)]
mod allocator;
mod call;
mod check;
mod common;
mod compile;
mod grants;
mod junit;
mod list;
mod logging;
mod new;
#[cfg(feature = "oci")]
mod oci;
#[cfg(feature = "oci")]
mod oci_args;
mod prompt;
#[cfg(feature = "mcp")]
mod serve;
mod std_tools;
mod stdio;
mod store;
mod terminal;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::common::Common;

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
    /// Log lines on stderr as text, or as JSON (one object a line).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "FORMAT",
        default_value = "text",
        env = "TOOLHOST_LOG_FORMAT"
    )]
    log_format: logging::Format,
}

#[derive(Subcommand)]
enum Command {
    /// List the tools that plugins register, in load order (later wins).
    List {
        /// Plugins: .wasm components or .toml manifests.
        #[arg(required_unless_present_any = ["std", "std_readonly"])]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        std: std_tools::StdArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Call one tool and print its content (or, with --json, the outcome).
    Call {
        /// The plugin: a .wasm component or a .toml manifest. With --std
        /// and no TOOL, the tool's name (a standard tool's).
        plugin: PathBuf,
        /// The tool's name.
        #[arg(required_unless_present_any = ["std", "std_readonly"])]
        tool: Option<String>,
        /// The input as JSON, or `-` to read it from stdin.
        #[arg(long, short, default_value = "{}")]
        input: String,
        #[command(flatten)]
        std: std_tools::StdArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Load, activate and validate plugins, and run their sample calls.
    Check {
        /// Plugins: .wasm components or .toml manifests.
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
        /// Also write a JUnit XML report of the checks to FILE, for CI
        /// systems that render one.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Serve the plugins' tools over the Model Context Protocol (stdio, or
    /// streamable HTTP with --http).
    #[cfg(feature = "mcp")]
    Serve {
        /// Plugins: .wasm components, .toml manifests, or directories of them.
        #[arg(required_unless_present_any = ["std", "std_readonly"])]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        std: std_tools::StdArgs,
        #[command(flatten)]
        serve: Box<serve::ServeArgs>,
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
    /// Push a plugin to an OCI registry (wasm artifact layout), with its
    /// name, version, WIT world and tool names as annotations; --sign signs
    /// it as cosign does.
    #[cfg(feature = "oci")]
    Push(Box<oci::PushArgs>),
    /// Pull and verify the oci:// plugins that manifests name and pin
    /// their digests in ./toolhost.lock.
    #[cfg(feature = "oci")]
    Lock {
        /// Manifests (or oci:// references).
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Show an oci:// plugin's digest, annotations and signers without
    /// running it or pulling its component.
    #[cfg(feature = "oci")]
    Inspect {
        /// oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST.
        reference: String,
        /// Also write the manifest's exact bytes to FILE: what a keyless
        /// signature signs (`python -m sigstore sign FILE`).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Sign a pushed oci:// plugin: with a key (--key), or by attaching a
    /// keyless Sigstore bundle of its manifest (--bundle).
    #[cfg(feature = "oci")]
    Sign(Box<oci::SignArgs>),
    /// List recorded outcomes from the store, newest first.
    Events(store::EventsArgs),
    /// Print a retained output (the full text behind a bounding marker).
    Output(store::OutputArgs),
    /// Compile one plugin sent on stdin for a toolhost that runs this as
    /// its compile worker (not for direct use).
    #[command(name = COMPILE_WORKER_COMMAND, hide = true)]
    CompileWorker,
    /// Create a plugin project: example tool, manifest, samples, build
    /// script, CI workflow and README.
    New {
        /// The plugin's name: lowercase letters, digits, `-` and `_`.
        name: String,
        /// The language to write the plugin in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
        /// The project directory to create (default: ./NAME); if it exists,
        /// it must be empty.
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
    },
}

/// The hidden command that makes this binary a compile worker: plugins
/// compile in a process of their own, killed at their limits.
pub(crate) const COMPILE_WORKER_COMMAND: &str = "__compile-worker";

/// How long the CLI waits for blocking threads once its work is done.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(100);

/// An error that maps to an exit code.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        let error = e.into();
        // Plugin files, manifests, MCP servers and arguments are the user's
        // input.
        let code = match error.downcast_ref::<toolhost::Error>() {
            Some(
                toolhost::Error::Load(_)
                | toolhost::Error::Grant(_)
                | toolhost::Error::Mcp { .. }
                | toolhost::Error::Oci(_),
            ) => exit::USAGE,
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

fn main() -> ExitCode {
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
    if let Command::CompileWorker = cli.command {
        // Before logging starts: the worker's stderr is its error message.
        return ExitCode::from(toolhost::compile_worker());
    }
    logging::init(cli.log_format);
    // The OCI client (oci-client's reqwest) takes the process's rustls
    // crypto provider, which the library leaves to its program: ring, the
    // provider the rest of Toolhost's TLS uses.
    #[cfg(feature = "oci")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    #[cfg(feature = "mcp")]
    if let Command::Serve { serve, .. } = &cli.command {
        if let Some(workers) = serve.workers {
            runtime.worker_threads(workers.into());
        }
        #[cfg(unix)]
        allocator::return_idle_pages();
    }
    let runtime = match runtime.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            stdio::note(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::from(exit::DEFECT);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::List {
                plugins,
                std,
                common,
            } => until_signal(list::run(&plugins, &std, &common)).await,
            Command::Call {
                plugin,
                tool,
                input,
                std,
                common,
            } => {
                // `call --std DIR TOOL`: the one name is a standard tool's.
                let (plugins, tool) = match tool {
                    Some(tool) => (vec![plugin], tool),
                    None => (Vec::new(), plugin.to_string_lossy().into_owned()),
                };
                call::run(&plugins, &tool, &input, &std, &common).await
            }
            Command::Check {
                plugins,
                junit,
                common,
            } => until_signal(check::run(&plugins, junit.as_deref(), &common)).await,
            Command::Compile { plugins, common } => {
                until_signal(compile::run(&plugins, &common)).await
            }
            #[cfg(feature = "oci")]
            Command::Push(args) => until_signal(oci::push(&args)).await,
            #[cfg(feature = "oci")]
            Command::Lock { plugins, common } => until_signal(oci::lock(&plugins, &common)).await,
            #[cfg(feature = "oci")]
            Command::Inspect {
                reference,
                manifest,
                common,
            } => until_signal(oci::inspect(&reference, manifest.as_deref(), &common)).await,
            #[cfg(feature = "oci")]
            Command::Sign(args) => until_signal(oci::sign(&args)).await,
            Command::Events(args) => store::events(&args).await,
            Command::Output(args) => store::output(&args).await,
            Command::CompileWorker => unreachable!("handled before the runtime starts"),
            Command::New { name, lang, dir } => new::run(&name, lang, dir.as_deref()),
            #[cfg(feature = "mcp")]
            Command::Serve {
                plugins,
                std,
                serve,
                common,
            } => serve::run((*serve).into_serve(plugins), &std, &common).await,
        }
    });
    // A blocking thread can still be stuck on a guest's behalf (a prompt
    // waiting for stdin after the call's deadline, a slow file): dropping
    // the runtime would wait for it forever, so give it a moment and go.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            stdio::note(&format!("error: {}", one_line(&f.error)));
            ExitCode::from(f.code)
        }
    }
}

/// Runs a command that loads plugins until it ends or SIGINT or SIGTERM
/// arrives (even if the signal was ignored when this process started). A
/// signal ends it with the interrupted exit code; dropping the command
/// kills any compile worker it was waiting for.
async fn until_signal(work: impl Future<Output = Result<u8, Failure>>) -> Result<u8, Failure> {
    tokio::select! {
        done = work => done,
        signal = signalled() => Err(Failure {
            code: exit::INTERRUPTED,
            error: anyhow::anyhow!("interrupted by {signal}"),
        }),
    }
}

/// The name of the first SIGINT or SIGTERM to arrive; never, if they
/// cannot be watched.
async fn signalled() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
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
