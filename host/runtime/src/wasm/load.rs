//! Loading a plugin: read it under a bound, check it is a component of our
//! world, compile it off the async workers (or take it from the compile
//! cache) and link it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::DropGuard;
use wasmtime::Store;
use wasmtime::component::Component;

use crate::config::compile::CompileLimits;
use crate::config::grants::Grants;
use crate::config::plugin::PluginOptions;
use crate::error::{Error, LoadError, OciError};
use crate::files::read_regular_file;
use crate::model::budget::{Budget, HttpLimits, OutputBounds};
use crate::model::plugin::{CodeTier, PluginInfo};
use crate::model::source::PluginSource;
use crate::permission::Policy;
use crate::wasm::compile::Built;
use crate::wasm::engine::Runtime;
use crate::wasm::preflight::preflight;
use crate::wasm::retire::Retiring;
use crate::wasm::slots::FairSlots;
use crate::wasm::store::{Role, StoreState, new_store};
use crate::wasm::tiers::{self, Current, Linked, Upgrades, blocking, blocking_link};
use crate::wasm::warm::{self, MakesAhead, Warm, WarmInstances, WarmSettings};

/// The first bytes of every WebAssembly binary.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

/// The largest plugin file read: far above any real component (ours are
/// well under 10 MiB), far below what would strain the host.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// What a plugin inherits from its host unless its options say otherwise.
#[derive(Debug, Clone)]
pub struct PluginDefaults {
    /// The budget of each call.
    pub budget: Budget,
    /// Calls of one plugin at once.
    pub concurrency: usize,
    /// Instances made ahead of calls.
    pub warm: WarmSettings,
    /// The host's rules, approver and saved answers.
    pub policy: Policy,
    /// Outbound HTTP budgets.
    pub http_limits: HttpLimits,
    /// The TLS client configuration of outbound HTTP.
    pub tls: Arc<rustls::ClientConfig>,
}

/// Everything a call of the plugin needs: compiled code and settings.
pub(crate) struct PluginCode {
    pub(crate) info: PluginInfo,
    /// The code new calls run, replaced once when tiered compilation
    /// brings the optimized code in.
    pub(crate) current: watch::Sender<Current>,
    /// Stops the background compile of its optimized code, if one runs,
    /// when the plugin is dropped.
    pub(crate) _upgrading: Option<DropGuard>,
    pub(crate) budget: Budget,
    pub(crate) bounds: Option<OutputBounds>,
    pub(crate) grants: Grants,
    pub(crate) policy: Policy,
    /// Calls in flight: a bounded queue per plugin, fair between sessions.
    pub(crate) slots: FairSlots,
    pub(crate) config: Arc<str>,
    /// Instance slots of the whole host, for the pool-exhaustion message.
    pub(crate) max_instances: u32,
    pub(crate) http_limits: HttpLimits,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// Instances made ahead of calls, each for one call.
    pub(crate) warm: Arc<WarmInstances>,
    /// The host's ended calls' stores being dropped.
    pub(crate) retiring: Arc<Retiring>,
}

impl PluginCode {
    /// The code a call starting now runs: its store and instance must both
    /// come from it.
    pub fn linked(&self) -> Arc<Linked> {
        self.current.borrow().linked.clone()
    }

    /// A fresh store for `linked` code of this plugin under `budget`, with
    /// its grants.
    pub fn store(
        &self,
        linked: &Linked,
        budget: &Budget,
        role: Role,
    ) -> Result<Store<StoreState>, Error> {
        new_store(&linked.engine, &self.grants, budget, role)
    }

    /// Whether every instance slot of the pool `linked` code is allocated
    /// from is taken; false if its instances are not pooled.
    pub(crate) fn pool_full(&self, linked: &Linked) -> bool {
        live_instances(linked).is_some_and(|live| live >= u64::from(self.max_instances))
    }
}

