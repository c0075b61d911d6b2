//! `cargo xtask test`: every test of the project, on a machine with only
//! rustup, cargo, Python 3 (3.10 or newer) and Node. First a Python venv at
//! `target/venv` with the exact packages of `tests/mcp/requirements.txt` and
//! `tests/requirements-authors.txt` (reused while those pins are unchanged),
//! then each of [`STEPS`] in order: `cargo test --workspace`, the polyglot
//! test (a Python plugin, with the venv's `bin` first on `PATH`), and the MCP
//! client suite (`python -m pytest tests/mcp -q` against the debug
//! `toolhost`, given TOOLHOST_BIN and TOOLHOST_PLUGINS).
//!
//! `cargo xtask test mcp [PYTEST ARGS...]` prepares the venv and runs only
//! the MCP suite, passing the extra arguments to pytest (e.g. `-k watch -x`).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{build_plugins, cargo, root};

/// The Python packages plugin authors' tools need (componentize-py, ...),
/// installed next to the MCP client's.
const AUTHOR_REQUIREMENTS: &str = "tests/requirements-authors.txt";

/// The MCP client's pinned packages.
const MCP_REQUIREMENTS: &str = "tests/mcp/requirements.txt";

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
        "polyglot test (a Python plugin via componentize-py)",
        |env| {
            run_step(
                cargo()
                    .args(["test", "-p", "toolhost-cli", "--test", "all", "polyglot"])
                    .args(["--", "--ignored"])
                    .env("PATH", env.venv.path_with_bin()?)
                    .env("VIRTUAL_ENV", &env.venv.dir)
                    .current_dir(&env.root),
            )
        },
    ),
    ("MCP client tests (tests/mcp, Python mcp client)", |env| {
        mcp_suite(&env.root, &env.venv, &[])
    }),
    (
        "Python wheel of the CLI (maturin): install in a fresh venv, run toolhost",
        crate::wheel::check,
    ),
];

/// Runs every test (no arguments), or only the MCP suite (`mcp [ARGS]`).
pub fn run(args: &[String]) -> Result<()> {
    let root = root();
    let started = Instant::now();
    match args.split_first() {
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
        Some((other, _)) => {
            bail!("unknown argument `{other}`; usage: cargo xtask test [mcp [PYTEST ARGS...]]")
        }
    }
    eprintln!(
        "\n==> every step passed ({:.0}s)",
        started.elapsed().as_secs_f64()
    );
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

pub(crate) fn run_step(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// A command as a person would type it (program and arguments).
fn describe(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .unwrap_or(cmd.get_program())
        .to_string_lossy()
        .into_owned();
    std::iter::once(program)
        .chain(cmd.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
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
/// unchanged) with the pinned packages of [`MCP_REQUIREMENTS`] and
/// [`AUTHOR_REQUIREMENTS`].
pub(crate) fn prepare_venv(root: &Path) -> Result<Venv> {
    let venv = Venv {
        dir: root.join("target").join("venv"),
    };
    let files = [root.join(MCP_REQUIREMENTS), root.join(AUTHOR_REQUIREMENTS)];
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
    eprintln!("installing the pinned packages of {MCP_REQUIREMENTS} and {AUTHOR_REQUIREMENTS}...");
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

/// The cargo target directory (`CARGO_TARGET_DIR`, else `target/`).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        }
        None => root.join("target"),
    }
}

/// Builds `toolhost` and the example plugins, then runs the pytest suite.
fn mcp_suite(root: &Path, venv: &Venv, pytest_args: &[String]) -> Result<()> {
    eprintln!("building toolhost (cargo build -p toolhost-cli)...");
    run_step(
        cargo()
            .args(["build", "--quiet", "-p", "toolhost-cli"])
            .current_dir(root),
    )?;
    let toolhost = target_dir(root).join("debug").join("toolhost");
    if !toolhost.is_file() {
        bail!(
            "cargo built toolhost-cli, but {} does not exist",
            toolhost.display()
        );
    }
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
