//! Loading a plugin and activating it: one activation, one scope.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use wasmtime::Store;

use crate::bindings::{ToolPluginPre, WIT_PACKAGE, WIT_VERSION};
use crate::bound::Bounds;
use crate::budget::{Budget, Limits};
use crate::engine::Runtime;
use crate::error::{Error, LoadError};
use crate::execute::{Stop, classify};
use crate::grants::Grants;
use crate::imports::registry::ActivationState;
use crate::permission::{Policy, Rules};
use crate::registry::{Placement, Scope};
use crate::store::{Role, StoreState, new_store};

/// The first bytes of every WebAssembly binary.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

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

/// How to load a plugin. Every capability starts denied.
#[derive(Debug, Clone)]
pub struct PluginOptions {
    /// Name to report. Default: the file stem.
    pub name: Option<String>,
    /// Version to report. Default: `blake3:` plus 12 hex digits of the hash.
    pub version: Option<String>,
    /// JSON passed to `activate`. Default: `{}`.
    pub config: Value,
    /// Budget overrides for this plugin's calls. Default: the host's budget.
    pub limits: Limits,
    /// Calls of this plugin in flight at once. Default: the host's
    /// concurrency ([`crate::budget::DEFAULT_CONCURRENCY`]).
    pub concurrency: Option<usize>,
    /// WASI capabilities. Default: none.
    pub grants: Grants,
    /// Permission rules added after the host's. Default: none.
    pub rules: Rules,
    /// Output bounds for this plugin's tools. Default: the host's bounds.
    pub bounds: Option<Bounds>,
}

impl Default for PluginOptions {
    fn default() -> Self {
        PluginOptions {
            name: None,
            version: None,
            config: Value::Object(Default::default()),
            limits: Limits::default(),
            concurrency: None,
            grants: Grants::default(),
            rules: Rules::default(),
            bounds: None,
        }
    }
}

/// Everything a call of the plugin needs: compiled code and settings.
pub(crate) struct PluginCode {
    info: PluginInfo,
    engine: wasmtime::Engine,
    pub(crate) pre: ToolPluginPre<StoreState>,
    pub(crate) budget: Budget,
    pub(crate) bounds: Option<Bounds>,
    grants: Grants,
    pub(crate) policy: Policy,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) config: Arc<str>,
}

impl PluginCode {
    pub(crate) fn info(&self) -> &PluginInfo {
        &self.info
    }

    pub(crate) fn label(&self) -> String {
        format!("{} {}", self.info.name, self.info.version)
    }

    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        &self.engine
    }

    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }
}

/// A tool a plugin registered: the plugin's code and the authored name.
pub(crate) struct WasmTool {
    pub(crate) plugin: Arc<PluginCode>,
    pub(crate) name: String,
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

    /// The budget its calls run under, before per-call overrides.
    pub fn budget(&self) -> Budget {
        self.code.budget
    }
}