/// Instances live in the pool `linked` code is allocated from; none if its
/// instances are not pooled.
fn live_instances(linked: &Linked) -> Option<u64> {
    let pool = linked.engine.pooling_allocator_metrics()?;
    Some(pool.component_instances())
}

impl Upgrades for PluginCode {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn upgraded(&self, linked: Linked) {
        self.current.send_replace(Current {
            linked: Arc::new(linked),
            settled: true,
        });
        // Instances made ahead ran no call: the next ones are made from
        // the optimized code.
        self.warm.clear();
    }

    fn settled(&self) {
        self.current.send_modify(|current| current.settled = true);
    }
}

impl MakesAhead for PluginCode {
    fn warm(&self) -> &WarmInstances {
        &self.warm
    }

    fn memory(&self) -> u64 {
        self.budget.memory
    }

    fn name(&self) -> &str {
        &self.info.name
    }

    fn room_ahead(&self) -> bool {
        live_instances(&self.current.borrow().linked)
            .is_none_or(|live| warm::room_ahead(live, self.max_instances))
    }

    /// Under the plugin's budget: its fuel and, as a call would be, its
    /// deadline (a guest's start-up code is as hostile as its tools).
    async fn make(&self) -> Result<Warm, String> {
        let linked = self.linked();
        let mut store = self
            .store(&linked, &self.budget, Role::Warm)
            .map_err(|e| e.to_string())?;
        let instantiate = linked.pre.instantiate_async(&mut store);
        let instance = tokio::time::timeout(self.budget.timeout, instantiate)
            .await
            .map_err(|_| format!("not instantiated within {:?}", self.budget.timeout))?
            .map_err(|e| e.to_string())?;
        Ok(Warm { store, instance })
    }
}

/// A compiled, linked plugin, ready to activate. Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) code: Arc<PluginCode>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Plugin").field(&self.code.info).finish()
    }
}

impl Plugin {
    /// Its identity.
    pub fn info(&self) -> &PluginInfo {
        &self.code.info
    }

    /// How many instances are made ahead of its calls right now (see
    /// `toolhost::HostBuilder::warm_instances`).
    pub fn warm_instances(&self) -> usize {
        self.code.warm.len()
    }

    /// The budget its calls run under, before per-call overrides.
    pub fn budget(&self) -> Budget {
        self.code.budget
    }

    /// Which compiler made the code its new calls run now.
    pub fn code_tier(&self) -> CodeTier {
        self.code.current.borrow().linked.tier
    }

    /// Waits until its code changes no more and returns the tier it ends
    /// on: at once without tiered compilation; with it, once the optimized
    /// code is in — or the baseline one, if the optimized compile failed
    /// (the failure is logged).
    pub async fn settled_code_tier(&self) -> CodeTier {
        let mut current = self.code.current.subscribe();
        // The sender lives in the plugin this borrows: it cannot close.
        let _ = current.wait_for(|c| c.settled).await;
        self.code_tier()
    }
}

/// Loads plugins into one engine with the host's defaults.
pub struct Loader {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) defaults: PluginDefaults,
    /// Where `oci://` plugins come from, if anywhere.
    #[cfg(feature = "oci")]
    pub(crate) distribution: Option<crate::oci::Distribution>,
}

impl Loader {
    /// A loader compiling on `runtime`, giving plugins `defaults`.
    pub fn new(
        runtime: Arc<Runtime>,
        defaults: PluginDefaults,
        #[cfg(feature = "oci")] distribution: Option<crate::oci::Distribution>,
    ) -> Loader {
        Loader {
            runtime,
            defaults,
            #[cfg(feature = "oci")]
            distribution,
        }
    }

    /// The defaults every plugin starts from (policy, TLS, budgets).
    pub fn defaults(&self) -> &PluginDefaults {
        &self.defaults
    }

