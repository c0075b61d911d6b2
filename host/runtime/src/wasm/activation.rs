//! Activating a plugin: `activate` runs in an instance of its own, where the
//! registry import is live, and registers into one scope (R7).

use std::fmt;
use std::sync::{Arc, Mutex};

use wasmtime::Store;

use crate::error::Error;
use crate::model::outcome::Defect;
use crate::model::text::{MAX_MESSAGE_BYTES, truncate};
use crate::registry::scope::Scope;
use crate::wasm::classify::{Stop, classify};
use crate::wasm::imports::registry::ActivationState;
use crate::wasm::invoke::WasmTool;
use crate::wasm::load::{Plugin, PluginCode};
use crate::wasm::store::{Role, StoreState};
use crate::wasm::tiers::Linked;
use crate::wasm::warm::WarmInstances;

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
    /// Runs the plugin's `activate` under its budget, registering through
    /// `scope`, which the activation then owns. On failure everything it
    /// registered is closed again.
    pub async fn start(plugin: &Plugin, scope: Scope) -> Result<Activation, Error> {
        let code = &plugin.code;
        let scope = Arc::new(scope);
        let tools_of = code.clone();
        let state = ActivationState {
            scope: scope.clone(),
            activating: true,
            executor: Box::new(move |name| {
                Arc::new(WasmTool {
                    plugin: tools_of.clone(),
                    name: name.to_owned(),
                })
            }),
            budget: code.budget,
            bounds: code.bounds,
            registered: (0, 0),
            tools_registered: 0,
        };
        let linked = code.linked();
        let mut store = code.store(&linked, &code.budget, Role::Activation(state))?;
        let result = run_activate(code, &linked, &mut store)
            .await
            .and_then(|()| check_kept(plugin, &mut store, &scope));
        match result {
            Ok(()) => {
                // Its first call finds instances made ahead, as later ones do.
                WarmInstances::refill(code);
                Ok(Activation {
                    plugin: plugin.clone(),
                    scope,
                    store: Mutex::new(Some(store)),
                })
            }
            Err(e) => {
                scope.close();
                Err(e)
            }
        }
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

    /// Whether it has been unloaded, or its session ended (R35).
    pub fn is_unloaded(&self) -> bool {
        self.scope.is_closed()
    }
}

impl Drop for Activation {
    fn drop(&mut self) {
        self.unload();
    }
}

/// Ends the registering part of activation, and fails it when the plugin
/// registered tools but kept none of its registrations open: a handle
/// dropped at once (a local, Python's refcounting, a `with` block) would
/// otherwise leave a plugin that activated fine and provides nothing.
fn check_kept(plugin: &Plugin, store: &mut Store<StoreState>, scope: &Scope) -> Result<(), Error> {
    let Some(activation) = store.data_mut().activation_mut() else {
        return Ok(());
    };
    activation.activating = false;
    let tools = activation.tools_registered;
    if tools > 0 && !scope.has_open_registrations() {
        return Err(Error::RegistrationsDropped {
            plugin: plugin.info().name.clone(),
            tools,
        });
    }
    Ok(())
}

/// Instantiates the plugin's `linked` code and calls `activate` within its
/// deadline.
async fn run_activate(
    code: &PluginCode,
    linked: &Linked,
    store: &mut Store<StoreState>,
) -> Result<(), Error> {
    let run = async {
        let instance = linked.pre.instantiate_async(&mut *store).await?;
        instance
            .toolhost_plugin_plugin()
            .call_activate(&mut *store, &code.config)
            .await
    };
    let plugin = || code.info.name.clone();
    match tokio::time::timeout(code.budget.timeout, run).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(message))) => Err(Error::Activation {
            plugin: plugin(),
            message: truncate(message, MAX_MESSAGE_BYTES),
        }),
        Ok(Err(e)) => Err(match classify(&e, store, code.max_instances) {
            Stop::Fuel => Error::ActivationInterrupted {
                plugin: plugin(),
                limit: "fuel",
            },
            Stop::Defect(kind) => Error::Defect(Defect {
                plugin: plugin(),
                version: code.info.version.clone(),
                tool: "activate".into(),
                kind,
            }),
            Stop::HostFault(fault) => Error::Fault(fault),
        }),
        Err(_) => Err(Error::ActivationInterrupted {
            plugin: plugin(),
            limit: "deadline",
        }),
    }
}