/// Reads, checks and compiles a plugin, and links it against the host.
pub(crate) fn load(
    runtime: &Runtime,
    path: &Path,
    options: &PluginOptions,
    defaults: &Budget,
    concurrency: usize,
    policy: &Policy,
) -> Result<Plugin, Error> {
    let wasm = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    check_header(path, &wasm)?;
    let (component, from_cache) = runtime.compile(&wasm).map_err(|e| LoadError::Invalid {
        path: path.to_owned(),
        reason: format!("{e:#}"),
    })?;
    check_world(path, &runtime.engine, &component)?;
    let pre = runtime
        .linker
        .instantiate_pre(&component)
        .map_err(|e| LoadError::Link {
            path: path.to_owned(),
            reason: format!("{e:#}"),
        })?;
    let pre = ToolPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
        path: path.to_owned(),
        exports: format!("{e:#}"),
    })?;
    let digest = blake3::hash(&wasm).to_hex().to_string();
    let info = PluginInfo {
        name: options.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned())
        }),
        version: options
            .version
            .clone()
            .unwrap_or_else(|| format!("blake3:{}", &digest[..12])),
        path: path.to_owned(),
        digest,
        from_cache,
    };
    let config =
        serde_json::to_string(&options.config).map_err(|e| Error::Config(e.to_string()))?;
    let config: Arc<str> = config.into();
    Ok(Plugin {
        code: Arc::new(PluginCode {
            info,
            engine: runtime.engine.clone(),
            pre,
            budget: defaults.with(&options.limits),
            bounds: options.bounds,
            grants: options.grants.clone(),
            policy: policy.with_rules(&options.rules),
            slots: Arc::new(Semaphore::new(
                options.concurrency.unwrap_or(concurrency).max(1),
            )),
            config,
        }),
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

/// Checks the component's `toolhost:plugin` interfaces: their version first
/// (so an incompatible plugin gets a clear message), then the export.
fn check_world(
    path: &Path,
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> Result<(), LoadError> {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(n, _)| n.to_owned());
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let compatible = |version: &str| {
        let major_minor = WIT_VERSION
            .rsplit_once('.')
            .map_or(WIT_VERSION, |(mm, _)| mm);
        version
            .strip_prefix(major_minor)
            .is_some_and(|rest| rest.starts_with('.'))
    };
    let prefix = format!("{WIT_PACKAGE}/");
    for name in imports.chain(exports.iter().cloned()) {
        if let Some(rest) = name.strip_prefix(&prefix) {
            let version = rest.split_once('@').map_or("", |(_, v)| v);
            if !compatible(version) {
                return Err(LoadError::IncompatibleVersion {
                    path: path.to_owned(),
                    found: name,
                    expected: WIT_VERSION,
                });
            }
        }
    }
    if !exports
        .iter()
        .any(|e| e.starts_with(&format!("{prefix}plugin@")))
    {
        return Err(LoadError::WrongWorld {
            path: path.to_owned(),
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        });
    }
    Ok(())
}

/// A live activation: the plugin's registrations in one placement. Unloading
/// (or dropping) it closes every registration it made (R7).
pub struct Activation {
    plugin: Plugin,
    scope: Arc<Scope>,
    // Kept so the guest's registration handles live as long as the activation.
    store: Mutex<Option<Store<StoreState>>>,
}

impl fmt::Debug for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Activation")
            .field("plugin", &self.plugin.info().name)
            .field("unloaded", &self.is_unloaded())
            .finish()
    }
}

impl Activation {
    /// Runs the plugin's `activate` in an instance of its own, where the
    /// registry import is live, registering into `placement`.
    pub(crate) async fn start(
        plugin: &Plugin,
        placement: Arc<Placement>,
    ) -> Result<Activation, Error> {
        let code = &plugin.code;
        let scope = Arc::new(Scope::new(placement));
        let state = ActivationState {
            plugin: code.clone(),
            scope: scope.clone(),
            activating: true,
        };
        let mut store = new_store(code, &code.budget, Role::Activation(state))?;
        let run = async {
            let instance = code.pre.instantiate_async(&mut store).await?;
            instance
                .toolhost_plugin_plugin()
                .call_activate(&mut store, &code.config)
                .await
        };
        let result = tokio::time::timeout(code.budget.timeout, run).await;
        if let Some(a) = store.data_mut().activation.as_mut() {
            a.activating = false;
        }
        let name = || code.info.name.clone();
        let failure = match result {
            Ok(Ok(Ok(()))) => {
                return Ok(Activation {
                    plugin: plugin.clone(),
                    scope,
                    store: Mutex::new(Some(store)),
                });
            }
            Ok(Ok(Err(message))) => Error::Activation {
                plugin: name(),
                message,
            },
            Ok(Err(e)) => match classify(&e, &store) {
                Stop::Fuel => Error::ActivationInterrupted {
                    plugin: name(),
                    limit: "fuel",
                },
                Stop::Defect(kind) => Error::Defect(crate::Defect {
                    plugin: name(),
                    version: code.info.version.clone(),
                    tool: "activate".into(),
                    kind,
                }),
            },
            Err(_) => Error::ActivationInterrupted {
                plugin: name(),
                limit: "deadline",
            },
        };
        scope.close();
        Err(failure)
    }

    /// The activated plugin.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// Closes every registration of this activation and drops its instance.
    /// Calls already captured in snapshots still run (R9). Idempotent.
    pub fn unload(&self) {
        self.scope.close();
        self.store.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Whether it has been unloaded.
    pub fn is_unloaded(&self) -> bool {
        self.scope.is_closed()
    }
}

impl Drop for Activation {
    fn drop(&mut self) {
        self.unload();
    }
}
