//! The wasmtime engine: configuration, the pooling allocator and the linker
//! every plugin is instantiated against.

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::compile::CompileWorker;
use crate::error::Error;
use crate::model::budget::MAX_MEMORY;
use crate::wasm::cache::CompileCache;
use crate::wasm::store::StoreState;

/// Default instances the pooling allocator holds at once: calls in flight
/// plus live activations, across all plugins of a host.
pub const DEFAULT_MAX_INSTANCES: u32 = 1000;

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

/// What compiled code depends on: a compile worker's engine, which has no
/// instance pool, makes artifacts the host's engine loads.
pub(crate) fn compile_config() -> Config {
    let mut config = Config::new();
    config.consume_fuel(true);
    config
}

/// The engine plus the linker every plugin is instantiated against.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreState>,
    pub(crate) cache: Option<CompileCache>,
    pub(crate) max_instances: u32,
    /// Where plugins are compiled: a worker process, or a thread here.
    pub(crate) worker: Option<CompileWorker>,
}

impl Runtime {
    pub(crate) fn new(
        max_instances: u32,
        cache: Option<CompileCache>,
        worker: Option<CompileWorker>,
    ) -> Result<Runtime, Error> {
        let max_instances = max_instances.max(1);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(max_instances)
            .total_core_instances(max_instances * CORE_INSTANCES_PER_COMPONENT)
            .total_memories(max_instances)
            .total_tables(max_instances * CORE_INSTANCES_PER_COMPONENT)
            .total_stacks(max_instances)
            .max_memory_size(MAX_MEMORY as usize)
            .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(Enabled::Auto);
        let mut config = compile_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(Error::engine)?;
        let mut linker = Linker::new(&engine);
        crate::wasm::imports::add_to_linker(&mut linker).map_err(Error::engine)?;
        Ok(Runtime {
            engine,
            linker,
            cache,
            max_instances,
            worker,
        })
    }

    /// Compiles `wasm`, or loads it from the cache when a verified entry for
    /// these exact bytes and this engine exists. Blocking: call it off the
    /// async workers. Returns whether the cache was hit.
    pub(crate) fn compile(&self, wasm: &[u8]) -> Result<(Component, bool), wasmtime::Error> {
        let Some(cache) = &self.cache else {
            return Ok((Component::from_binary(&self.engine, wasm)?, false));
        };
        if let Some(component) = cache.load(&self.engine, wasm) {
            return Ok((component, true));
        }
        let component = Component::from_binary(&self.engine, wasm)?;
        cache.store(&self.engine, wasm, &component);
        Ok((component, false))
    }
}
