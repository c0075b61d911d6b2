//! The library's error types.

use std::path::PathBuf;

use crate::outcome::{Defect, HostFault};

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
    /// It needs what the host does not provide: found before compiling.
    #[error(
        "{} needs what Toolhost does not provide:{}\n{}",
        path.display(),
        list_unsupported(needs),
        hint.as_deref().unwrap_or(IMPORTS_ALLOWED)
    )]
    Unsupported {
        /// The plugin path.
        path: PathBuf,
        /// Each import or ABI feature the host does not provide.
        needs: Vec<Unsupported>,
        /// What to change in the build, when the tool that made it is known.
        hint: Option<String>,
    },
    /// Its imports have other types than the host's interfaces of that name.
    #[error("{} cannot be linked: {reason}; rebuild it against toolhost:plugin@0.1 and WASI 0.2 (wasm32-wasip2)", path.display())]
    Link {
        /// The plugin path.
        path: PathBuf,
        /// The linker's words.
        reason: String,
    },
    /// Compiling it went past a compile limit: it may be a compile bomb,
    /// or a plugin that needs a higher limit.
    #[error(
        "{} was not compiled: {limit}; a plugin this costly to compile may be a compile bomb; \
         if you trust it, raise the limit (`limits.compile_timeout` or `limits.compile_memory` \
         in its manifest, `PluginOptions::compile` in the library)",
        path.display()
    )]
    CompileLimit {
        /// The plugin path.
        path: PathBuf,
        /// The limit it went past.
        limit: CompileLimit,
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

/// What plugins may import, for refusals that have no better hint.
const IMPORTS_ALLOWED: &str = "plugins may import WASI 0.2 (cli, clocks, filesystem, io, random, \
     sockets, http outgoing-handler and types) and toolhost:plugin@0.1, without the \
     component-model async ABI";

/// The compile limit a plugin went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileLimit {
    /// Compiling took longer than this.
    Time(std::time::Duration),
    /// Compiling needed more than this many bytes.
    Memory(u64),
}

impl std::fmt::Display for CompileLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileLimit::Time(limit) => write!(
                f,
                "compiling it took longer than its compile time limit of {:.1} s",
                limit.as_secs_f64()
            ),
            CompileLimit::Memory(limit) => write!(
                f,
                "compiling it needed more than its compile memory limit of {} MiB",
                limit >> 20
            ),
        }
    }
}

/// One thing a plugin needs that the host does not provide.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsupported {
    /// An interface of a WASI 0.2 package that Toolhost deliberately does not
    /// link (an unstable or server-side one).
    WasiInterface(String),
    /// A WASI 0.3 interface: needs the component-model async ABI.
    Wasi03(String),
    /// Any other import: another package, or an unversioned name.
    Import(String),
    /// A component-model async (or threads) built-in, such as `task.cancel`.
    AsyncAbi(&'static str),
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsupported::WasiInterface(name) => write!(
                f,
                "imports {name}: a WASI 0.2 interface Toolhost deliberately does not provide"
            ),
            Unsupported::Wasi03(name) => write!(
                f,
                "imports {name}: WASI 0.3 needs the component-model async ABI, which Toolhost does not enable"
            ),
            Unsupported::Import(name) => {
                write!(f, "imports {name}: not an interface Toolhost provides")
            }
            Unsupported::AsyncAbi(builtin) => write!(
                f,
                "uses `{builtin}`: the component-model async ABI, which Toolhost does not enable"
            ),
        }
    }
}

