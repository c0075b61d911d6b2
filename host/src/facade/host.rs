//! The host: engine, registry and settlement settings, built once.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::code::CodeMode;
use crate::config::compile::CompileWorker;
use crate::config::plugin::PluginOptions;
use crate::error::Error;
use crate::facade::location::{Location, LocationState};
use crate::model::approval::Approver;
use crate::model::budget::{Budget, DEFAULT_CONCURRENCY, HttpLimits, OutputBounds};
use crate::model::event::EventSink;
use crate::model::hook::AfterHook;
use crate::model::source::PluginSource;
use crate::output::retain::{
    DEFAULT_MEMORY_RETENTION_QUOTA, DEFAULT_RETENTION, DEFAULT_RETENTION_QUOTA, Retention,
};
use crate::permission::{Policy, Rules};
use crate::registry::placement::{Level, Placement};
use crate::registry::snapshot::Overlay;
use crate::settle::pipeline::Pipeline;
use crate::store::{Store, StoreError, StoreSlot, default_state_dir};
use crate::wasm::cache::{CompileCache, DEFAULT_CACHE_LIMIT, default_cache_dir};
use crate::wasm::engine::{DEFAULT_MAX_INSTANCES, Runtime};
use crate::wasm::load::{Loader, Plugin, PluginDefaults};
use crate::wasm::warm::WarmSettings;
use toolhost_core::tls::client_config;

/// Builds a [`Host`]. Every setting has a documented default; every
/// capability starts denied; the host does no I/O it was not asked for.
///
/// With the defaults, [`build`](HostBuilder::build) and every call touch
/// no file and no process-wide state: the store is in memory (outcomes,
/// replays, retained outputs and saved answers last as long as the host),
/// there is no compile cache, no event sink, and no process-wide rustls
/// crypto provider is installed (every TLS client the host makes is given
/// ring's). Ask for the disk with [`state_dir`](HostBuilder::state_dir) or
/// [`default_state_dir`](HostBuilder::default_state_dir) (the embedded
/// store), [`store`](HostBuilder::store), [`cache_dir`](HostBuilder::cache_dir)
/// or [`default_cache`](HostBuilder::default_cache).
#[must_use]
pub struct HostBuilder {
    budget: Budget,
    concurrency: usize,
    warm: WarmSettings,
    max_instances: u32,
    bounds: OutputBounds,
    state_dir: Option<PathBuf>,
    durability: crate::store::Durability,
    store: Option<StoreSlot>,
    retention: Duration,
    retention_quota: Option<u64>,
    cache_dir: Option<PathBuf>,
    cache_limit: u64,
    compile_worker: Option<CompileWorker>,
    tiered: bool,
    sink: Option<Arc<dyn EventSink>>,
    hooks: Vec<Arc<dyn AfterHook>>,
    rules: Rules,
    approver: Option<Arc<dyn Approver>>,
    http_limits: HttpLimits,
    http_roots: Vec<PathBuf>,
    interpreter: Option<Vec<u8>>,
    #[cfg(feature = "oci")]
    distribution: Option<crate::oci::Distribution>,
}

impl fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuilder")
            .field("budget", &self.budget)
            .field("concurrency", &self.concurrency)
            .field("max_instances", &self.max_instances)
            .field("bounds", &self.bounds)
            .field("state_dir", &self.state_dir)
            .field("durability", &self.durability)
            .field("store", &self.store)
            .field("cache_dir", &self.cache_dir)
            .field("cache_limit", &self.cache_limit)
            .field("tiered", &self.tiered)
            .field("code_mode", &self.interpreter.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            budget: Budget::default(),
            concurrency: DEFAULT_CONCURRENCY,
            warm: WarmSettings::default(),
            max_instances: DEFAULT_MAX_INSTANCES,
            bounds: OutputBounds::default(),
            state_dir: None,
            durability: crate::store::Durability::default(),
            store: None,
            retention: DEFAULT_RETENTION,
            retention_quota: None,
            cache_dir: None,
            cache_limit: DEFAULT_CACHE_LIMIT,
            compile_worker: None,
            tiered: false,
            sink: None,
            hooks: Vec::new(),
            rules: Rules::default(),
            approver: None,
            http_limits: HttpLimits::default(),
            http_roots: Vec::new(),
            interpreter: None,
            #[cfg(feature = "oci")]
            distribution: None,
        }
    }
}

