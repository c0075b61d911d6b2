//! The Python environment the tests and checks share: a venv at
//! `target/venv` with the exact packages of `tests/mcp/requirements.txt`,
//! `tests/requirements-authors.txt` and `tests/deploy/requirements.txt`,
//! reused while those pins are unchanged.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::run_step;

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
