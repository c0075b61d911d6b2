//! The state of one store: an activation's or a call's, never both, and the
//! memory limiter every store runs under.

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::error::Error;
use crate::model::budget::{Budget, FUEL_YIELD_INTERVAL};
use crate::runtime::grants::Grants;
use crate::runtime::http::HttpHooks;
use crate::runtime::imports::call::CallState;
use crate::runtime::imports::program::ProgramState;
use crate::runtime::imports::registry::ActivationState;
use crate::runtime::stdio::LogBuffer;

/// Table elements a guest may have: ample for real programs' function tables.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The most data one call may move between guest and host, either way
/// (wasmtime's "hostcall fuel", set per store to this documented value).
pub const MAX_HOST_COPY_BYTES: usize = 128 << 20;

/// Handles (files, directories, streams) one call may hold at once: ample
/// for a tool, far below the host's descriptor limit (R31).
pub const MAX_HANDLES_PER_CALL: usize = 1024;

/// Notes one store keeps for its call's warnings; more are dropped.
const MAX_NOTES: usize = 16;

/// Data of a store. `activation` is set only in an activation's store,
/// `call` only in a call's and `program` only in an interpreter's, so each
/// import is live only where it belongs.
pub(crate) struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: LogBuffer,
    pub(crate) stderr: LogBuffer,
    pub(crate) activation: Option<ActivationState>,
    pub(crate) call: Option<CallState>,
    /// Set only in a Code Mode interpreter's store.
    pub(crate) program: Option<ProgramState>,
    /// What the host refused the guest on the way (e.g. a FIFO it tried to
    /// open): warnings of the call.
    pub(crate) notes: Vec<String>,
    pub(crate) http: WasiHttpCtx,
    /// A call's outbound HTTP; none for an activation.
    pub(crate) http_hooks: HttpHooks,
}

impl WasiHttpView for StoreState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl StoreState {
    /// Records a note for the call's warnings, once per distinct text.
    pub(crate) fn note(&mut self, note: String) {
        if self.notes.len() < MAX_NOTES && !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
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
    /// A Code Mode program's interpreter.
    Program(ProgramState),
}

/// A fresh store under `budget`, holding exactly `grants`.
pub(crate) fn new_store(
    engine: &Engine,
    grants: &Grants,
    budget: &Budget,
    role: Role,
) -> Result<Store<StoreState>, Error> {
    let stdout = LogBuffer::default();
    let stderr = LogBuffer::default();
    let wasi = grants.wasi_ctx(&stdout, &stderr)?;
    new_store_with(
        engine,
        Streams {
            wasi,
            stdout,
            stderr,
        },
        budget,
        role,
    )
}

/// A store's WASI context and the buffers its stdout and stderr write to.
pub(crate) struct Streams {
    pub(crate) wasi: WasiCtx,
    pub(crate) stdout: LogBuffer,
    pub(crate) stderr: LogBuffer,
}

/// A fresh store under `budget` with this WASI context.
pub(crate) fn new_store_with(
    engine: &Engine,
    streams: Streams,
    budget: &Budget,
    role: Role,
) -> Result<Store<StoreState>, Error> {
    let Streams {
        wasi,
        stdout,
        stderr,
    } = streams;
    let (activation, call, program) = match role {
        Role::Activation(a) => (Some(a), None, None),
        Role::Call(c) => (None, Some(c), None),
        Role::Program(p) => (None, None, Some(p)),
    };
    let http_hooks = HttpHooks(call.as_ref().and_then(|c| c.http.clone()));
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HANDLES_PER_CALL);
    let state = StoreState {
        wasi,
        table,
        limiter: MemoryLimiter::new(budget.memory),
        stdout,
        stderr,
        activation,
        call,
        program,
        notes: Vec::new(),
        http: WasiHttpCtx::new(),
        http_hooks,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_hostcall_fuel(MAX_HOST_COPY_BYTES);
    store.set_fuel(budget.fuel).map_err(Error::engine)?;
    store
        .fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))
        .map_err(Error::engine)?;
    Ok(store)
}

/// Enforces the memory limit and records the peak, per store.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    pub(crate) limit: u64,
    pub(crate) peak: u64,
    pub(crate) tripped: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: u64) -> Self {
        MemoryLimiter {
            limit,
            peak: 0,
            tripped: false,
        }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > self.limit {
            self.tripped = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
