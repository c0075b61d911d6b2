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

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::build_plugins;
use crate::support::{build_toolhost, cargo, check_node, root, run_step};

/// The Python packages plugin authors' tools need (componentize-py, ...),
/// installed next to the MCP client's.
const AUTHOR_REQUIREMENTS: &str = "tests/requirements-authors.txt";

/// The MCP client's pinned packages.
const MCP_REQUIREMENTS: &str = "tests/mcp/requirements.txt";

/// The deploy check's pinned packages (kubernetes-validate).
const DEPLOY_REQUIREMENTS: &str = "tests/deploy/requirements.txt";

/// The oldest Python the `mcp` package supports.
const MIN_PYTHON: (u32, u32) = (3, 10);

/// What every step gets: the workspace root and the prepared venv.
pub(crate) struct Env {
    pub(crate) root: PathBuf,
    pub(crate) venv: Venv,
}

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

/// The prepared venv.
pub(crate) struct Venv {
    pub(crate) dir: PathBuf,
}

impl Venv {
    pub(crate) fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    pub(crate) fn python(&self) -> PathBuf {
        self.bin().join("python")
    }

    /// `PATH` with the venv's `bin` first.
    pub(crate) fn path_with_bin(&self) -> Result<OsString> {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        std::env::join_paths(std::iter::once(self.bin()).chain(std::env::split_paths(&rest)))
            .context("cannot put the venv's bin directory on PATH")
    }
}

/// Creates `target/venv` (or reuses it while the pins it was made from are
/// unchanged) with the pinned packages of [`MCP_REQUIREMENTS`],
/// [`AUTHOR_REQUIREMENTS`] and [`DEPLOY_REQUIREMENTS`].
pub(crate) fn prepare_venv(root: &Path) -> Result<Venv> {
    let venv = Venv {
        dir: root.join("target").join("venv"),
    };
    let files = [
        root.join(MCP_REQUIREMENTS),
        root.join(AUTHOR_REQUIREMENTS),
        root.join(DEPLOY_REQUIREMENTS),
    ];
    let mut wanted = String::new();
    for file in &files {
        wanted +=
            &fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    }
    let stamp = venv.dir.join(".toolhost-requirements");

    let healthy = Command::new(venv.python())
        .args(["-c", "import sys"])
        .output()
        .is_ok_and(|o| o.status.success());
    if healthy && fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        eprintln!("reusing {} (pins unchanged)", venv.dir.display());
        return Ok(venv);
    }

    let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    check_python(&python)?;
    if !healthy {
        eprintln!("creating {}", venv.dir.display());
        run_step(
            Command::new(&python)
                .args(["-m", "venv", "--clear"])
                .arg(&venv.dir),
        )
        .context("cannot create the venv; on Debian and Ubuntu, `apt-get install python3-venv`")?;
    }
    // A changed pin invalidates the stamp before anything is installed, so an
    // interrupted install is redone next time.
    let _ = fs::remove_file(&stamp);
    eprintln!(
        "installing the pinned packages of {MCP_REQUIREMENTS}, {AUTHOR_REQUIREMENTS} and {DEPLOY_REQUIREMENTS}..."
    );
    let mut pip = Command::new(venv.python());
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar",
        "off",
    ]);
    for file in &files {
        pip.arg("-r").arg(file);
    }
    run_step(&mut pip).context("cannot install the Python packages (pip needs to reach PyPI)")?;
    fs::write(&stamp, &wanted).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(venv)
}

/// Fails clearly when `python` is missing or older than [`MIN_PYTHON`].
fn check_python(python: &std::ffi::OsStr) -> Result<()> {
    let (major, minor) = MIN_PYTHON;
    let out = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .with_context(|| {
            format!(
                "cannot run {}: install Python {major}.{minor} or newer (or set PYTHON to one)",
                python.to_string_lossy()
            )
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let parsed = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    match parsed {
        Some(v) if v >= MIN_PYTHON => Ok(()),
        _ => bail!(
            "{} is Python {version:?}; the MCP tests need {major}.{minor} or newer (set PYTHON to one)",
            python.to_string_lossy()
        ),
    }
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
