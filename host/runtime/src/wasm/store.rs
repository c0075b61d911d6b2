//! The state of one store, for exactly one role (an activation, a call, or
//! a Code Mode program's interpreter), and the memory limiter every store
//! runs under.

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::config::grants::Grants;
use crate::error::Error;
use crate::model::budget::{Budget, FUEL_YIELD_INTERVAL};
use crate::net::HttpHooks;
use crate::wasm::code::imports::ProgramState;
use crate::wasm::imports::call::CallState;
use crate::wasm::imports::registry::ActivationState;
use crate::wasm::stdio::LogBuffer;

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

/// Data of a store. Its one [`Role`] decides which imports are live: the
/// registry only in an activation's store, the call imports only in a
/// call's, the program imports only in an interpreter's.
pub struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: LogBuffer,
    pub(crate) stderr: LogBuffer,
    pub(crate) role: Role,
    /// What the host refused the guest on the way (e.g. a FIFO it tried to
    /// open): warnings of the call.
    pub(crate) notes: Vec<String>,
    pub(crate) http: WasiHttpCtx,
    /// A call's outbound HTTP; none for an activation.
    pub(crate) http_hooks: HttpHooks,
    /// The granted directories: (host path, guest path).
    pub(crate) mounts: Vec<(std::path::PathBuf, String)>,
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

/// What a store is for.
pub(crate) enum Role {
    /// An activation's: its `register` import is live.
    Activation(ActivationState),
    /// A call's: its progress, permission and HTTP imports are live.
    Call(CallState),
    /// A Code Mode program's interpreter, with the program's state until
    /// it ends (boxed: the other roles stay small).
    Program(Option<Box<ProgramState>>),
    /// An instance made ahead of a call (`warm.rs`): no Toolhost import is
    /// live until the call's state replaces this.
    Warm,
    /// No Toolhost import is live: the benchmarks' warm, unisolated
    /// instance.
    #[cfg(feature = "bench")]
    Bare,
}

impl StoreState {
    /// The activation's state, in an activation's store.
    pub(crate) fn activation_mut(&mut self) -> Option<&mut ActivationState> {
        match &mut self.role {
            Role::Activation(activation) => Some(activation),
            _ => None,
        }
    }

    /// The call's state, in a call's store.
    pub(crate) fn call_mut(&mut self) -> Option<&mut CallState> {
        match &mut self.role {
            Role::Call(call) => Some(call),
            _ => None,
        }
    }

    /// The program's state, in an interpreter's store, until it is taken.
    pub(crate) fn program_mut(&mut self) -> Option<&mut ProgramState> {
        match &mut self.role {
            Role::Program(program) => program.as_deref_mut(),
            _ => None,
        }
    }

    /// Takes the program's state out, once the program has ended.
    pub(crate) fn take_program(&mut self) -> Option<ProgramState> {
        match &mut self.role {
            Role::Program(program) => program.take().map(|p| *p),
            _ => None,
        }
    }
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
    let wasi = crate::wasm::wasi::wasi_ctx(grants, &stdout, &stderr)?;
    let mounts = grants
        .dirs
        .iter()
        .map(|d| (d.host.clone(), d.guest_path()))
        .collect();
    new_store_with(
        engine,
        Streams {
            wasi,
            stdout,
            stderr,
            mounts,
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
    /// The granted directories: (host path, guest path).
    pub(crate) mounts: Vec<(std::path::PathBuf, String)>,
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
        mounts,
    } = streams;
    let http = match &role {
        Role::Call(call) => call.http.clone(),
        _ => None,
    };
    let http_hooks = HttpHooks(http);
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HANDLES_PER_CALL);
    let state = StoreState {
        wasi,
        table,
        limiter: MemoryLimiter::new(budget.memory),
        stdout,
        stderr,
        role,
        notes: Vec::new(),
        http: WasiHttpCtx::new(),
        http_hooks,
        mounts,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_hostcall_fuel(MAX_HOST_COPY_BYTES);
    store
        .set_fuel(budget.fuel)
        .map_err(crate::wasm::engine_error)?;
    store
        .fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))
        .map_err(crate::wasm::engine_error)?;
    Ok(store)
}

/// Enforces the memory limit and records the peak, per store.
#[derive(Debug)]
pub struct MemoryLimiter {
    pub(crate) limit: u64,
    pub(crate) peak: u64,
    pub(crate) tripped: bool,
}

impl MemoryLimiter {
    /// A limiter of one store's memories to `limit` bytes.
    pub fn new(limit: u64) -> Self {
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
