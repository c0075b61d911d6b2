//! Compiling a plugin under its limits, somewhere a runaway compile can be
//! given up: in a worker process, killed at the time limit and held to its
//! memory limit by the kernel; or, without a worker, on a thread of its own
//! whose result is dropped at the time limit (it runs on until it ends).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;
use wasmtime::component::Component;

use crate::config::compile::{CompileLimits, CompileWorker};
use crate::error::{CompileLimit, Error, LoadError};
use crate::model::plugin::CodeTier;
use crate::wasm::engine::{Backend, Runtime};

/// The most of a worker's error output kept for the message.
const MAX_WORKER_MESSAGE: u64 = 16 << 10;

/// What a compile worker reads first: this tag, the tier, the memory limit
/// and the component's length (little-endian `u64`s), then the component.
pub(crate) const WORKER_TAG: &[u8; 8] = b"THCOMP02";

/// The length of a compile worker's request header.
pub(crate) const WORKER_HEADER: usize = 32;

/// How a request names the compiler to use.
pub(crate) fn tier_code(tier: CodeTier) -> u64 {
    match tier {
        CodeTier::Optimized => 0,
        CodeTier::Baseline => 1,
    }
}

/// The compiler a request's code names, if it names one.
pub(crate) fn tier_of_code(code: u64) -> Option<CodeTier> {
    [CodeTier::Optimized, CodeTier::Baseline]
        .into_iter()
        .find(|tier| tier_code(*tier) == code)
}

/// A worker's exit code when the component does not compile (stderr says
/// why).
pub(crate) const WORKER_INVALID: u8 = 1;

/// Whether a load or a call waits for a compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// Something waits: the compile runs at the host's own priority.
    Waited,
    /// An upgrade in the background: its worker runs at the lowest CPU
    /// priority, so it takes only the time that calls leave idle.
    Background,
}

/// The nice value of a background compile's worker: the lowest there is.
#[cfg(unix)]
const BACKGROUND_NICE: libc::c_int = 19;

/// A compiled component and, when a worker made it, the artifact it came
/// from (what the compile cache stores).
pub(crate) struct Built {
    pub(crate) component: Component,
    pub(crate) artifact: Option<Vec<u8>>,
}

/// Compiles `wasm` (the plugin at `path`) under `limits` with the
/// compiler of `tier`. Only a worker's priority follows `urgency`: a
/// compile on a thread shares wasmtime's pool of compile threads.
pub(crate) async fn compile(
    runtime: &Arc<Runtime>,
    tier: CodeTier,
    urgency: Urgency,
    path: &Path,
    wasm: Arc<Vec<u8>>,
    limits: CompileLimits,
) -> Result<Built, Error> {
    let backend = runtime.backend(tier);
    match &runtime.worker {
        Some(worker) => in_worker(backend, worker, urgency, path, &wasm, limits).await,
        None => on_thread(backend, path, wasm, limits.timeout).await,
    }
}

fn over(path: &Path, limit: CompileLimit) -> Error {
    Error::Load(LoadError::CompileLimit {
        path: path.to_owned(),
        limit,
    })
}

fn invalid(path: &Path, reason: String) -> Error {
    Error::Load(LoadError::Invalid {
        path: path.to_owned(),
        reason,
    })
}

/// Compiles on a thread of its own; at the time limit the thread is left to
/// finish on its own and its result is dropped.
async fn on_thread(
    backend: &Backend,
    path: &Path,
    wasm: Arc<Vec<u8>>,
    timeout: Duration,
) -> Result<Built, Error> {
    let (done, result) = oneshot::channel();
    let engine = backend.engine.clone();
    std::thread::Builder::new()
        .name("toolhost-compile".into())
        .spawn(move || {
            let _ = done.send(Component::from_binary(&engine, &wasm));
        })
        .map_err(|e| Error::engine_caused(format!("cannot start a compile thread: {e}"), e))?;
    match tokio::time::timeout(timeout, result).await {
        Err(_) => Err(over(path, CompileLimit::Time(timeout))),
        Ok(Err(_)) => Err(Error::engine_message(format!(
            "compiling {} panicked",
            path.display()
        ))),
        Ok(Ok(Err(e))) => Err(invalid(path, format!("{e:#}"))),
        Ok(Ok(Ok(component))) => Ok(Built {
            component,
            artifact: None,
        }),
    }
}

/// What a worker run left: how it ended, its output and its error text.
struct Ran {
    status: ExitStatus,
    artifact: Vec<u8>,
    message: String,
}

