//! What the tasks share: the workspace's paths, cargo, running a command,
//! scratch directories, the debug `toolhost` and the Node.js check.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

/// The cargo that runs this task.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Runs `cmd` and fails, naming it as a person would type it, unless it
/// succeeds.
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

/// A fresh directory in the system's temp dir, removed when dropped: outside
/// the workspace, so cargo does not take a project there for a member.
pub(crate) fn scratch(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("cannot create a directory in the system's temp dir")
}

/// Builds the debug `toolhost` and gives its path.
pub(crate) fn build_toolhost(root: &Path) -> Result<PathBuf> {
    eprintln!("building toolhost (cargo build -p toolhost-cli)...");
    run_step(
        cargo()
            .args(["build", "--quiet", "-p", "toolhost-cli"])
            .current_dir(root),
    )?;
    let toolhost = target_dir(root).join("debug").join("toolhost");
    if !toolhost.is_file() {
        bail!(
            "cargo built toolhost-cli, but {} is missing",
            toolhost.display()
        );
    }
    Ok(toolhost)
}

/// Fails clearly when `node` is missing or older than `min` (major, minor);
/// `what` names what needs it.
pub(crate) fn check_node(min: (u32, u32), what: &str) -> Result<()> {
    let (major, minor) = min;
    let out = Command::new("node")
        .arg("--version")
        .output()
        .with_context(|| {
            format!("cannot run node: {what} needs Node.js {major}.{minor} or newer, and npm")
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let mut parts = version
        .trim_start_matches('v')
        .split('.')
        .map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b))) if (a, b) >= min => Ok(()),
        _ => bail!("node is {version:?}; {what} needs Node.js {major}.{minor} or newer"),
    }
}

/// Builds the example plugins exactly as the tests' build script does.
pub(crate) fn build_plugins() -> Result<PathBuf> {
    let root = root();
    let target = root.join("target").join("plugins");
    eprintln!("building the example plugins (wasm32-wasip2, release)...");
    run_step(
        cargo()
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(root.join("example-plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target),
    )
    .context("is the wasm32-wasip2 target installed? Run `rustup target add wasm32-wasip2`")?;
    Ok(target.join("wasm32-wasip2/release"))
}
