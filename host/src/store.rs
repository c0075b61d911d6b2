//! The state of one store: an activation's or a call's, never both.

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::budget::{Budget, FUEL_YIELD_INTERVAL, MemoryLimiter};
use crate::imports::call::CallState;
use crate::imports::registry::ActivationState;
use crate::plugin::PluginCode;
use crate::stdio::CapturedOutput;

/// Data of a store. `activation` is set only in an activation's store and
/// `call` only in a call's, so each import is live only where it belongs.
pub(crate) struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
    pub(crate) activation: Option<ActivationState>,
    pub(crate) call: Option<CallState>,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Which role a new store plays.
pub(crate) enum Role {
    Activation(ActivationState),
    Call(CallState),
}

/// A fresh store for `plugin` under `budget`, with the plugin's grants.
pub(crate) fn new_store(
    plugin: &Arc<PluginCode>,
    budget: &Budget,
    role: Role,
) -> Result<Store<StoreState>, crate::Error> {
    let stdout = CapturedOutput::default();
    let stderr = CapturedOutput::default();
    let wasi = plugin.grants().wasi_ctx(&stdout, &stderr)?;
    let (activation, call) = match role {
        Role::Activation(a) => (Some(a), None),
        Role::Call(c) => (None, Some(c)),
    };
    let state = StoreState {
        wasi,
        table: ResourceTable::new(),
        limiter: MemoryLimiter::new(budget.memory),
        stdout,
        stderr,
        activation,
        call,
    };
    let mut store = Store::new(plugin.engine(), state);
    store.limiter(|s| &mut s.limiter);
    store.set_fuel(budget.fuel).map_err(crate::Error::engine)?;
    store
        .fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))
        .map_err(crate::Error::engine)?;
    Ok(store)
}