    /// Reads, checks and compiles the plugin `source` names on a blocking
    /// thread, so a long compile never stalls the async workers, and links
    /// it. A registry reference is first pulled, verified against the
    /// trust policy and stored by digest (R41); only then is it compiled.
    pub async fn load(
        &self,
        source: &PluginSource,
        options: &PluginOptions,
    ) -> Result<Plugin, Error> {
        match source {
            PluginSource::File(path) => self.load_file(path, options).await,
            PluginSource::Bytes { name, wasm } => {
                if wasm.len() as u64 > MAX_PLUGIN_BYTES {
                    let (path, limit) = (name.into(), MAX_PLUGIN_BYTES);
                    return Err(LoadError::TooLarge { path, limit }.into());
                }
                let wasm = wasm.to_vec();
                load(
                    &self.runtime,
                    &self.defaults,
                    Path::new(name),
                    wasm,
                    options,
                )
                .await
            }
            PluginSource::Oci(reference) => self.load_oci(reference, options).await,
            _ => Err(Error::config(
                "this runtime cannot load this kind of plugin source",
            )),
        }
    }

    async fn load_file(&self, path: &Path, options: &PluginOptions) -> Result<Plugin, Error> {
        let wasm = {
            let path = path.to_owned();
            blocking(move || read_regular_file(&path, MAX_PLUGIN_BYTES)).await??
        };
        load(&self.runtime, &self.defaults, path, wasm, options).await
    }

    #[cfg(feature = "oci")]
    async fn load_oci(&self, reference: &str, options: &PluginOptions) -> Result<Plugin, Error> {
        let Some(distribution) = &self.distribution else {
            return Err(OciError::NoDistribution {
                reference: reference.to_owned(),
            }
            .into());
        };
        let fetched = distribution.fetch(reference, MAX_PLUGIN_BYTES).await?;
        let mut options = options.clone();
        if options.name.is_none() {
            let repository = fetched.reference.repository();
            options.name = Some(
                repository
                    .rsplit('/')
                    .next()
                    .unwrap_or(repository)
                    .to_owned(),
            );
        }
        if options.version.is_none() {
            options.version = fetched
                .annotations
                .get("org.opencontainers.image.version")
                .cloned()
                .or_else(|| fetched.reference.tag().map(str::to_owned));
        }
        self.load_file(&fetched.path, &options).await
    }

    #[cfg(not(feature = "oci"))]
    async fn load_oci(&self, reference: &str, _: &PluginOptions) -> Result<Plugin, Error> {
        Err(OciError::NoDistribution {
            reference: reference.to_owned(),
        }
        .into())
    }
}

/// Checks, compiles and links `wasm`, read from `path` (a file's, or what
/// stands for bytes from elsewhere in messages).
async fn load(
    runtime: &Arc<Runtime>,
    defaults: &PluginDefaults,
    path: &Path,
    wasm: Vec<u8>,
    options: &PluginOptions,
) -> Result<Plugin, Error> {
    if options.concurrency == Some(0) {
        let zero = "PluginOptions::concurrency is 0: a plugin needs at least 1 call slot";
        return Err(Error::config(zero));
    }
    let compiled = compile(runtime, path, wasm, options.compile).await?;
    let tier = compiled.linked.tier;
    let config = serde_json::to_string(&options.config)
        .map_err(|e| Error::config_caused(e.to_string(), e))?;
    let info = PluginInfo {
        name: options.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned())
        }),
        version: options
            .version
            .clone()
            .unwrap_or_else(|| format!("blake3:{}", &compiled.digest[..12])),
        path: path.to_owned(),
        digest: compiled.digest,
        from_cache: compiled.from_cache,
    };
    let owner = format!("{} {}", info.name, info.digest);
    let policy = defaults.policy.for_plugin(owner, &options.rules);
    let upgrading = (tier == CodeTier::Baseline).then(tokio_util::sync::CancellationToken::new);
    let (current, _) = watch::channel(Current {
        linked: Arc::new(compiled.linked),
        settled: upgrading.is_none(),
    });
    let code = Arc::new(PluginCode {
        info,
        current,
        _upgrading: upgrading.clone().map(|stop| stop.drop_guard()),
        budget: defaults.budget.with(&options.overrides),
        bounds: options.bounds,
        grants: options.grants.clone(),
        policy,
        slots: FairSlots::new(options.concurrency.unwrap_or(defaults.concurrency)),
        config: config.into(),
        max_instances: runtime.max_instances,
        http_limits: options.http_limits.unwrap_or(defaults.http_limits),
        tls: defaults.tls.clone(),
        warm: WarmInstances::new(defaults.warm, &runtime.every_warm),
        retiring: runtime.retiring.clone(),
    });
    if let Some(stop) = upgrading {
        let wasm = compiled.wasm;
        tiers::upgrade_later(runtime, &code, stop, path, wasm, options.compile);
    }
    Ok(Plugin { code })
}

