//! The wasmtime engine: configuration, the pooling allocator and the linker
//! every plugin is instantiated against.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy,
};

use crate::config::compile::CompileWorker;
use crate::error::Error;
use crate::model::budget::MAX_MEMORY;
use crate::model::plugin::CodeTier;
use crate::wasm::cache::CompileCache;
use crate::wasm::retire::Retiring;
use crate::wasm::store::StoreState;
use crate::wasm::warm::EveryWarm;

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

/// What compiled code of `tier` depends on: a compile worker's engine,
/// which has no instance pool, makes artifacts the host's engine loads.
/// Winch supports fuel (how calls are bounded and yield) but not epoch
/// interruption, which Toolhost does not use.
pub(crate) fn compile_config(tier: CodeTier) -> Config {
    let mut config = Config::new();
    config.consume_fuel(true);
    config.strategy(match tier {
        CodeTier::Baseline => Strategy::Winch,
        CodeTier::Optimized => Strategy::Cranelift,
    });
    config
}

/// One compiler's engine and the linker plugins compiled by it are
/// instantiated against.
pub(crate) struct Backend {
    pub(crate) tier: CodeTier,
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreState>,
}

impl Backend {
    fn new(tier: CodeTier, config: Config) -> Result<Backend, Error> {
        let engine = Engine::new(&config).map_err(super::engine_error)?;
        let mut linker = Linker::new(&engine);
        crate::wasm::imports::add_to_linker(&mut linker).map_err(super::engine_error)?;
        Ok(Backend {
            tier,
            engine,
            linker,
        })
    }
}

/// The engines plus what every plugin is compiled and instantiated with.
pub struct Runtime {
    /// Cranelift's: every plugin's code in the end.
    pub(crate) optimized: Backend,
    /// Winch's, when plugins are compiled in tiers: a plugin's first code,
    /// until its optimized code is ready. Its instances are allocated on
    /// demand, not pooled: they are few and short-lived.
    pub(crate) baseline: Option<Backend>,
    /// Optimized compiles in the background run one at a time, so a host
    /// loading many plugins leaves cores to the calls.
    pub(crate) upgrades: Semaphore,
    pub(crate) cache: Option<CompileCache>,
    pub(crate) max_instances: u32,
    /// Where plugins are compiled: a worker process, or a thread here.
    pub(crate) worker: Option<CompileWorker>,
    /// Every plugin's instances made ahead, which hold pool slots.
    pub(crate) every_warm: Arc<EveryWarm>,
    /// Ended calls' stores being dropped, whose slots are coming back.
    pub(crate) retiring: Arc<Retiring>,
}

impl Runtime {
    /// The engines (one per compile tier) and their linker, under the
    /// pooling allocator's limits.
    pub fn new(
        max_instances: u32,
        cache: Option<CompileCache>,
        worker: Option<CompileWorker>,
        tiered: bool,
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
        let mut config = compile_config(CodeTier::Optimized);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let optimized = Backend::new(CodeTier::Optimized, config)?;
        let baseline = tiered
            .then(|| Backend::new(CodeTier::Baseline, compile_config(CodeTier::Baseline)))
            .transpose()?;
        Ok(Runtime {
            optimized,
            baseline,
            upgrades: Semaphore::new(1),
            cache,
            max_instances,
            worker,
            every_warm: Arc::default(),
            retiring: Arc::default(),
        })
    }

    /// The backend of `tier`: the baseline one exists whenever code of that
    /// tier does.
    pub(crate) fn backend(&self, tier: CodeTier) -> &Backend {
        match (tier, &self.baseline) {
            (CodeTier::Baseline, Some(baseline)) => baseline,
            _ => &self.optimized,
        }
    }

    /// Compiles `wasm` with the optimizing compiler, or loads it from the cache when a verified entry for
    /// these exact bytes and this engine exists. Blocking: call it off the
    /// async workers. Returns whether the cache was hit.
    pub(crate) fn compile(&self, wasm: &[u8]) -> Result<(Component, bool), wasmtime::Error> {
        let engine = &self.optimized.engine;
        let Some(cache) = &self.cache else {
            return Ok((Component::from_binary(engine, wasm)?, false));
        };
        if let Some(component) = cache.load(engine, wasm) {
            return Ok((component, true));
        }
        let component = Component::from_binary(engine, wasm)?;
        cache.store(engine, wasm, &component);
        Ok((component, false))
    }
}
