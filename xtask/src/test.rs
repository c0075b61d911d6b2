//! `cargo xtask test`: every test of the project, on a machine with only
//! rustup, cargo, Python 3 (3.10 or newer) and Node. First a Python venv at
//! `target/venv` with the exact packages of `tests/mcp/requirements.txt`,
//! `tests/requirements-authors.txt` and `tests/deploy/requirements.txt`
//! (reused while those pins are unchanged),
//! then each of [`STEPS`] in order: `cargo test --workspace`, the polyglot
//! tests (Python, JavaScript and C plugins, with the venv's `bin` and
//! `target/tools/bin` first on `PATH`), the MCP bridge against the pinned
//! server-everything, the templates, the MCP client suite (`python -m
//! pytest tests/mcp -q` against the debug `toolhost`, given TOOLHOST_BIN and
//! TOOLHOST_PLUGINS), the Kubernetes manifests (`deploy.rs`), the packaged
//! crates and the CLI's wheel.
//!
//! `cargo xtask test mcp [PYTEST ARGS...]` prepares the venv and runs only
//! the MCP suite, passing the extra arguments to pytest (e.g. `-k watch -x`);
//! `cargo xtask test deploy` only the Kubernetes manifests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::support::build_plugins;
use crate::support::{build_toolhost, cargo, check_node, root, run_step};
use crate::venv::{Env, Venv, prepare_venv};