fn list_unsupported(needs: &[Unsupported]) -> String {
    needs.iter().map(|n| format!("\n  - {n}")).collect()
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
    /// `activate` registered tools but closed (or dropped the handle of)
    /// every registration before returning, so the plugin provides nothing.
    #[error(
        "plugin {plugin} registered {tools} tool(s) in `activate` but no registration was \
         still open when it returned, so it provides no tools: the registration closes when \
         its handle is dropped; keep the handle `register` returns for the life of the plugin \
         (in a module-level or static variable, not a local or a `with`/`using` block)"
    )]
    RegistrationsDropped {
        /// The plugin's name.
        plugin: String,
        /// How many tools it registered.
        tools: usize,
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
    #[error("invalid host configuration: {message}")]
    Config {
        /// What is wrong, and what to do about it.
        message: String,
        /// The underlying error (a certificate file's `io::Error` or
        /// rustls' parse error, a JSON error), for an embedder to downcast;
        /// `None` when the value itself is out of range.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The engine failed in a way no plugin caused.
    #[error("engine error: {message}")]
    Engine {
        /// What failed.
        message: String,
        /// The underlying error (an `io::Error`, a task's `JoinError`,
        /// wasmtime's error boxed), for an embedder to downcast; `None`
        /// where nothing underlies it (a worker's exit status, a panic).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The Code Mode interpreter does not compile or is not a component of
    /// the `toolhost:code/interpreter` world.
    #[error(
        "cannot use the Code Mode interpreter: {reason}; pass a component built from code-mode/ (the toolhost CLI embeds one)"
    )]
    Interpreter {
        /// What failed.
        reason: String,
    },
    /// A plugin named by an `oci://` reference was not pulled, or was
    /// refused before compiling (R41).
    #[error(transparent)]
    Oci(#[from] OciError),
    /// An MCP server could not be connected to or its tools listed.
    #[error(
        "cannot bridge MCP server `{server}`: {reason}; check its command or url in the manifest"
    )]
    Mcp {
        /// The server's name.
        server: String,
        /// What failed.
        reason: String,
    },
}

impl Error {
    /// A configuration error with nothing underneath: a value out of range.
    pub fn config(message: impl Into<String>) -> Error {
        Error::Config {
            message: message.into(),
            source: None,
        }
    }

    /// A configuration error caused by `source`.
    pub fn config_caused(
        message: String,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Config {
            message,
            source: Some(Box::new(source)),
        }
    }

    /// An engine error with nothing underneath.
    pub fn engine_message(message: String) -> Error {
        Error::Engine {
            message,
            source: None,
        }
    }

    /// An engine error caused by `source`.
    pub fn engine_caused(
        message: String,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Engine {
            message,
            source: Some(Box::new(source)),
        }
    }
}

