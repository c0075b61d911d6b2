//! Running a Code Mode program: the interpreter component (world
//! `toolhost:code/interpreter`) in a fresh instance per program, under the
//! same fuel, memory, deadline and cancellation as a tool call; its nested
//! calls are the `host` import's (`imports::program`).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi::{HostWallClock, WasiCtxBuilder};

use crate::error::Error;
use crate::model::budget::{Budget, Usage};
use crate::model::execution::Ended;
use crate::model::interrupt::interruptible;
use crate::model::outcome::{FaultKind, HostFault, Interruption, Logs};
use crate::model::plugin::PluginInfo;
use crate::wasm::classify::{Stop, classify};
use crate::wasm::code::imports::{self as import, ProgramImport, ProgramState, Settler, wit};
use crate::wasm::engine::Runtime;
use crate::wasm::invoke::{metered_usage, take_logs};
use crate::wasm::stdio::LogBuffer;
use crate::wasm::store::{Role, StoreState, Streams, new_store_with};

pub use wit::toolhost::code::types::RunError;

/// The compiled, linked interpreter.
pub struct Interpreter {
    pre: wit::InterpreterPre<StoreState>,
    max_instances: u32,
}

impl Interpreter {
    /// Compiles (or loads from the cache) and links `wasm`, which must be a
    /// component of the `toolhost:code/interpreter` world. Blocking.
    pub(crate) fn new(runtime: &Runtime, wasm: &[u8]) -> Result<Interpreter, Error> {
        let (component, _from_cache) = runtime.compile(wasm).map_err(|e| Error::Interpreter {
            reason: format!("{e:#}"),
        })?;
        let pre = link(runtime, &component).map_err(|e| Error::Interpreter {
            reason: format!("it does not link as world `toolhost:code/interpreter`: {e:#}"),
        })?;
        Ok(Interpreter {
            pre,
            max_instances: runtime.max_instances,
        })
    }

    /// How defects and events name the interpreter `wasm`: plugin
    /// `code-mode`, versioned by its digest. It is named before it is
    /// compiled, so `from_cache` is false.
    pub fn info(wasm: &[u8]) -> PluginInfo {
        let digest = blake3::hash(wasm).to_hex().to_string();
        PluginInfo {
            name: "code-mode".into(),
            version: format!("blake3:{}", &digest[..12]),
            path: "code-mode".into(),
            digest,
            from_cache: false,
        }
    }

    /// Runs `program` after `prelude` to its end.
    pub async fn run(&self, run: ProgramRun<'_>) -> ProgramEnd {
        let stdout = LogBuffer::default();
        let stderr = LogBuffer::default();
        let streams = Streams {
            wasi: wasi_ctx(&stdout, &stderr),
            stdout,
            stderr,
            mounts: Vec::new(),
        };
        let state = ProgramState::new(run.settler.clone(), run.calls_cancel.clone());
        let engine = self.pre.instance_pre().engine();
        let mut store = match new_store_with(
            engine,
            streams,
            &run.budget,
            Role::Program(Some(Box::new(state))),
        ) {
            Ok(store) => store,
            Err(e) => return ProgramEnd::early(setup_fault(e.to_string()), run.started),
        };
        let raced = self.race(&mut store, &run).await;
        let console = match store.data_mut().take_program() {
            Some(program) => program.finish().await,
            None => String::new(),
        };
        let ended = match raced {
            Err(i) => Err(Ended::Interrupted(i)),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(match classify(&e, &store, self.max_instances) {
                Stop::Fuel => Ended::Interrupted(Interruption::Fuel),
                Stop::Defect(kind) => Ended::Defect(kind),
                Stop::HostFault(fault) => Ended::HostFault(fault),
            }),
        };
        ProgramEnd {
            usage: metered_usage(&store, run.budget.fuel, run.started, ended.as_ref().err()),
            logs: take_logs(store.data()),
            ended,
            console,
        }
    }

    async fn race(
        &self,
        store: &mut wasmtime::Store<StoreState>,
        run: &ProgramRun<'_>,
    ) -> Result<wasmtime::Result<Result<String, RunError>>, Interruption> {
        let go = async {
            let instance = self.pre.instantiate_async(&mut *store).await?;
            instance
                .call_run(&mut *store, run.program, run.prelude)
                .await
        };
        interruptible(run.cancel, run.deadline, go).await
    }
}

fn link(
    runtime: &Runtime,
    component: &Component,
) -> wasmtime::Result<wit::InterpreterPre<StoreState>> {
    let mut linker: Linker<StoreState> = Linker::new(&runtime.optimized.engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    import::add_to_linker(&mut linker, |s: &mut StoreState| ProgramImport {
        program: s.program_mut(),
    })?;
    wit::InterpreterPre::new(linker.instantiate_pre(component)?)
}

/// WASI with nothing granted: no files, environment, sockets or stdin, and
/// a wall clock stopped at the epoch (monotonic time still runs).
fn wasi_ctx(stdout: &LogBuffer, stderr: &LogBuffer) -> wasmtime_wasi::WasiCtx {
    WasiCtxBuilder::new()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .wall_clock(StoppedClock)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

/// A wall clock that always reads the epoch: programs get no wall time.
struct StoppedClock;

impl HostWallClock for StoppedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

/// What one program run needs.
#[allow(missing_debug_implementations)] // holds a settler
pub struct ProgramRun<'a> {
    /// The model's program: the body of an async function.
    pub program: &'a str,
    /// What runs before it (the `tools` object's declarations).
    pub prelude: &'a str,
    /// The interpreter's budget.
    pub budget: Budget,
    /// Settles the program's tool calls.
    pub settler: Settler,
    /// When the `execute` call began.
    pub started: Instant,
    /// When it must end.
    pub deadline: Instant,
    /// Cancelled when the `execute` call is.
    pub cancel: &'a CancellationToken,
    /// Cancels the nested calls; the settler gives it to each of them.
    pub calls_cancel: CancellationToken,
}

/// How a program ended, with what it consumed and printed.
#[derive(Debug)]
pub struct ProgramEnd {
    /// The JSON text it returned, or the error that ended it; or how the
    /// interpreter was stopped (an interruption, a defect or a host fault).
    pub ended: Result<Result<String, RunError>, Ended>,
    /// What the interpreter consumed.
    pub usage: Usage,
    /// What it printed to stdout and stderr.
    pub logs: Logs,
    /// Its `console.log` lines, one per line, bounded.
    pub console: String,
}

impl ProgramEnd {
    fn early(stopped: Ended, started: Instant) -> ProgramEnd {
        ProgramEnd {
            ended: Err(stopped),
            usage: Usage {
                wall_time: started.elapsed(),
                ..Usage::default()
            },
            logs: Logs::default(),
            console: String::new(),
        }
    }
}

fn setup_fault(reason: String) -> Ended {
    Ended::HostFault(HostFault::new(
        FaultKind::Setup,
        format!("cannot set up the Code Mode interpreter: {reason}"),
    ))
}
