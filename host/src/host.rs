//! The host: engine, registry and settlement settings, built once.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bound::{Bounds, DEFAULT_RETENTION, OutputStore};
use crate::budget::{Budget, DEFAULT_CONCURRENCY};
use crate::engine::{Runtime, default_cache_dir};
use crate::error::Error;
use crate::events::EventSink;
use crate::permission::{Approver, Policy, Rules};
use crate::plugin::{self, Activation, Plugin, PluginOptions};
use crate::registry::{
    CatalogEntry, Level, Placement, Registration, RegistrationError, Scope, SnapshotOptions, View,
};
use crate::settle::{AfterHook, Settler, Snapshot};
use crate::tool::Tool;

/// Builds a [`Host`]. Every setting has a documented default; every
/// capability starts denied.
#[must_use]
pub struct HostBuilder {
    budget: Budget,
    concurrency: usize,
    bounds: Bounds,
    output_dir: Option<PathBuf>,
    retention: Duration,
    cache_dir: Option<PathBuf>,
    sink: Option<Arc<dyn EventSink>>,
    hooks: Vec<Arc<dyn AfterHook>>,
    rules: Rules,
    approver: Option<Arc<dyn Approver>>,
}

impl fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuilder")
            .field("budget", &self.budget)
            .field("concurrency", &self.concurrency)
            .field("bounds", &self.bounds)
            .field("output_dir", &self.output_dir)
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            budget: Budget::default(),
            concurrency: DEFAULT_CONCURRENCY,
            bounds: Bounds::default(),
            output_dir: None,
            retention: DEFAULT_RETENTION,
            cache_dir: None,
            sink: None,
            hooks: Vec::new(),
            rules: Rules::default(),
            approver: None,
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

    /// Calls in flight per plugin. Default: [`DEFAULT_CONCURRENCY`].
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Limits of each text part the model sees. Default: 2,000 lines and
    /// 51,200 bytes.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Where oversized outputs are retained. Default: a `toolhost-outputs`
    /// directory in the system temporary directory.
    pub fn output_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.output_dir = Some(dir.into());
        self
    }

    /// How long retained outputs are kept; older ones are removed when the
    /// host is built. Default: 7 days.
    pub fn retention(mut self, age: Duration) -> Self {
        self.retention = age;
        self
    }

    /// Caches compiled components in `dir`. Default: no cache.
    /// [`crate::default_cache_dir`] gives the usual per-user location.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Caches compiled components in the per-user default cache directory.
    pub fn default_cache(mut self) -> Self {
        self.cache_dir = default_cache_dir();
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

    /// Builds the host: configures the engine and opens the output directory.
    pub fn build(self) -> Result<Host, Error> {
        let runtime = Runtime::new(self.cache_dir)?;
        let output_dir = self
            .output_dir
            .unwrap_or_else(|| std::env::temp_dir().join("toolhost-outputs"));
        // A broken output directory fails only calls that need retention,
        // with a clear operational error, not the whole host.
        let outputs =
            OutputStore::open(&output_dir).map_err(|e| format!("{}: {e}", output_dir.display()));
        if let Ok(store) = &outputs
            && let Err(e) = store.clean(self.retention)
        {
            tracing::warn!("cannot clean old outputs in {}: {e}", output_dir.display());
        }
        let policy = Policy::new(self.rules, self.approver);
        Ok(Host {
            inner: Arc::new(HostInner {
                runtime,
                concurrency: self.concurrency,
                settler: Arc::new(Settler {
                    budget: self.budget,
                    bounds: self.bounds,
                    outputs,
                    sink: self.sink,
                    hooks: self.hooks,
                    policy,
                }),
                application: Placement::new(Level::Application),
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
    runtime: Runtime,
    concurrency: usize,
    settler: Arc<Settler>,
    application: Arc<Placement>,
    locations: Mutex<HashMap<PathBuf, Arc<Placement>>>,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("settler", &self.inner.settler)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A builder with every default.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Loads a plugin (`.wasm` component) with default options.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Plugin, Error> {
        self.load_with(path, &PluginOptions::default())
    }

    /// Loads a plugin with `options`: reads, checks the WIT version,
    /// compiles (or loads from the compile cache) and links it.
    pub fn load_with(
        &self,
        path: impl AsRef<Path>,
        options: &PluginOptions,
    ) -> Result<Plugin, Error> {
        plugin::load(
            &self.inner.runtime,
            path.as_ref(),
            options,
            &self.inner.settler.budget,
            self.inner.concurrency,
            &self.inner.settler.policy,
        )
    }

    /// The process-wide application placement, shared by all locations.
    pub fn application(&self) -> Location {
        Location {
            host: self.clone(),
            own: self.inner.application.clone(),
            view: View {
                application: self.inner.application.clone(),
                location: Placement::new(Level::Location),
            },
        }
    }

    /// The location (workspace) at `path`; the same path gives the same
    /// location.
    pub fn location(&self, path: impl Into<PathBuf>) -> Location {
        let placement = self
            .inner
            .locations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path.into())
            .or_insert_with(|| Placement::new(Level::Location))
            .clone();
        Location {
            host: self.clone(),
            own: placement.clone(),
            view: View {
                application: self.inner.application.clone(),
                location: placement,
            },
        }
    }

    /// The file behind a retained-output reference from a bounding marker.
    pub fn retained_output(&self, reference: &str) -> Option<PathBuf> {
        self.inner.settler.outputs.as_ref().ok()?.resolve(reference)
    }
}

/// One placement's registry view: a location over the application, or the
/// application itself. Registers tools and takes snapshots.
#[derive(Debug, Clone)]
pub struct Location {
    host: Host,
    own: Arc<Placement>,
    view: View,
}

impl Location {
    /// Activates `plugin` here: its `activate` runs in an instance of its
    /// own and registers into this placement.
    pub async fn activate(&self, plugin: &Plugin) -> Result<Activation, Error> {
        Activation::start(plugin, self.own.clone()).await
    }

    /// Loads and activates the plugin at `path` with `options`.
    pub async fn load(
        &self,
        path: impl AsRef<Path>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let plugin = self.host.load_with(path, options)?;
        self.activate(&plugin).await
    }

    /// Hot reload: activates the plugin at `path` (overlaying `old`'s
    /// registrations), then unloads `old`, so no snapshot ever sees a gap.
    pub async fn reload(
        &self,
        old: &Activation,
        path: impl AsRef<Path>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let new = self.load(path, options).await?;
        old.unload();
        Ok(new)
    }

    /// A registration scope in this placement, for native tools.
    pub fn scope(&self) -> Scope {
        Scope::new(self.own.clone())
    }

    /// Registers native tools by authored name, atomically.
    pub fn register(
        &self,
        tools: impl IntoIterator<Item = (impl Into<String>, Tool)>,
    ) -> Result<Registration, RegistrationError> {
        let tools = tools.into_iter().map(|(n, t)| (n.into(), t)).collect();
        self.own.register(tools)
    }

    /// Every active registration visible here, sorted by name, winners first.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        self.view.catalog()
    }

    /// The effective tool of `name` right now.
    pub fn effective(&self, name: &str) -> Option<Tool> {
        self.view.effective(name)
    }

    /// A snapshot for one model request (R8).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_with(&SnapshotOptions::default())
    }

    /// A snapshot with options: final step (R11), catalog filtering (R12).
    pub fn snapshot_with(&self, options: &SnapshotOptions) -> Snapshot {
        Snapshot {
            captured: Arc::new(self.view.snapshot(options)),
            settler: self.host.inner.settler.clone(),
        }
    }
}