impl HostBuilder {
    /// Default budget of every call. Default: [`Budget::default()`]
    /// (20e9 fuel, 30 s, 256 MiB).
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Calls in flight per plugin; further calls wait for a slot (and the
    /// wait counts against their deadline). At least 1: [`build`] refuses
    /// 0. Default: [`DEFAULT_CONCURRENCY`].
    ///
    /// [`build`]: HostBuilder::build
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Instances made ahead of calls, per plugin: `count` never-used
    /// instances kept ready once a plugin is called, so a call pays only for
    /// running; each call still gets its own (R21), and a plugin with no
    /// call for `idle` holds none. Each one holds an instance slot (see
    /// [`HostBuilder::max_instances`]) and its memory; `count` 0 makes every
    /// call instantiate after it arrives. Default: [`WARM_INSTANCES`] and
    /// [`WARM_IDLE`].
    ///
    /// [`WARM_INSTANCES`]: crate::limits::WARM_INSTANCES
    /// [`WARM_IDLE`]: crate::limits::WARM_IDLE
    pub fn warm_instances(mut self, count: usize, idle: Duration) -> Self {
        self.warm = WarmSettings { count, idle };
        self
    }

    /// Tiered compilation: a plugin not in the compile cache is compiled
    /// first with wasmtime's baseline compiler (Winch, about 5× faster to
    /// compile, slower to run) and serves calls on that code at once, while
    /// its optimized code compiles in the background, one plugin at a time,
    /// under the same [`CompileLimits`](crate::config::CompileLimits); new
    /// calls then run the optimized code, and both are cached. A component
    /// Winch cannot compile is compiled optimized at once. For hosts that
    /// run on (a server); a one-shot process would exit before the upgrade.
    /// See [`Plugin::code_tier`]. Default: off (every plugin is compiled
    /// once, optimized).
    pub fn tiered_compilation(mut self, on: bool) -> Self {
        self.tiered = on;
        self
    }

    /// Instances the pooling allocator holds at once, across all plugins:
    /// one per live activation plus one per call in flight. A call that
    /// finds every slot busy fails operationally, naming this setting.
    /// Each slot reserves address space (not memory) for a linear memory of
    /// up to [`crate::limits::MAX_MEMORY`]. At least 1: [`build`] refuses
    /// 0. Default: [`DEFAULT_MAX_INSTANCES`].
    ///
    /// [`build`]: HostBuilder::build
    pub fn max_instances(mut self, n: u32) -> Self {
        self.max_instances = n;
        self
    }

    /// Limits of the text the model sees from one result. Default: 2,000
    /// lines and 51,200 bytes.
    pub fn bounds(mut self, bounds: OutputBounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Keeps outcomes, events, retained outputs and saved answers in the
    /// embedded store (an SQLite file, `store.sqlite3`) in `dir`, when no
    /// [`store`](HostBuilder::store) is given: a directory of this user's,
    /// created 0700, never a symlink, opened when the first call needs it.
    /// Default: none, so the store is in memory
    /// ([`SqlStore::in_memory`](crate::store::SqlStore::in_memory)) and
    /// nothing is written to disk.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// [`state_dir`](HostBuilder::state_dir) in the per-user state
    /// directory, where the `toolhost` CLI keeps its store:
    /// `$XDG_STATE_HOME/toolhost`, else `~/.local/state/toolhost` (else a
    /// directory of this user's under the system's temporary directory).
    pub fn default_state_dir(mut self) -> Self {
        self.state_dir = Some(default_state_dir());
        self
    }

    /// How durable the embedded store's commits are: survive the process
    /// crashing ([`Durability::Normal`]), or also power loss, a disk sync
    /// per call ([`Durability::Full`]). Default: `Normal`. A [`store`]
    /// given is opened with its own; a store in memory has no disk to sync.
    ///
    /// [`Durability::Normal`]: crate::store::Durability::Normal
    /// [`Durability::Full`]: crate::store::Durability::Full
    /// [`store`]: HostBuilder::store
    pub fn store_durability(mut self, durability: crate::store::Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Keeps outcomes, events, retained outputs and saved answers in
    /// `store` (e.g. a [`SqlStore`](crate::store::SqlStore) on Postgres that
    /// replicas share); it takes precedence over a
    /// [state directory](HostBuilder::state_dir). Default: none, so the
    /// embedded store in the state directory if one is given, else a store
    /// in memory.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(StoreSlot::given(store));
        self
    }

    /// No store at all: nothing is recorded or replayed and an oversized
    /// output fails its call. For benchmarks of the pipeline alone.
    #[cfg(feature = "bench")]
    #[doc(hidden)]
    pub fn without_store(mut self) -> Self {
        self.store = Some(StoreSlot::absent());
        self
    }

    /// The most bytes retained outputs may take together; the oldest are
    /// evicted to make room, and a single output larger than this fails its
    /// call operationally. Default: [`DEFAULT_RETENTION_QUOTA`] (1 GiB), or
    /// [`DEFAULT_MEMORY_RETENTION_QUOTA`] (64 MiB) when the store is in
    /// memory (neither a store nor a state directory given).
    pub fn retention_quota(mut self, bytes: u64) -> Self {
        self.retention_quota = Some(bytes);
        self
    }

    /// How long retained outputs are kept; older ones are removed as new
    /// ones are retained. Default: 7 days.
    pub fn retention(mut self, age: Duration) -> Self {
        self.retention = age;
        self
    }

    /// Caches compiled components in `dir`. Default: no cache;
    /// [`HostBuilder::default_cache`] picks the usual per-user location.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Caches compiled components in the per-user cache directory:
    /// `$XDG_CACHE_HOME/toolhost`, else `~/.cache/toolhost` (no cache when
    /// neither is known).
    pub fn default_cache(mut self) -> Self {
        self.cache_dir = default_cache_dir();
        self
    }

    /// The compile cache's size cap in bytes; beyond it the least recently
    /// used entries are evicted. Default: [`DEFAULT_CACHE_LIMIT`] (1 GiB).
    pub fn cache_limit(mut self, bytes: u64) -> Self {
        self.cache_limit = bytes;
        self
    }

    /// Compiles plugins in processes run from `worker`, so a compile past
    /// its time limit is killed and its memory limit holds
    /// ([`crate::config::CompileLimits`]). Default: none: plugins compile on a
    /// thread of this process, bounded in time only (a compile past the
    /// limit is given up, but runs on until it ends).
    pub fn compile_worker(mut self, worker: CompileWorker) -> Self {
        self.compile_worker = Some(worker);
        self
    }

    /// Receives progress and outcome events. Default: none.
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Adds an after-hook (R18). Default: none.
    pub fn after_hook(mut self, hook: Arc<dyn AfterHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Host-wide permission rules, evaluated before each plugin's own.
    /// Default: none, so every request asks.
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// Decides permission requests that rules leave to "ask". Default:
    /// none, so such requests are denied.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// What outbound HTTP each call may do (R36). Default:
    /// [`HttpLimits::default()`] (64 requests, 8 at once, 16 MiB each way).
    pub fn http_limits(mut self, limits: HttpLimits) -> Self {
        self.http_limits = limits;
        self
    }

    /// Also trusts the root certificates in this PEM file for outbound
    /// HTTPS (a private CA). Default: only the Mozilla roots (webpki-roots).
    pub fn http_root_certificates(mut self, pem: impl Into<PathBuf>) -> Self {
        self.http_roots.push(pem.into());
        self
    }

    /// Turns Code Mode on (R34): every snapshot also advertises `execute`,
    /// which runs a model's JavaScript program that calls the snapshot's
    /// other tools. `interpreter` is the interpreter component (world
    /// `toolhost:code/interpreter`, built from `code-mode/`; the `toolhost`
    /// CLI embeds one). [`build`](HostBuilder::build) starts compiling it
    /// (or loading it from the compile cache) on a thread of its own, so
    /// only a program that runs before it is ready waits for it; one that
    /// does not compile makes every `execute` call an operational failure
    /// naming it. Default: off.
    pub fn code_mode(mut self, interpreter: impl Into<Vec<u8>>) -> Self {
        self.interpreter = Some(interpreter.into());
        self
    }

    /// Loads `oci://` plugin paths through `distribution`: pulled,
    /// verified against its trust policy and stored by digest before they
    /// are compiled (R41). Without it such paths are refused.
    #[cfg(feature = "oci")]
    pub fn distribution(mut self, distribution: crate::oci::Distribution) -> Self {
        self.distribution = Some(distribution);
        self
    }

    /// Refuses settings no host can run with, rather than changing them.
    fn check(&self) -> Result<(), Error> {
        let zero = match (self.concurrency, self.max_instances) {
            (0, _) => "concurrency is 0: each plugin needs at least 1 call slot",
            (_, 0) => "max_instances is 0: plugins need at least 1 instance slot",
            _ => return Ok(()),
        };
        Err(Error::config(zero))
    }

    /// Builds the host: configures the engine, reads the CA files given to
    /// [`http_root_certificates`](HostBuilder::http_root_certificates) and,
    /// with Code Mode, starts compiling the interpreter (reading the compile
    /// cache, when one is given). It opens no store: the store (a state
    /// directory's, created then) is opened when the first call needs it.
    /// It installs no process-wide state (no rustls crypto provider).
    /// A setting out of its range is [`Error::Config`], naming it.
    pub fn build(self) -> Result<Host, Error> {
        self.check()?;
        let cache = self
            .cache_dir
            .map(|dir| CompileCache::new(dir, self.cache_limit));
        let runtime = Arc::new(Runtime::new(
            self.max_instances,
            cache,
            self.compile_worker,
            self.tiered,
        )?);
        let code = self
            .interpreter
            .map(|wasm| CodeMode::new(&runtime, &wasm).map(Arc::new))
            .transpose()?;
        let store = self.store.unwrap_or_else(|| match self.state_dir {
            Some(dir) => StoreSlot::embedded(dir, self.durability),
            None => StoreSlot::memory(),
        });
        let retention_quota = self.retention_quota.unwrap_or(if store.in_memory() {
            DEFAULT_MEMORY_RETENTION_QUOTA
        } else {
            DEFAULT_RETENTION_QUOTA
        });
        let store = Arc::new(store);
        Ok(Host {
            inner: Arc::new(HostInner {
                loader: Arc::new(Loader::new(
                    runtime,
                    PluginDefaults {
                        budget: self.budget,
                        concurrency: self.concurrency,
                        warm: self.warm,
                        policy: Policy::new(self.rules, self.approver, store.clone()),
                        http_limits: self.http_limits,
                        tls: client_config(&self.http_roots)?,
                    },
                    #[cfg(feature = "oci")]
                    self.distribution,
                )),
                pipeline: Arc::new(Pipeline {
                    budget: self.budget,
                    bounds: self.bounds,
                    store,
                    retention: Retention {
                        quota: retention_quota,
                        age: self.retention,
                    },
                    sink: self.sink,
                    hooks: self.hooks,
                }),
                code,
                application: application_state(),
                locations: Mutex::default(),
            }),
        })
    }
}

/// The Toolhost engine: loads plugins, holds the registry, settles calls.
/// Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<HostInner>,
}

struct HostInner {
    loader: Arc<Loader>,
    pipeline: Arc<Pipeline>,
    code: Option<Arc<CodeMode>>,
    application: Arc<LocationState>,
    locations: Mutex<HashMap<PathBuf, Arc<LocationState>>>,
}

/// The application's state: its placement, seen alone.
fn application_state() -> Arc<LocationState> {
    let placement = Placement::new(Level::Application);
    LocationState::new(placement.clone(), Overlay::new(vec![placement]))
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("pipeline", &self.inner.pipeline)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A builder with every default.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Compiles a plugin with `options`: reads it from its
    /// [source](PluginSource), checks the WIT version, compiles it under
    /// its limits (or takes it from the compile cache) and links it.
    /// Nothing runs: [`Location::load`] also activates it.
    pub async fn compile(
        &self,
        source: impl Into<PluginSource>,
        options: &PluginOptions,
    ) -> Result<Plugin, Error> {
        self.inner.loader.load(&source.into(), options).await
    }

    /// The process-wide application placement, shared by all locations.
    /// Its sessions ([`Location::session`]) sit above the application alone
    /// and are shared by the whole host.
    pub fn application(&self) -> Location {
        self.view(self.inner.application.clone())
    }

    /// The location (workspace) at `path`; the same path gives the same
    /// location, with the same sessions.
    pub fn location(&self, path: impl Into<PathBuf>) -> Location {
        let state = self
            .inner
            .locations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path.into())
            .or_insert_with(|| self.location_state())
            .clone();
        self.view(state)
    }

    /// A new location's state: its placement over the application's (R5).
    fn location_state(&self) -> Arc<LocationState> {
        let placement = Placement::new(Level::Location);
        let overlay = self.inner.application.overlay().under(placement.clone());
        LocationState::new(placement, overlay)
    }

    fn view(&self, state: Arc<LocationState>) -> Location {
        Location::new(
            self.inner.loader.clone(),
            self.inner.pipeline.clone(),
            self.inner.code.clone(),
            state,
        )
    }

    /// Whether Code Mode's interpreter is still compiling (the first use on
    /// a cold compile cache takes seconds): a front end can say so. False
    /// when it is ready, failed, or Code Mode is off.
    pub fn code_mode_compiling(&self) -> bool {
        self.inner.code.as_ref().is_some_and(|c| !c.is_compiled())
    }

    /// Waits until Code Mode's interpreter has compiled (or failed to);
    /// at once when Code Mode is off.
    pub async fn code_mode_compiled(&self) {
        if let Some(code) = &self.inner.code {
            code.compiled().await;
        }
    }

    /// The full text behind a retained-output reference from a bounding
    /// marker (`toolhost-output:<id>`, or the bare id), if `scope` (the
    /// session of the call that produced it, unless the call set
    /// [`Call::with_output_scope`](crate::Call::with_output_scope)) may read
    /// it and the store still keeps it.
    pub async fn retained(
        &self,
        scope: &str,
        reference: &str,
    ) -> Result<Option<String>, StoreError> {
        self.inner.pipeline.retained(scope, reference).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_slot_count_is_refused_by_name_not_raised_to_one() {
        let refused = |builder: HostBuilder| match builder.build() {
            Err(Error::Config { message, .. }) => message,
            other => panic!("expected a configuration error, got {other:?}"),
        };
        assert!(refused(Host::builder().concurrency(0)).starts_with("concurrency is 0"));
        assert!(refused(Host::builder().max_instances(0)).starts_with("max_instances is 0"));
    }
}