/// Why a plugin from an OCI registry was refused or could not be pulled
/// (R41). Every message names the reference and, once known, the digest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OciError {
    /// Not an `oci://REGISTRY/REPO:TAG` or `oci://REGISTRY/REPO@sha256:HEX`.
    #[error(
        "`{reference}` is not an OCI plugin reference: {reason}; write oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST"
    )]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `oci://` references need a host built with a distribution setup.
    #[error(
        "{reference}: this host pulls no plugins from registries; configure `HostBuilder::distribution`"
    )]
    NoDistribution {
        /// The reference.
        reference: String,
    },
    /// The registry could not be reached or answered with an error.
    #[error("{reference}: the registry failed: {reason}")]
    Registry {
        /// The reference.
        reference: String,
        /// What the client or the registry said.
        reason: String,
        /// The client's error (`reqwest::Error`, oci-client's), for an
        /// embedder to downcast; `None` where the reason is toolhost's own
        /// or only its text reaches here.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Plain HTTP to a registry that is not on loopback and not allowed.
    #[error(
        "{reference}: {registry} is not on loopback, so it is reached over HTTPS only; allow plain HTTP to it explicitly (`--plain-http {registry}`) only if you trust the network"
    )]
    PlainHttp {
        /// The reference.
        reference: String,
        /// The registry.
        registry: String,
    },
    /// Something pulled is larger than its bound.
    #[error(
        "{reference} ({digest}): its {what} is larger than {limit} bytes, the most Toolhost pulls"
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// The manifest digest, or the blob's when no manifest is known yet.
        digest: String,
        /// Manifest, config, layer or signature.
        what: &'static str,
        /// The bound in bytes.
        limit: u64,
    },
    /// Pulling took longer than its bound.
    #[error("{reference}: pulling took longer than {} s, the most Toolhost waits for a registry", limit.as_secs())]
    TimedOut {
        /// The reference.
        reference: String,
        /// The bound.
        limit: std::time::Duration,
    },
    /// Content does not hash to the digest that names it: tampered with,
    /// or swapped.
    #[error(
        "{reference}: digest mismatch in its {what}: expected {expected}, got {actual}; the registry served other content than the digest names, so it was refused"
    )]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// Manifest, config, layer or signature.
        what: &'static str,
        /// The digest that names it.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The artifact is not a wasm component in the wasm OCI artifact layout.
    #[error("{reference} ({digest}) is not a wasm plugin artifact: {reason}")]
    NotAPlugin {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// What is wrong.
        reason: String,
    },
    /// No signature, and the repository is not allowed unsigned.
    #[error(
        "{reference} ({digest}) was refused: no signature; sign it (`toolhost push --sign KEY`, or cosign) or, only if you trust the repository, allow it unsigned (`--allow-unsigned {repository}`)"
    )]
    Unsigned {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// REGISTRY/REPOSITORY.
        repository: String,
    },
    /// No key is trusted for the repository, and it is not allowed unsigned.
    #[error(
        "{reference} ({digest}) was refused: no trusted key or keyless signer is configured for {repository}; add one (`--trust-key {repository}=KEY.pub`, or a trust policy with `keys` or `keyless`) or, only if you trust the repository, `--allow-unsigned {repository}`"
    )]
    NoTrustedKey {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// REGISTRY/REPOSITORY.
        repository: String,
    },
    /// Signatures exist, but none is by a trusted key or keyless signer.
    #[error(
        "{reference} ({digest}) was refused: wrong signer: none of its {signatures} signature(s) is by a key or keyless identity trusted for {repository}{}",
        keyless.iter().map(|k| format!("; keyless: {k}")).collect::<String>()
    )]
    WrongSigner {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// REGISTRY/REPOSITORY.
        repository: String,
        /// How many signatures were checked.
        signatures: usize,
        /// Why each keyless signature that verified was not trusted (the
        /// identity or issuer its certificate names instead).
        keyless: Vec<String>,
    },
    /// `--locked`: verified, but not by the signer the lock file names.
    #[error("{reference} ({digest}) was refused: wrong signer: the lock file names signer {locked}, but it is signed by {}; run `toolhost lock` again if the change is expected", found.as_deref().unwrap_or("no trusted key"))]
    LockedSigner {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// The signer in the lock file.
        locked: String,
        /// The signer whose signature verified, if any (unsigned allowed).
        found: Option<String>,
    },
    /// A signature verifies but does not sign this artifact, or is malformed.
    #[error("{reference} ({digest}) was refused: bad signature: {reason}")]
    BadSignature {
        /// The reference.
        reference: String,
        /// The manifest digest.
        digest: String,
        /// What is wrong.
        reason: String,
    },
    /// `--locked`: the tag now names another digest than the lock file.
    #[error(
        "{reference} moved: the lock file pins {locked}, the registry now has {now}; run `toolhost lock` again if the change is expected"
    )]
    Moved {
        /// The reference.
        reference: String,
        /// The digest in the lock file.
        locked: String,
        /// The digest the tag names now.
        now: String,
    },
    /// `--locked`: the reference is not in the lock file.
    #[error("{reference} is not in the lock file {}; run `toolhost lock` to pin it", lock.display())]
    NotLocked {
        /// The reference.
        reference: String,
        /// The lock file.
        lock: PathBuf,
    },
    /// The registry is unreachable, and what is needed is not in the
    /// content store.
    #[error(
        "{reference}: the registry is unreachable ({reason}) and the reference is not a digest pulled before; pin it (`@sha256:…`, or `toolhost lock` and `--locked`) to load it offline"
    )]
    Offline {
        /// The reference.
        reference: String,
        /// Why the registry could not be asked.
        reason: String,
    },
    /// The local content store failed.
    #[error("the OCI content store at {} failed: {reason}", path.display())]
    Store {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        reason: String,
        /// The `io::Error` underneath, for an embedder to downcast.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A key, trust policy or lock file cannot be used.
    #[error("cannot use {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