/// One step of `cargo xtask test`: what it is, and how to run it.
type Step = (&'static str, fn(&Env) -> Result<()>);

/// Every step after the venv, in order. Add a step here.
const STEPS: &[Step] = &[
    ("cargo test --workspace", |env| {
        run_step(cargo().args(["test", "--workspace"]).current_dir(&env.root))
    }),
    (
        "polyglot tests (Python, JavaScript and C plugins) and OCI interop (oras, wkg)",
        polyglot,
    ),
    (
        "MCP bridge against @modelcontextprotocol/server-everything (npm)",
        bridge_everything,
    ),
    (
        "plugin templates (toolhost new, build each, toolhost check)",
        crate::templates::check,
    ),
    ("MCP client tests (tests/mcp, Python mcp client)", |env| {
        mcp_suite(&env.root, &env.venv, &[])
    }),
    (
        "official MCP conformance suite (pinned, both requirement sets, against its baselines)",
        |env| crate::conformance::run(&env.root, &[]),
    ),
    (crate::deploy::STEP, |env| {
        crate::deploy::run(&env.root, &env.venv)
    }),
    (crate::agents::STEP, |env| {
        crate::agents::run(&env.root, &env.venv, &[])
    }),
    (
        "packaged crates (a plugin and an embedder outside the workspace use them)",
        |env| crate::package::run(&env.root),
    ),
    (
        "Python wheel of the CLI (maturin): install in a fresh venv, run toolhost",
        crate::wheel::check,
    ),
];

/// Runs every test (no arguments), or only the MCP suite (`mcp [ARGS]`).
pub fn run(args: &[String]) -> Result<()> {
    let root = root();
    let started = Instant::now();
    keep_temp_files_in_target(&root)?;
    crate::system::ensure_for_tests()?;
    match args.split_first() {
        Some((first, [])) if first == "setup" => return Ok(()),
        None => {
            let of = STEPS.len() + 1;
            let venv = step(1, of, "Python venv (target/venv)", || prepare_venv(&root))?;
            let env = Env { root, venv };
            for (i, (what, body)) in STEPS.iter().enumerate() {
                step(i + 2, of, what, || body(&env))?;
            }
        }
        Some((first, rest)) if first == "mcp" => {
            let venv = step(1, 2, "Python venv (target/venv)", || prepare_venv(&root))?;
            step(
                2,
                2,
                "MCP client tests (tests/mcp, Python mcp client)",
                || mcp_suite(&root, &venv, rest),
            )?;
        }
        Some((first, rest)) if first == "agents" => {
            let venv = step(1, 2, "Python venv (target/venv)", || prepare_venv(&root))?;
            step(2, 2, crate::agents::STEP, || {
                crate::agents::run(&root, &venv, rest)
            })?;
        }
        Some((first, [])) if first == "deploy" => {
            let venv = step(1, 2, "Python venv (target/venv)", || prepare_venv(&root))?;
            step(2, 2, crate::deploy::STEP, || {
                crate::deploy::run(&root, &venv)
            })?;
        }
        Some((other, _)) => {
            bail!(
                "unknown argument `{other}`; usage: cargo xtask test [mcp|agents [PYTEST ARGS...]|deploy]"
            )
        }
    }
    eprintln!(
        "\n==> every step passed ({:.0}s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every temp dir a test makes (tempfile, pytest's tmp_path, scratch
/// projects) goes under `target/tmp`, so no test depends on or leaves state
/// outside `target/`. The workspace excludes `target`, so a scratch cargo
/// project there is a workspace of its own.
fn keep_temp_files_in_target(root: &Path) -> Result<()> {
    let tmp = root.join("target").join("tmp");
    fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    // SAFETY: xtask is single-threaded here; every step's child process
    // inherits the variable.
    unsafe { std::env::set_var("TMPDIR", &tmp) };
    Ok(())
}

/// Runs one step with a header, and names the step when it fails.
fn step<T>(n: usize, of: usize, what: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
    eprintln!("\n==> [{n}/{of}] {what}");
    let started = Instant::now();
    let value = body().with_context(|| format!("step {n}/{of} failed: {what}"))?;
    eprintln!(
        "==> [{n}/{of}] done ({:.0}s)",
        started.elapsed().as_secs_f64()
    );
    Ok(value)
}

/// Builds `toolhost` and the example plugins, then runs the pytest suite.
fn mcp_suite(root: &Path, venv: &Venv, pytest_args: &[String]) -> Result<()> {
    let toolhost = build_toolhost(root)?;
    let plugins = build_plugins()?;
    let plugins = plugins
        .canonicalize()
        .with_context(|| format!("{} does not exist", plugins.display()))?;
    eprintln!(
        "$ TOOLHOST_BIN={} TOOLHOST_PLUGINS={} {} -m pytest tests/mcp -q {}",
        toolhost.display(),
        plugins.display(),
        venv.python().display(),
        pytest_args.join(" ")
    );
    run_step(
        Command::new(venv.python())
            .args(["-m", "pytest", "tests/mcp", "-q"])
            .args(pytest_args)
            .env("TOOLHOST_BIN", &toolhost)
            .env("TOOLHOST_PLUGINS", &plugins)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PATH", venv.path_with_bin()?)
            .env("VIRTUAL_ENV", &venv.dir)
            .current_dir(root),
    )
}

/// The oldest Node the JavaScript plugin's pinned packages support.
const MIN_NODE: (u32, u32) = (20, 19);

/// Tools the C plugin's build and the OCI interop test need, from
/// crates.io into `target/tools`: (crate, exact version, binary, the one
/// feature it needs; wkg has none to choose, `docker-tests` is its default
/// and only gates its own tests).
const AUTHOR_TOOLS: &[(&str, &str, &str, &str)] = &[
    ("wit-bindgen-cli", "0.63.0", "wit-bindgen", "c"),
    ("wasm-tools", "1.263.0", "wasm-tools", "component"),
    ("wkg", "0.16.1", "wkg", "docker-tests"),
];

/// The ignored polyglot tests (`tests/all/polyglot.rs`) and OCI interop
/// tests (`tests/all/oci.rs`), with the venv's `bin` (componentize-py,
/// ziglang, the oras SDK's python) and `target/tools/bin` (wit-bindgen,
/// wasm-tools, wkg) first on `PATH`; the JavaScript build runs `npm ci`
/// itself.
fn polyglot(env: &Env) -> Result<()> {
    check_node(MIN_NODE, "the JavaScript plugin (example-plugins/js-echo)")?;
    let tools = install_author_tools(&env.root)?;
    let rest = env.venv.path_with_bin()?;
    let path = std::env::join_paths(std::iter::once(tools).chain(std::env::split_paths(&rest)))
        .context("cannot put target/tools/bin on PATH")?;
    run_step(
        cargo()
            .args(["test", "-p", "toolhost-cli", "--test", "all"])
            .args(["--", "--ignored", "polyglot", "oci::"])
            .env("PATH", path)
            .env("VIRTUAL_ENV", &env.venv.dir)
            .current_dir(&env.root),
    )
}

/// The pinned MCP reference server the bridge tests run.
const EVERYTHING: &str = "example-plugins/mcp-everything";

/// `npm ci` in [`EVERYTHING`] (again only when its lockfile changed), then
/// the ignored bridge tests that run it (`tests/all/bridge.rs`).
fn bridge_everything(env: &Env) -> Result<()> {
    check_node(MIN_NODE, "@modelcontextprotocol/server-everything")?;
    let dir = env.root.join(EVERYTHING);
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
    run_step(
        cargo()
            .args(["test", "-p", "toolhost-cli", "--test", "all", "bridge"])
            .args(["--", "--ignored"])
            .current_dir(&env.root),
    )
}

/// Installs each of [`AUTHOR_TOOLS`] whose binary is missing or of another
/// version, and returns the `bin` directory holding them.
fn install_author_tools(root: &Path) -> Result<PathBuf> {
    let tools = root.join("target").join("tools");
    let bin = tools.join("bin");
    let build = tools.join("build");
    for &(krate, version, binary, feature) in AUTHOR_TOOLS {
        let installed = Command::new(bin.join(binary))
            .arg("--version")
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim_end()
                    .ends_with(version)
            });
        if installed {
            continue;
        }
        eprintln!("installing {krate} {version} into {}...", tools.display());
        // A debug build of only the needed feature takes about half the time
        // of the default release build, and the tools only handle small
        // files; the tools share one target directory, so their common
        // dependencies build once.
        run_step(
            cargo()
                .args(["install", "--locked", "--debug", "--quiet", "--root"])
                .arg(&tools)
                .args([krate, "--version", version, "--no-default-features"])
                .args(["--features", feature])
                .env("CARGO_TARGET_DIR", &build)
                .current_dir(root),
        )
        .with_context(|| format!("cannot install {krate} {version} (cargo needs crates.io)"))?;
    }
    // Only the binaries are kept: the build directory is over a gigabyte.
    if build.exists() {
        fs::remove_dir_all(&build).with_context(|| format!("cannot remove {}", build.display()))?;
    }
    Ok(bin)
}
