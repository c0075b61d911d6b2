//! The on-disk cache of compiled components: keyed by a stable hash of the
//! engine's compatibility and the wasm bytes, checksummed, and capped in size
//! with least-recently-used eviction.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::Engine;
use wasmtime::component::Component;

/// Default size cap of the compile cache: room for dozens of plugins.
pub const DEFAULT_CACHE_LIMIT: u64 = 1 << 30;

/// Magic prefix of cache files, so foreign files are rejected at once.
const CACHE_MAGIC: &[u8; 8] = b"THCACHE1";

/// Suffix of cache entries; nothing else in the directory is touched.
const ENTRY_SUFFIX: &str = ".cwasm";

/// A compile cache directory and its size cap.
#[derive(Debug)]
pub struct CompileCache {
    dir: PathBuf,
    limit: u64,
}

/// Feeds `Hash` output into BLAKE3, so the key is stable across Rust
/// releases (`DefaultHasher` is not).
struct Blake3Hasher(blake3::Hasher);

impl Hasher for Blake3Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let hash = self.0.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&hash.as_bytes()[..8]);
        u64::from_le_bytes(first)
    }
}

impl CompileCache {
    /// A cache in `dir`, trimmed to about `limit` bytes.
    pub fn new(dir: PathBuf, limit: u64) -> CompileCache {
        CompileCache { dir, limit }
    }

    /// The entry name: BLAKE3 over the engine's compatibility hash and the
    /// wasm, so another engine version or configuration never reads it.
    fn entry(&self, engine: &Engine, wasm: &[u8]) -> PathBuf {
        let mut hasher = Blake3Hasher(blake3::Hasher::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(wasm);
        let key = hasher.0.finalize().to_hex();
        self.dir.join(format!("{key}{ENTRY_SUFFIX}"))
    }

    /// A verified entry for `wasm`, if there is one. A hit counts as a use
    /// for eviction.
    pub(crate) fn load(&self, engine: &Engine, wasm: &[u8]) -> Option<Component> {
        let entry = self.entry(engine, wasm);
        let bytes = fs::read(&entry).ok()?;
        let rest = bytes.strip_prefix(CACHE_MAGIC)?;
        let (sum, payload) = rest.split_at_checked(32)?;
        if blake3::hash(payload).as_bytes() != sum {
            tracing::warn!(
                "compile cache entry {} is corrupt; rebuilding",
                entry.display()
            );
            return None;
        }
        // SAFETY: the payload is exactly what `Component::serialize` wrote
        // for this engine configuration (checked by the checksum and by the
        // compatibility hash in the key), in a cache directory only this
        // user can write.
        match unsafe { Component::deserialize(engine, payload) } {
            Ok(c) => {
                touch(&entry);
                Some(c)
            }
            Err(e) => {
                tracing::warn!(
                    "compile cache entry {} is stale ({e}); rebuilding",
                    entry.display()
                );
                None
            }
        }
    }

    /// Stores `component` for `wasm`; see [`CompileCache::store_artifact`].
    pub(crate) fn store(&self, engine: &Engine, wasm: &[u8], component: &Component) {
        match component.serialize() {
            Ok(artifact) => self.store_artifact(engine, wasm, &artifact),
            Err(e) => tracing::warn!("cannot serialize a compiled component for the cache: {e}"),
        }
    }

    /// Stores the compiled `artifact` of `wasm`, then evicts
    /// least-recently-used entries beyond the size cap. Failures are logged,
    /// never fatal.
    pub(crate) fn store_artifact(&self, engine: &Engine, wasm: &[u8], artifact: &[u8]) {
        let entry = self.entry(engine, wasm);
        if let Err(e) = self.write(&entry, artifact) {
            tracing::warn!("cannot write compile cache {}: {e}", entry.display());
            return;
        }
        if let Err(e) = self.evict(&entry) {
            tracing::warn!("cannot trim compile cache {}: {e}", self.dir.display());
        }
    }

    fn write(&self, entry: &Path, payload: &[u8]) -> std::io::Result<()> {
        create_private_dir(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(CACHE_MAGIC)?;
        tmp.write_all(blake3::hash(payload).as_bytes())?;
        tmp.write_all(payload)?;
        tmp.persist(entry).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes the least recently used entries until the cache fits its cap,
    /// never the entry `keep` just written.
    fn evict(&self, keep: &Path) -> std::io::Result<()> {
        let mut entries = Vec::new();
        for dirent in fs::read_dir(&self.dir)? {
            let dirent = dirent?;
            let is_entry = dirent
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(ENTRY_SUFFIX));
            let meta = dirent.metadata()?;
            if is_entry && meta.is_file() && dirent.path() != keep {
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                entries.push((used, meta.len(), dirent.path()));
            }
        }
        let kept = fs::metadata(keep).map_or(0, |m| m.len());
        let mut total: u64 = kept + entries.iter().map(|(_, len, _)| len).sum::<u64>();
        entries.sort_by_key(|(used, _, _)| *used);
        for (_, len, path) in entries {
            if total <= self.limit {
                break;
            }
            fs::remove_file(&path)?;
            total -= len;
        }
        Ok(())
    }
}

/// Marks an entry as used now: its modification time orders eviction.
fn touch(entry: &Path) {
    if let Ok(file) = fs::File::options().append(true).open(entry) {
        let _ = file.set_modified(SystemTime::now());
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

/// The default compile cache: `$XDG_CACHE_HOME/toolhost` or
/// `~/.cache/toolhost`; `None` when neither is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("toolhost"))
}
