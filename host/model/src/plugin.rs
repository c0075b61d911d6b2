//! The identity of a loaded plugin.

use std::path::PathBuf;

use serde::Serialize;

/// How a plugin path names a plugin in an OCI registry (R41).
pub const OCI_SCHEME: &str = "oci://";

/// Which compiler made the code a plugin's new calls run (see
/// `toolhost::HostBuilder::tiered_compilation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
// Not `#[non_exhaustive]`: the runtime maps each tier to a compiler, and a
// new tier is a change every layer must make.
pub enum CodeTier {
    /// Wasmtime's baseline compiler, Winch: compiles several times faster,
    /// runs slower. A plugin runs it only until its optimized code is ready.
    Baseline,
    /// Cranelift, wasmtime's optimizing compiler.
    Optimized,
}

/// Identity of a loaded plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// Its name: from the manifest, else the file stem.
    pub name: String,
    /// Its version: from the manifest, else a short content hash.
    pub version: String,
    /// Where it was loaded from.
    pub path: PathBuf,
    /// BLAKE3 hash of the component bytes.
    pub digest: String,
    /// Whether compilation was skipped thanks to the compile cache.
    pub from_cache: bool,
}
