//! `cargo xtask templates`: every `toolhost new` template, built the way its
//! README says and checked, so a template that stops building or whose
//! samples fail is caught here and not by a plugin author.
//!
//! For each language, the debug `toolhost new` writes a project into a
//! temporary directory (outside this workspace, so cargo does not take a
//! Rust project for one of its members), which is then built:
//!
//! - Python: `./build.sh`, with `target/venv`'s componentize-py first on
//!   `PATH` (`cargo xtask test` prepares the venv; so does this command);
//! - JS: `npm install` and `npm run build`, with Node 20 or newer;
//! - Rust: `cargo build --release --target wasm32-wasip2`, with `toolhost-sdk`
//!   patched to this repository's `guest-sdk/` (it is not on crates.io yet).
//!
//! Then `toolhost check toolhost.toml` must pass, and must fail (exit 1)
//! once a sample expects the wrong status, so the check is known to bite.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::{build_toolhost, cargo, check_node, root, run_step, scratch};
use crate::venv::{Env, prepare_venv};

/// The name every generated project gets.
const NAME: &str = "my-tools";

/// A template: its `--lang`, and how its README builds it.
struct Lang {
    name: &'static str,
    build: fn(&Env, &Path) -> Result<()>,
}

const LANGS: &[Lang] = &[
    Lang {
        name: "python",
        build: build_python,
    },
    Lang {
        name: "js",
        build: build_js,
    },
    Lang {
        name: "rust",
        build: build_rust,
    },
];

/// `cargo xtask templates`: prepares `target/venv`, then [`check`].
pub fn run() -> Result<()> {
    let root = root();
    let venv = prepare_venv(&root)?;
    check(&Env { root, venv })
}

/// Writes, builds and checks a project of every template.
pub(crate) fn check(env: &Env) -> Result<()> {
    let toolhost = build_toolhost(&env.root)?;
    let scratch = scratch("toolhost-templates-")?;
    for lang in LANGS {
        eprintln!("\n--- the {} template", lang.name);
        let project = scratch.path().join(lang.name);
        run_step(
            Command::new(&toolhost)
                .args(["new", NAME, "--lang", lang.name, "--dir"])
                .arg(&project),
        )?;
        (lang.build)(env, &project)
            .with_context(|| format!("building the {} template's project", lang.name))?;
        let wasm = checked(&toolhost, &project, &scratch.path().join("cache"))
            .with_context(|| format!("checking the {} template's project", lang.name))?;
        eprintln!(
            "the {} template builds ({}: {:.1} MiB) and its samples pass",
            lang.name,
            wasm.display(),
            fs::metadata(&wasm)?.len() as f64 / (1024.0 * 1024.0)
        );
    }
    Ok(())
}

fn build_python(env: &Env, project: &Path) -> Result<()> {
    run_step(
        Command::new(project.join("build.sh"))
            .env("PATH", env.venv.path_with_bin()?)
            .env("VIRTUAL_ENV", &env.venv.dir)
            .current_dir(project),
    )
}

fn build_js(_: &Env, project: &Path) -> Result<()> {
    check_node((20, 0), "the JS template")?;
    run_step(Command::new("npm").arg("install").current_dir(project))?;
    run_step(
        Command::new("npm")
            .args(["run", "build"])
            .current_dir(project),
    )
}

fn build_rust(env: &Env, project: &Path) -> Result<()> {
    let sdk = env.root.join("guest-sdk");
    let patch = |krate: &str, path: &Path| {
        format!(
            "patch.crates-io.{krate}.path={:?}",
            path.display().to_string()
        )
    };
    run_step(
        cargo()
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .arg("--config")
            .arg(patch("toolhost-sdk", &sdk))
            .arg("--config")
            .arg(patch("toolhost-sdk-macros", &sdk.join("macros")))
            // The project's manifest expects the wasm in its own target/.
            .env_remove("CARGO_TARGET_DIR")
            .current_dir(project),
    )
}

/// `toolhost check toolhost.toml` passes, then fails once a sample expects
/// the wrong status; gives the built component's path.
fn checked(toolhost: &Path, project: &Path, cache: &Path) -> Result<PathBuf> {
    let check = || {
        let mut cmd = Command::new(toolhost);
        cmd.args(["check", "toolhost.toml"])
            .env("TOOLHOST_CACHE_DIR", cache)
            .current_dir(project);
        cmd
    };
    run_step(&mut check())?;

    let samples = project.join("samples.toml");
    let text = fs::read_to_string(&samples)?;
    let broken = text.replacen(r#"status = "completed""#, r#"status = "error""#, 1);
    if broken == text {
        bail!("{} has no completed sample to break", samples.display());
    }
    fs::write(&samples, broken)?;
    eprintln!("a sample now expects the wrong status, so toolhost check must fail...");
    let out = check().output().context("cannot run toolhost check")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() != Some(1) || !stdout.contains(", 1 failed") {
        bail!(
            "toolhost check should fail (exit 1) when a sample expects the wrong status, \
             but exited with {}:\n{stdout}",
            out.status
        );
    }
    component(project)
}

/// The component the project's manifest names (its `path = "..."` line).
fn component(project: &Path) -> Result<PathBuf> {
    let manifest = fs::read_to_string(project.join("toolhost.toml"))?;
    let path = manifest
        .lines()
        .find_map(|line| line.strip_prefix("path = "))
        .map(|value| value.trim().trim_matches('"'))
        .context("toolhost.toml has no `path = \"...\"` line")?;
    Ok(project.join(path))
}
