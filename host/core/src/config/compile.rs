//! How plugins are compiled: the limits of one compile, and the worker
//! program that runs compiles in processes of their own. Plain settings,
//! below both the engine that holds them and the compiler that obeys them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// How long compiling one plugin may take: about 3× the slowest real
/// plugin we know (componentize-py's CPython, 18 MB: 13–43 s in a debug
/// build on the 2-core machine, idle to busy), while a compile bomb (one
/// function keeping 10,000 locals live, 430 KB: 190 s) is stopped.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Memory a compile worker may allocate: 4× what the largest real plugin
/// needs (CPython: 256–512 MiB), far below what would strain the host.
pub const DEFAULT_COMPILE_MEMORY: u64 = 2 << 30;

/// Bounds on compiling one plugin; a plugin found in the compile cache is
/// not compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// Wall-clock time. Default: [`DEFAULT_COMPILE_TIMEOUT`].
    pub timeout: Duration,
    /// Bytes the compile worker may allocate (its data segment,
    /// `RLIMIT_DATA`); applies only when the host compiles in a
    /// [`CompileWorker`]. Default: [`DEFAULT_COMPILE_MEMORY`].
    pub memory: u64,
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            timeout: DEFAULT_COMPILE_TIMEOUT,
            memory: DEFAULT_COMPILE_MEMORY,
        }
    }
}

/// A program that compiles plugins in processes of their own, so a compile
/// that passes its limits is killed rather than left running. Run with its
/// arguments, it must call `toolhost::compile_worker` and exit with what it
/// returns; it must link this same `toolhost` (the artifact it makes is
/// checked against the host's engine). The `toolhost` CLI is one:
/// `toolhost __compile-worker`.
#[derive(Debug, Clone)]
pub struct CompileWorker {
    program: PathBuf,
    args: Vec<OsString>,
}

impl CompileWorker {
    /// The program the worker runs.
    pub fn program(&self) -> &std::path::Path {
        &self.program
    }

    /// The arguments it is given before the request.
    pub fn args(&self) -> &[OsString] {
        &self.args
    }

    /// The program to run, with no arguments yet.
    pub fn new(program: impl Into<PathBuf>) -> CompileWorker {
        CompileWorker {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> CompileWorker {
        self.args.push(arg.into());
        self
    }
}