/// A checked, compiled and linked component, and its bytes.
struct Compiled {
    linked: Linked,
    wasm: Arc<Vec<u8>>,
    digest: String,
    from_cache: bool,
}

/// Checks and compiles the plugin `wasm` read from `path` under `limits`
/// (or takes it from the compile cache) and links it. The blocking parts run off the
/// async workers; the compile itself where it can be given up. With tiered
/// compilation the code is the baseline compiler's unless the cache holds
/// optimized code.
async fn compile(
    runtime: &Arc<Runtime>,
    path: &Path,
    wasm: Vec<u8>,
    limits: CompileLimits,
) -> Result<Compiled, Error> {
    let checked = {
        let (runtime, path) = (runtime.clone(), path.to_owned());
        blocking(move || check(&runtime, &path, wasm)).await??
    };
    let (tier, built, from_cache) = match checked.cached {
        Some((tier, component)) => {
            let artifact = None;
            (
                tier,
                Built {
                    component,
                    artifact,
                },
                true,
            )
        }
        None => {
            let (tier, built) = tiers::first_compile(runtime, path, &checked.wasm, limits).await?;
            (tier, built, false)
        }
    };
    let wasm = checked.wasm.clone();
    let linked = blocking_link(runtime, tier, path, wasm, built, !from_cache).await?;
    Ok(Compiled {
        linked,
        wasm: checked.wasm,
        digest: checked.digest,
        from_cache,
    })
}

/// A plugin read and checked, and its compiled form if the cache has it.
struct Checked {
    wasm: Arc<Vec<u8>>,
    digest: String,
    cached: Option<(CodeTier, Component)>,
}

fn check(runtime: &Runtime, path: &Path, wasm: Vec<u8>) -> Result<Checked, LoadError> {
    check_header(path, &wasm)?;
    preflight(path, &wasm)?;
    let cached = runtime.cache.as_ref().and_then(|cache| {
        let tiers = [Some(&runtime.optimized), runtime.baseline.as_ref()];
        tiers
            .into_iter()
            .flatten()
            .find_map(|b| Some((b.tier, cache.load(&b.engine, &wasm)?)))
    });
    Ok(Checked {
        digest: blake3::hash(&wasm).to_hex().to_string(),
        wasm: Arc::new(wasm),
        cached,
    })
}

/// Tells a core module or a random file from a component before compiling.
fn check_header(path: &Path, wasm: &[u8]) -> Result<(), LoadError> {
    let path = path.to_owned();
    match wasm.get(..8) {
        Some(h) if &h[..4] == WASM_MAGIC => match h[6..8] {
            // Layer 1 is a component; layer 0 a core module.
            [1, 0] => Ok(()),
            [0, 0] => Err(LoadError::CoreModule { path }),
            _ => Err(LoadError::Invalid {
                path,
                reason: "unknown WebAssembly binary layer".into(),
            }),
        },
        _ => Err(LoadError::NotWasm { path }),
    }
}
