//! `cargo xtask wheel`: the `toolhost` CLI as a Python wheel, built and
//! tested the way a Python or JS plugin author would get it. maturin (pinned
//! in `tests/requirements-authors.txt`, run from `target/venv`) builds
//! `cli/pyproject.toml` (`bindings = "bin"`) into `target/wheels`; pip
//! installs the wheel into a fresh venv in a temp dir with no index (a bin
//! wheel has no dependencies); then the installed `toolhost` must print the
//! Cargo version and complete a real `call` of an example plugin.
//!
//! The wheel is built in the dev profile in the workspace target dir, so it
//! reuses what `cargo build -p toolhost-cli` compiled (wasmtime is not
//! rebuilt; only the stripped `toolhost` binary is relinked). Wheels to
//! publish come from `maturin build --release` (see the README).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::build_plugins;
use crate::support::{cargo, root, run_step, scratch, target_dir};
use crate::venv::{Env, Venv, prepare_venv};

/// The pyproject.toml maturin builds, next to the CLI's Cargo.toml.
const MANIFEST: &str = "cli/Cargo.toml";

/// How the wheel's file name starts: the distribution `toolhost-cli`, as
/// wheel names spell it (the PyPI name `toolhost` is someone else's).
const WHEEL_PREFIX: &str = "toolhost_cli-";

/// `cargo xtask wheel`: prepares `target/venv` (for maturin), then [`check`].
pub fn run() -> Result<()> {
    let root = root();
    let venv = prepare_venv(&root)?;
    check(&Env { root, venv })
}

/// Builds the wheel, installs it into a fresh venv and runs `toolhost`.
pub(crate) fn check(env: &Env) -> Result<()> {
    let version = cli_version(&env.root)?;
    let wheel = build(env, &version)?;
    let plugins = build_plugins()?;
    let fresh = scratch("toolhost-wheel-")?;
    let installed = install(&env.venv, fresh.path(), &wheel)?;
    check_version(&installed, &version)?;
    check_call(&installed, &plugins.join("text_tools.wasm"), fresh.path())?;
    eprintln!(
        "{} ({:.1} MiB) installs and runs",
        wheel.display(),
        fs::metadata(&wheel)?.len() as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// The CLI's version as Cargo has it (`cargo pkgid` prints
/// `path+file:///…/cli#toolhost-cli@0.1.0`), which the wheel must carry.
fn cli_version(root: &Path) -> Result<String> {
    let out = capture(
        cargo()
            .args(["pkgid", "-p", "toolhost-cli"])
            .current_dir(root),
    )?;
    let id = out.trim();
    let version = id.rsplit(['@', '#']).next().unwrap_or_default();
    if version.is_empty() || !version.starts_with(|c: char| c.is_ascii_digit()) {
        bail!("cannot read the version from `cargo pkgid -p toolhost-cli`: {id:?}");
    }
    Ok(version.to_owned())
}

/// Runs maturin from the venv; returns the one wheel it built.
fn build(env: &Env, version: &str) -> Result<PathBuf> {
    let out = target_dir(&env.root).join("wheels");
    // A wheel of an earlier version left in `out` must not be mistaken for
    // this build's.
    remove_wheels(&out)?;
    let maturin = env.venv.bin().join("maturin");
    if !maturin.is_file() {
        bail!(
            "{} does not exist; install the pins of tests/requirements-authors.txt there \
             (`cargo xtask wheel` and `cargo xtask test` do when they change)",
            maturin.display()
        );
    }
    eprintln!("$ maturin build --profile dev --manifest-path {MANIFEST}");
    run_step(
        Command::new(&maturin)
            .args(["build", "--quiet", "--profile", "dev", "--manifest-path"])
            .arg(env.root.join(MANIFEST))
            .arg("--out")
            .arg(&out)
            .current_dir(&env.root),
    )?;
    let wheels = wheels_in(&out)?;
    match wheels.as_slice() {
        [wheel] => {
            let name = wheel.file_name().unwrap_or_default().to_string_lossy();
            if !name.starts_with(&format!("{WHEEL_PREFIX}{version}-py3-none-")) {
                bail!("maturin built {name}; expected toolhost-cli {version} for any Python 3");
            }
            Ok(wheel.clone())
        }
        _ => bail!(
            "expected one toolhost wheel in {}, found {wheels:?}",
            out.display()
        ),
    }
}

fn wheels_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut wheels = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(WHEEL_PREFIX) && name.ends_with(".whl") {
            wheels.push(path);
        }
    }
    Ok(wheels)
}

fn remove_wheels(dir: &Path) -> Result<()> {
    for wheel in wheels_in(dir)? {
        fs::remove_file(&wheel).with_context(|| format!("cannot remove {}", wheel.display()))?;
    }
    Ok(())
}

/// Makes a fresh venv in `fresh` and pip-installs the wheel there, offline;
/// returns the installed `toolhost`.
fn install(base: &Venv, fresh: &Path, wheel: &Path) -> Result<PathBuf> {
    let venv = Venv {
        dir: fresh.join("venv"),
    };
    eprintln!("$ python -m venv {}", venv.dir.display());
    run_step(
        Command::new(base.python())
            .args(["-m", "venv"])
            .arg(&venv.dir),
    )?;
    eprintln!("$ pip install --no-index {}", wheel.display());
    run_step(
        Command::new(venv.python())
            .args(["-m", "pip", "install", "--quiet", "--no-index"])
            .arg("--disable-pip-version-check")
            .arg(wheel),
    )?;
    let toolhost = venv.bin().join("toolhost");
    if !toolhost.is_file() {
        bail!(
            "pip installed the wheel but {} does not exist; is `bindings = \"bin\"` still \
             in cli/pyproject.toml?",
            toolhost.display()
        );
    }
    Ok(toolhost)
}

/// `toolhost --version` must print the version the wheel was built from.
fn check_version(toolhost: &Path, version: &str) -> Result<()> {
    let printed = capture(Command::new(toolhost).arg("--version"))?;
    let expected = format!("toolhost {version}");
    if printed.trim() != expected {
        bail!("the installed `toolhost --version` printed {printed:?}; expected {expected:?}");
    }
    eprintln!("$ toolhost --version\n{expected}");
    Ok(())
}

/// A real call through the installed binary: wasmtime, the plugin, schemas.
fn check_call(toolhost: &Path, text_tools: &Path, scratch: &Path) -> Result<()> {
    eprintln!(
        "$ toolhost call {} echo --input '{{\"message\":\"hi\"}}' --json",
        text_tools.display()
    );
    let json = capture(
        Command::new(toolhost)
            .arg("call")
            .arg(text_tools)
            .args(["echo", "--input", r#"{"message":"hi"}"#, "--json"])
            // Keep the user's compile cache out of the test.
            .arg("--cache-dir")
            .arg(scratch.join("cache")),
    )?;
    // The JSON is pretty-printed; none of the checked values has whitespace.
    let compact: String = json.chars().filter(|c| !c.is_whitespace()).collect();
    for expected in [
        r#""tool":"echo""#,
        r#""status":"completed""#,
        r#""content":[{"type":"text","text":"hi"}]"#,
        r#""output":{"message":"hi"}"#,
    ] {
        if !compact.contains(expected) {
            bail!("the installed `toolhost call … --json` printed no {expected}:\n{json}");
        }
    }
    eprintln!("completed, output {{\"message\":\"hi\"}}");
    Ok(())
}

/// Runs `cmd`; its stdout, or an error with its stderr.
fn capture(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8"))
}