/// Compiles in a worker process; at the time limit (or when this future
/// is dropped: cancellation) the worker is killed.
async fn in_worker(
    backend: &Backend,
    worker: &CompileWorker,
    urgency: Urgency,
    path: &Path,
    wasm: &[u8],
    limits: CompileLimits,
) -> Result<Built, Error> {
    let mut command = tokio::process::Command::new(worker.program());
    if urgency == Urgency::Background {
        lower_priority(&mut command);
    }
    let mut child = command
        .args(worker.args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            let message = format!(
                "cannot start the compile worker {}: {e}",
                worker.program().display()
            );
            Error::engine_caused(message, e)
        })?;
    let ran = match tokio::time::timeout(
        limits.timeout,
        run(&mut child, backend.tier, wasm, limits.memory),
    )
    .await
    {
        Ok(ran) => {
            ran.map_err(|e| Error::engine_caused(format!("the compile worker failed: {e}"), e))?
        }
        Err(_) => {
            let _ = child.kill().await;
            return Err(over(path, CompileLimit::Time(limits.timeout)));
        }
    };
    if ran.status.success() {
        let component = load_artifact(backend, &ran.artifact)?;
        return Ok(Built {
            component,
            artifact: Some(ran.artifact),
        });
    }
    Err(failed(path, &ran, limits.memory))
}

/// Starts the worker at [`BACKGROUND_NICE`], before it runs any code of
/// its own, so every thread it makes inherits the priority.
#[cfg(unix)]
fn lower_priority(command: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: it makes one (setpriority, `who`
    // 0: the child itself), allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(unix))]
fn lower_priority(_command: &mut tokio::process::Command) {}

/// Sends the component, reads what comes back and waits for the exit,
/// keeping the worker's stdin open until then: it ends when stdin closes.
async fn run(
    child: &mut tokio::process::Child,
    tier: CodeTier,
    wasm: &[u8],
    memory: u64,
) -> std::io::Result<Ran> {
    let (mut stdin, stdout, stderr) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => return Err(std::io::Error::other("the worker's pipes are missing")),
        };
    let send = async {
        let mut header = WORKER_TAG.to_vec();
        header.extend_from_slice(&tier_code(tier).to_le_bytes());
        header.extend_from_slice(&memory.to_le_bytes());
        header.extend_from_slice(&(wasm.len() as u64).to_le_bytes());
        // A worker that stops reading has ended; how is told by its status.
        let _ = async {
            stdin.write_all(&header).await?;
            stdin.write_all(wasm).await?;
            stdin.flush().await
        }
        .await;
        stdin
    };
    let (stdin, artifact, message) = tokio::join!(
        send,
        read_bounded(stdout, memory),
        read_bounded(stderr, MAX_WORKER_MESSAGE)
    );
    let status = child.wait().await?;
    drop(stdin);
    Ok(Ran {
        status,
        artifact: artifact?,
        message: String::from_utf8_lossy(&message?).trim().to_owned(),
    })
}

async fn read_bounded(from: impl AsyncRead + Unpin, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(max).read_to_end(&mut bytes).await?;
    Ok(bytes)
}

fn load_artifact(backend: &Backend, artifact: &[u8]) -> Result<Component, Error> {
    // SAFETY: the artifact is what `Engine::precompile_component` made in a
    // worker the embedder named, which links this same toolhost with the
    // same engine configuration (`compile_config` of the tier it was sent);
    // wasmtime checks its header against this engine before using it.
    unsafe { Component::deserialize(&backend.engine, artifact) }.map_err(|e| Error::Engine {
        message: format!("the compile worker's artifact does not load: {e:#}"),
        source: Some(e.into_boxed_dyn_error()),
    })
}

/// Why a worker that did not succeed failed: the component, its memory
/// limit (the allocator aborts when it is reached), or the worker itself.
fn failed(path: &Path, ran: &Ran, memory: u64) -> Error {
    if ran.status.code() == Some(i32::from(WORKER_INVALID)) {
        return invalid(path, ran.message.clone());
    }
    if aborted(ran.status) {
        return over(path, CompileLimit::Memory(memory));
    }
    Error::engine_message(format!(
        "the compile worker for {} failed ({}){}",
        path.display(),
        ran.status,
        if ran.message.is_empty() {
            String::new()
        } else {
            format!(": {}", ran.message)
        }
    ))
}

#[cfg(unix)]
fn aborted(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal() == Some(libc::SIGABRT)
}

#[cfg(not(unix))]
fn aborted(_status: ExitStatus) -> bool {
    false
}
