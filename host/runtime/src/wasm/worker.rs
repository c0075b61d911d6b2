//! The compile worker's side: one component in on stdin, its compiled
//! artifact out on stdout, within the memory limit the host sent.

use std::io::{Read, Write};

use wasmtime::Engine;

use crate::wasm::compile::{WORKER_HEADER, WORKER_INVALID, WORKER_TAG, tier_of_code};
use crate::wasm::engine::compile_config;
use crate::wasm::load::MAX_PLUGIN_BYTES;

/// Exit code of a worker sent something it does not understand.
const WORKER_USAGE: u8 = 2;

/// Exit code of a worker whose host went away before it finished.
const WORKER_ORPHANED: i32 = 3;

/// Runs this process as a compile worker (see [`crate::config::CompileWorker`]):
/// reads one component from stdin, compiles it for this host's engine,
/// writes the artifact to stdout and returns the exit code to end with.
/// It exits at once if stdin closes before it is done: its host is gone.
pub fn compile_worker() -> u8 {
    ignore_interrupts();
    match compile_one() {
        Ok(()) => 0,
        Err((code, message)) => {
            let _ = writeln!(std::io::stderr(), "{message}");
            code
        }
    }
}

fn compile_one() -> Result<(), (u8, String)> {
    let usage = |what: &str| (WORKER_USAGE, format!("compile worker: {what}"));
    let mut stdin = std::io::stdin();
    let mut header = [0u8; WORKER_HEADER];
    stdin
        .read_exact(&mut header)
        .map_err(|e| usage(&format!("cannot read the request: {e}")))?;
    let (tag, rest) = header.split_at(8);
    if tag != WORKER_TAG {
        return Err(usage("not a compile request"));
    }
    let word = |at: usize| u64::from_le_bytes(rest[at..at + 8].try_into().expect("8 bytes"));
    let (tier, memory, len) = (word(0), word(8), word(16));
    let tier = tier_of_code(tier).ok_or_else(|| usage("no such compiler"))?;
    if len > MAX_PLUGIN_BYTES {
        return Err(usage("the component is larger than a plugin may be"));
    }
    limit_memory(memory).map_err(|e| usage(&format!("cannot limit its memory: {e}")))?;
    let mut wasm = vec![0u8; len as usize];
    stdin
        .read_exact(&mut wasm)
        .map_err(|e| usage(&format!("cannot read the component: {e}")))?;
    exit_when_orphaned();
    let engine = Engine::new(&compile_config(tier)).map_err(|e| usage(&format!("{e:#}")))?;
    let artifact = engine
        .precompile_component(&wasm)
        .map_err(|e| (WORKER_INVALID, format!("{e:#}")))?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&artifact)
        .and_then(|()| stdout.flush())
        .map_err(|e| usage(&format!("cannot write the artifact: {e}")))
}

/// Ends the process when stdin reaches its end: the host holds it open
/// until the worker exits, so an end means the host died or gave up.
fn exit_when_orphaned() {
    std::thread::spawn(|| {
        let mut byte = [0u8; 1];
        // Bounded: the host sends nothing more, so this returns only at
        // the end of stdin (or on an error, which ends the worker too).
        while let Ok(1) = std::io::stdin().read(&mut byte) {}
        std::process::exit(WORKER_ORPHANED);
    });
}

/// Leaves Ctrl-C to the host: a terminal sends SIGINT to the worker too,
/// and the host, which kills the worker, must be the one to report it.
#[cfg(unix)]
fn ignore_interrupts() {
    // SAFETY: setting a signal to be ignored runs no handler code.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

#[cfg(not(unix))]
fn ignore_interrupts() {}

/// Caps the bytes this process may allocate: an allocation past the cap
/// fails, and the allocator aborts the worker.
#[cfg(unix)]
fn limit_memory(bytes: u64) -> std::io::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_DATA, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit.rlim_cur = bytes.min(limit.rlim_max);
        if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn limit_memory(_bytes: u64) -> std::io::Result<()> {
    Ok(())
}
