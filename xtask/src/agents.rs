//! The real-agent tests (`tests/agents`): opencode and Claude Code, pinned
//! in `tests/agents/package.json`, each drive the debug `toolhost serve`
//! over stdio and over streamable HTTP, with a scripted model on 127.0.0.1
//! in place of a real one (`python -m pytest tests/agents -q`, given
//! TOOLHOST_BIN and TOOLHOST_PLUGINS).

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::support::build_plugins;
use crate::support::{build_toolhost, check_node, run_step, target_dir};
use crate::venv::Venv;

/// The step's name in `cargo xtask test`, which also runs it alone as
/// `cargo xtask test agents [PYTEST ARGS...]`.
pub(crate) const STEP: &str =
    "real agents (tests/agents: opencode and Claude Code against toolhost serve)";

/// The pinned agents' npm project.
const AGENTS: &str = "tests/agents";

/// What `npm ci` needs for the packages' install scripts, which put each
/// agent's native binary in place; the agents themselves run without Node.
const MIN_NODE: (u32, u32) = (20, 0);

/// `npm ci` in [`AGENTS`] (again only when its lockfile changed), then the
/// pytest suite against the debug `toolhost` and the example plugins.
pub(crate) fn run(root: &Path, venv: &Venv, pytest_args: &[String]) -> Result<()> {
    check_node(
        MIN_NODE,
        "the agents of tests/agents (opencode, Claude Code)",
    )?;
    let dir = root.join(AGENTS);
    let lock = dir.join("package-lock.json");
    let stamp = dir.join("node_modules/.toolhost-package-lock.json");
    let installed = fs::read(&stamp).ok();
    if installed.as_deref() != Some(fs::read(&lock)?.as_slice()) {
        run_step(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir),
        )
        .context("npm ci failed (npm needs the registry the first time)")?;
        fs::copy(&lock, &stamp)?;
    }
    let toolhost = build_toolhost(root)?;
    let plugins = build_plugins()?;
    let plugins = plugins
        .canonicalize()
        .with_context(|| format!("{} does not exist", plugins.display()))?;
    // The agents' HOME, XDG dirs and caches live in pytest's directories;
    // this keeps them under target/ and starts each run empty.
    let basetemp = target_dir(root).join("agents").join("tmp");
    eprintln!(
        "$ TOOLHOST_BIN={} TOOLHOST_PLUGINS={} {} -m pytest {AGENTS} -q --basetemp {} {}",
        toolhost.display(),
        plugins.display(),
        venv.python().display(),
        basetemp.display(),
        pytest_args.join(" ")
    );
    run_step(
        Command::new(venv.python())
            .args(["-m", "pytest", AGENTS, "-q", "--basetemp"])
            .arg(&basetemp)
            .args(pytest_args)
            .env("TOOLHOST_BIN", &toolhost)
            .env("TOOLHOST_PLUGINS", &plugins)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PATH", venv.path_with_bin()?)
            .env("VIRTUAL_ENV", &venv.dir)
            .current_dir(root),
    )
}
