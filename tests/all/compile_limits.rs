//! Compile bombs: compiling a plugin is bounded in time and memory, given
//! up at its limit with an error naming it, and `toolhost list` ends on
//! SIGINT while it compiles.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use toolhost::config::{CompileLimits, CompileWorker, PluginOptions};
use toolhost::{CompileLimit, Error, LoadError};
use toolhost_tests::{builder, wait_until};

use crate::TEXT_TOOLS;

/// A component whose one function keeps `locals` i64 locals live through
/// `rounds` passes that mix them: little code, on which cranelift's
/// register allocator spends very long (10,000 × 3, 430 KB: 190 s on the
/// 2-core machine) or much memory (10,000 × 10: 217 MB within 3 s). It
/// exports an empty plugin instance: the checks before compiling pass,
/// and linking would fail, if it ever compiled.
fn bomb(dir: &Path, locals: usize, rounds: usize) -> PathBuf {
    use std::fmt::Write as _;
    let mut wat = String::from("(component (core module $m (func (param i64) (result i64) (local");
    wat.push_str(&" i64".repeat(locals));
    wat.push(')');
    for k in 1..=locals {
        write!(wat, " local.get 0 i64.const {k} i64.add local.set {k}").unwrap();
    }
    for round in 0..rounds {
        for k in 1..=locals {
            let other = (k * 7919 + round * 31) % locals + 1;
            write!(
                wat,
                " local.get {k} local.get {other} i64.mul local.set {k}"
            )
            .unwrap();
        }
    }
    wat.push_str(" local.get 1");
    for k in 2..=locals {
        write!(wat, " local.get {k} i64.add").unwrap();
    }
    wat.push_str(")) (core instance (instantiate $m)) (instance $plugin)");
    wat.push_str(" (export \"toolhost:plugin/plugin@0.1.0\" (instance $plugin)))");
    let path = dir.join(format!("bomb-{locals}x{rounds}.wasm"));
    std::fs::write(&path, wat::parse_str(&wat).unwrap()).unwrap();
    path
}

/// The `toolhost` binary as the host's compile worker.
fn worker() -> CompileWorker {
    CompileWorker::new(env!("CARGO_BIN_EXE_toolhost")).arg("__compile-worker")
}

fn limited(timeout: Duration, memory: u64) -> PluginOptions {
    PluginOptions {
        compile: CompileLimits { timeout, memory },
        ..PluginOptions::default()
    }
}

/// Loads `path` on a fresh host and returns the compile limit it went
/// past, and how long that took.
async fn tripped(
    path: &Path,
    options: &PluginOptions,
    worker: Option<CompileWorker>,
) -> (CompileLimit, Duration) {
    let outputs = tempfile::tempdir().unwrap();
    let mut host = builder(&outputs);
    if let Some(worker) = worker {
        host = host.compile_worker(worker);
    }
    let host = host.build().unwrap();
    let start = Instant::now();
    match host.compile(path, options).await {
        Err(Error::Load(e @ LoadError::CompileLimit { limit, .. })) => {
            let message = e.to_string();
            assert!(message.contains("compile bomb"), "{message}");
            assert!(message.contains("limits.compile_"), "{message}");
            (limit, start.elapsed())
        }
        other => panic!("expected a compile limit, got {other:?}"),
    }
}

#[tokio::test]
async fn a_compile_bomb_is_killed_at_its_compile_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = bomb(dir.path(), 10_000, 3);
    let timeout = Duration::from_secs(2);
    let options = limited(timeout, toolhost::limits::DEFAULT_COMPILE_MEMORY);
    let (limit, took) = tripped(&bomb, &options, Some(worker())).await;
    assert_eq!(limit, CompileLimit::Time(timeout));
    assert!(
        limit.to_string().contains("compile time limit of 2.0 s"),
        "{limit}"
    );
    assert!(took < Duration::from_secs(15), "stopped after {took:?}");
}

#[tokio::test]
async fn a_compile_bomb_is_stopped_at_its_compile_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = bomb(dir.path(), 10_000, 10);
    let options = limited(Duration::from_secs(60), 128 << 20);
    let (limit, took) = tripped(&bomb, &options, Some(worker())).await;
    assert_eq!(limit, CompileLimit::Memory(128 << 20));
    assert!(
        limit
            .to_string()
            .contains("compile memory limit of 128 MiB"),
        "{limit}"
    );
    assert!(took < Duration::from_secs(60), "stopped after {took:?}");
}

#[tokio::test]
async fn without_a_worker_a_compile_past_its_time_limit_is_given_up() {
    let dir = tempfile::tempdir().unwrap();
    // Small: the thread given up runs on for about a second.
    let bomb = bomb(dir.path(), 5_000, 1);
    let timeout = Duration::from_millis(200);
    let options = limited(timeout, toolhost::limits::DEFAULT_COMPILE_MEMORY);
    let (limit, took) = tripped(&bomb, &options, None).await;
    assert_eq!(limit, CompileLimit::Time(timeout));
    assert!(took < Duration::from_secs(5), "given up after {took:?}");
}

#[tokio::test]
async fn a_plugin_compiled_in_a_worker_runs_and_is_cached() {
    let dirs = tempfile::tempdir().unwrap();
    let cache = dirs.path().join("cache");
    for from_cache in [false, true] {
        let host = builder(&dirs)
            .compile_worker(worker())
            .cache_dir(&cache)
            .build()
            .unwrap();
        let location = host.location("/compiled-in-a-worker");
        let activation = location
            .load(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap();
        assert_eq!(activation.plugin().info().from_cache, from_cache);
        let s = toolhost_tests::settle(
            &location.snapshot(),
            "echo",
            serde_json::json!({"message": "built elsewhere"}),
        )
        .await;
        assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    }
}

/// The children of `pid` whose command line names the compile worker.
fn workers_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter(|child| {
            std::fs::read(format!("/proc/{child}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__compile-worker"))
        })
        .collect()
}

/// Whether process `pid` is gone (or a zombie nobody needs to kill).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
    })
}

fn start_compiling(command: &str, manifest: &Path, dirs: &Path) -> Child {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args([command, manifest.to_str().unwrap()])
        .env("TOOLHOST_CACHE_DIR", dirs.join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec. Started
    // with SIGINT ignored, as a shell starts a background job: the signal
    // must still end the command.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

#[test]
fn sigint_or_sigterm_ends_a_command_while_it_compiles_with_the_interrupted_exit_code() {
    let dirs = tempfile::tempdir().unwrap();
    bomb(dirs.path(), 10_000, 3);
    let manifest = dirs.path().join("bomb.toml");
    std::fs::write(
        &manifest,
        "path = \"bomb-10000x3.wasm\"\n[limits]\ncompile_timeout = \"10m\"\n",
    )
    .unwrap();
    for (command, signal, name) in [
        ("list", libc::SIGINT, "SIGINT"),
        ("compile", libc::SIGTERM, "SIGTERM"),
    ] {
        let mut child = start_compiling(command, &manifest, dirs.path());
        let pid = child.id();
        assert!(
            wait_until(Duration::from_secs(60), || !workers_of(pid).is_empty()),
            "{command}: no compile worker started"
        );
        let worker = workers_of(pid)[0];
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
        let mut status = None;
        let ended = wait_until(Duration::from_secs(10), || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        if !ended {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command} kept compiling after {name}");
        }
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.unwrap().code(), Some(3), "{command}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
        assert!(
            wait_until(Duration::from_secs(10), || gone(worker)),
            "{command}: the compile worker outlived it"
        );
    }
}
