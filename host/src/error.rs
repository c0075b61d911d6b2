//! The library's error types.

use std::path::PathBuf;

use crate::model::outcome::{Defect, HostFault};

/// Why a plugin could not be loaded. Every message names the file and says
/// what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file does not exist or cannot be read.
    #[error("cannot read plugin {}: {source}; check the path", path.display())]
    Read {
        /// The plugin path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not a regular file (a directory, FIFO, device or socket).
    #[error("{} is {kind}, not a file; pass the path of a .wasm component or a plugin manifest (.toml)", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// Larger than the loader reads.
    #[error("{} is larger than {limit} bytes, the most the loader reads; is it really a plugin?", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// Not a WebAssembly binary at all.
    #[error("{} is not a WebAssembly file; pass a .wasm component built for wasm32-wasip2, or a plugin manifest (.toml)", path.display())]
    NotWasm {
        /// The plugin path.
        path: PathBuf,
    },
    /// A core module, not a component.
    #[error("{} is a core WebAssembly module, not a component; build it with `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)", path.display())]
    CoreModule {
        /// The plugin path.
        path: PathBuf,
    },
    /// The component does not validate or compile.
    #[error("{} is not a valid WebAssembly component: {reason}", path.display())]
    Invalid {
        /// The plugin path.
        path: PathBuf,
        /// The validator's or compiler's words.
        reason: String,
    },
    /// Built against another version of the plugin world.
    #[error("{} was built for {found}, but this host implements toolhost:plugin@{expected}; rebuild the plugin with a matching toolhost-sdk (0.1.x)", path.display())]
    IncompatibleVersion {
        /// The plugin path.
        path: PathBuf,
        /// The interface name and version the plugin uses.
        found: String,
        /// The version this host implements.
        expected: &'static str,
    },
    /// A component of some other world.
    #[error("{} is not a Toolhost plugin: it does not export toolhost:plugin/plugin@0.1.x (it exports: {exports}); build it against the WIT world in wit/", path.display())]
    WrongWorld {
        /// The plugin path.
        path: PathBuf,
        /// What it exports instead.
        exports: String,
    },
    /// It imports something the host does not provide.
    #[error("{} cannot be linked: {reason}; plugins may import only WASI 0.2 and toolhost:plugin interfaces", path.display())]
    Link {
        /// The plugin path.
        path: PathBuf,
        /// The linker's words.
        reason: String,
    },
    /// A plugin manifest is malformed.
    #[error("invalid plugin manifest {}: {message}", path.display())]
    Manifest {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong, with the line.
        message: String,
    },
}

/// Why grants cannot be applied.
#[derive(Debug, thiserror::Error)]
#[error("cannot grant directory {}: {reason}; check that it exists and is readable", host.display())]
pub struct GrantError {
    /// The directory.
    pub host: PathBuf,
    /// Why it cannot be granted.
    pub reason: String,
}

/// The library's top-level error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A plugin could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A plugin's `activate` returned an error.
    #[error("plugin {plugin} failed to activate: {message}")]
    Activation {
        /// The plugin's name.
        plugin: String,
        /// The plugin's message.
        message: String,
    },
    /// A plugin misbehaved during activation.
    #[error(transparent)]
    Defect(#[from] Defect),
    /// The host could not run the plugin (e.g. every instance slot busy).
    #[error(transparent)]
    Fault(#[from] HostFault),
    /// Activation was interrupted by its budget.
    #[error("plugin {plugin} did not finish activating within its {limit} budget")]
    ActivationInterrupted {
        /// The plugin's name.
        plugin: String,
        /// Which limit.
        limit: &'static str,
    },
    /// A grant cannot be applied.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// Host configuration is invalid.
    #[error("invalid host configuration: {0}")]
    Config(String),
    /// The engine failed in a way no plugin caused.
    #[error("engine error: {0}")]
    Engine(String),
}

impl Error {
    pub(crate) fn engine(e: wasmtime::Error) -> Error {
        Error::Engine(format!("{e:#}"))
    }
}
