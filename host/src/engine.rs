//! The wasmtime engine: configuration, pooling, linking and the on-disk
//! cache of compiled components.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::budget::MAX_MEMORY;
use crate::error::Error;
use crate::store::StoreState;

/// Instances the pooling allocator can hold at once: calls in flight plus
/// live activations, across all plugins.
pub const POOL_INSTANCES: u32 = 1000;

/// Core instances per component instance the pool allows on average; Rust
/// wasip2 components have a handful (main module plus shims).
const CORE_INSTANCES_PER_COMPONENT: u32 = 4;

/// Bytes of each linear memory kept resident between instances: a slot's
/// dirty pages up to this size are reset with `memset` (found with the
/// PAGEMAP_SCAN ioctl where the kernel has it) instead of being unmapped, so
/// the next call takes no page faults; this cut a fresh-instance echo from
/// ~85 µs to ~25 µs. Small, because warm slots keep it resident: a typical
/// tool's working set fits; calls that dirty more are reset with `madvise`.
const MEMORY_KEEP_RESIDENT: usize = 2 << 20;

/// Bytes of each table kept resident between instances, as above.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Magic prefix of cache files, so foreign files are rejected at once.
const CACHE_MAGIC: &[u8; 8] = b"THCACHE1";

/// The engine plus the linker every plugin is instantiated against.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreState>,
    cache: Option<PathBuf>,
}

impl Runtime {
    pub(crate) fn new(cache: Option<PathBuf>) -> Result<Runtime, Error> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
            .total_memories(POOL_INSTANCES)
            .total_tables(POOL_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(MAX_MEMORY as usize)
            .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config
            .consume_fuel(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(Error::engine)?;
        let mut linker = Linker::new(&engine);
        crate::imports::add_to_linker(&mut linker).map_err(Error::engine)?;
        Ok(Runtime {
            engine,
            linker,
            cache,
        })
    }

    /// Compiles `wasm`, or loads it from the cache when a verified entry for
    /// these exact bytes and this engine exists. Returns whether the cache
    /// was hit.
    pub(crate) fn compile(&self, wasm: &[u8]) -> Result<(Component, bool), wasmtime::Error> {
        let Some(dir) = &self.cache else {
            return Ok((Component::from_binary(&self.engine, wasm)?, false));
        };
        let entry = dir.join(self.cache_key(wasm));
        if let Some(component) = self.load_cached(&entry) {
            return Ok((component, true));
        }
        let component = Component::from_binary(&self.engine, wasm)?;
        if let Err(e) = self.store_cached(dir, &entry, &component) {
            tracing::warn!("cannot write compile cache {}: {e}", entry.display());
        }
        Ok((component, false))
    }

    /// The entry name: the wasm's hash plus the engine's compatibility hash,
    /// so another engine version or configuration never reads it.
    fn cache_key(&self, wasm: &[u8]) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{}-{:016x}.cwasm", blake3::hash(wasm).to_hex(), h.finish())
    }

    /// A cache entry is trusted only if its checksum matches: a truncated,
    /// corrupted or foreign file is ignored (and then rebuilt).
    fn load_cached(&self, entry: &Path) -> Option<Component> {
        let bytes = fs::read(entry).ok()?;
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
        // compatibility hash in the file name), in a cache directory only
        // this user can write.
        match unsafe { Component::deserialize(&self.engine, payload) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "compile cache entry {} is stale ({e}); rebuilding",
                    entry.display()
                );
                None
            }
        }
    }

    fn store_cached(&self, dir: &Path, entry: &Path, component: &Component) -> std::io::Result<()> {
        create_private_dir(dir)?;
        let payload = component.serialize().map_err(std::io::Error::other)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(CACHE_MAGIC)?;
        tmp.write_all(blake3::hash(&payload).as_bytes())?;
        tmp.write_all(&payload)?;
        tmp.persist(entry).map_err(|e| e.error)?;
        Ok(())
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
