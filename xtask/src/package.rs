//! `cargo xtask package`: the SDK and the library as crates.io would ship
//! them, used the way a plugin author and an embedder would. `cargo package`
//! packs (and verifies) `toolhost-sdk`, `toolhost-sdk-macros` and the
//! `toolhost-names` both the macros and the library depend on (one call, so
//! cargo resolves the unpublished crates against each other's packages);
//! the `.crate` files are unpacked under
//! `target/package-test/`; a plugin crate written in a temporary directory
//! outside this workspace depends on the unpacked SDK by path (and patches
//! the crates it names by version to the unpacked ones, as if they came
//! from crates.io) and is built for wasm32-wasip2; and the real `toolhost` CLI calls its tool. A file
//! missing from a package, a path that only resolves inside this repository,
//! or a macro that names something the package does not export fails here.
//!
//! The `toolhost` library and its layer crates are packaged without cargo's verification (which
//! rebuilds wasmtime in a directory of its own, about five minutes here);
//! instead an embedder crate outside the workspace depends on the unpacked
//! package (and the unpacked `toolhost-names`) and is `cargo check`ed against the workspace's lockfile and
//! target directory, which proves the package complete (its WIT included)
//! while reusing the dependencies already checked.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::{build_toolhost, cargo, run_step, scratch, target_dir};

/// The packages.
const LIBRARY: &str = "toolhost";
const SDK: &str = "toolhost-sdk";
const MACROS: &str = "toolhost-sdk-macros";
const NAMES: &str = "toolhost-names";

/// The plugin's package name, and so its component's file name.
const PLUGIN: &str = "package-test";

/// The plugin an author would write: macros, serde attributes, the context.
const PLUGIN_SOURCE: &str = r#"use toolhost_sdk::prelude::*;

#[input]
struct JoinInput {
    /// The words to join.
    words: Vec<String>,
    /// What goes between two words.
    #[serde(default = "comma")]
    separator: String,
}

fn comma() -> String {
    ", ".into()
}

#[output]
struct Joined {
    /// The words, joined.
    text: String,
    /// How many words there were.
    count: usize,
}

/// Join words with a separator.
#[tool(name = "join")]
fn join_words(input: JoinInput, cx: &Context) -> ToolResult<Joined> {
    cx.progress(json!({ "words": input.words.len() }));
    let text = input.words.join(&input.separator);
    Ok(Joined { text, count: input.words.len() }.into())
}

toolhost_sdk::plugin!([join_words]);
"#;

/// The call, and what `toolhost call --json` must print for it: the output
/// exactly as serde_json pretty-prints it (keys sorted), and the progress
/// line on stderr.
const INPUT: &str = r#"{"words": ["wasm", "tools"]}"#;
const EXPECTED_OUTPUT: &str = r#"  "output": {
    "count": 2,
    "text": "wasm, tools"
  },"#;
const EXPECTED_PROGRESS: &str = r#""update":{"words":2}"#;

/// Packages, unpacks, builds the plugin and calls its tool.
pub(crate) fn run(root: &Path) -> Result<()> {
    let target = target_dir(root);
    let unpacked = target.join("package-test");
    let crates = package(root, &target)?;
    let [sdk, macros, names] = unpack(&crates, &unpacked)?;
    let plugin = scratch("toolhost-package-")?;
    write_plugin(plugin.path(), &sdk, &[(MACROS, &macros), (NAMES, &names)])?;
    let wasm = build_plugin(plugin.path(), &unpacked.join("target"))?;
    let toolhost = build_toolhost(root)?;
    call(&toolhost, &wasm, &unpacked.join("cache"))?;
    eprintln!("the packaged SDK builds a plugin outside the workspace, and its tool answers");
    check_library(root, &target, &unpacked, &names)?;
    eprintln!("the packaged library compiles in an embedder outside the workspace");
    Ok(())
}

/// The embedder: the library's builder, the one place every default meets.
const EMBEDDER_SOURCE: &str = r#"fn main() {
    let host = toolhost::Host::builder().build().expect("a host with the defaults");
    drop(host.location("/"));
}
"#;

/// The library's layer crates, bottom to top, each packaged with the
/// library: none is on crates.io yet.
const LAYERS: [&str; 6] = [
    "toolhost-model",
    "toolhost-store",
    "toolhost-core",
    "toolhost-oci",
    "toolhost-runtime",
    LIBRARY,
];

/// Packages the library and its layer crates (unverified), unpacks them,
/// and checks an embedder crate outside the workspace that depends on the
/// library, with each layer crate and `names` (the unpacked
/// `toolhost-names`) patched in as crates.io would serve them.
fn check_library(root: &Path, target: &Path, unpacked: &Path, names: &Path) -> Result<()> {
    eprintln!(
        "packaging {} (cargo package --no-verify)...",
        LAYERS.join(", ")
    );
    // With `toolhost-names`, which is not on crates.io either: cargo
    // resolves each crate's dependencies against the others' packages.
    let mut command = cargo();
    command.args(["package", "--allow-dirty", "--no-verify", "-p", NAMES]);
    for layer in LAYERS {
        command.args(["-p", layer]);
    }
    run_step(command.current_dir(root))?;
    let files = LAYERS
        .map(|name| {
            version(root, name).map(|v| target.join("package").join(format!("{name}-{v}.crate")))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    let files: [PathBuf; LAYERS.len()] = files.try_into().expect("one file per layer");
    let layers = unpack(&files, unpacked)?;
    let library = &layers[LAYERS.len() - 1];
    let embedder = scratch("toolhost-embedder-")?;
    let mut patches = format!("{NAMES} = {{ path = {:?} }}\n", path_str(names)?);
    for (name, dir) in LAYERS.iter().zip(&layers) {
        patches.push_str(&format!("{name} = {{ path = {:?} }}\n", path_str(dir)?));
    }
    let manifest = format!(
        "[package]\nname = \"embedder\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[dependencies]\n{LIBRARY} = {{ path = {:?} }}\n\n\
         [patch.crates-io]\n{patches}",
        path_str(library)?,
    );
    fs::create_dir_all(embedder.path().join("src"))?;
    fs::write(embedder.path().join("Cargo.toml"), manifest)?;
    fs::write(embedder.path().join("src/main.rs"), EMBEDDER_SOURCE)?;
    // The workspace's versions and dependency profile, so that the checked
    // dependencies in its target directory are reused.
    fs::copy(root.join("Cargo.lock"), embedder.path().join("Cargo.lock"))?;
    eprintln!("checking an embedder of the packaged {LIBRARY}...");
    run_step(
        cargo()
            .args(["check", "--quiet", "--config"])
            .arg(r#"profile.dev.package."*".opt-level=1"#)
            .arg("--config")
            .arg(r#"profile.dev.package."*".debug=false"#)
            .env("CARGO_TARGET_DIR", target)
            .current_dir(embedder.path()),
    )
}

/// `cargo package` the SDK's crates, with verification; gives the `.crate`
/// files in the order of `[SDK, MACROS, NAMES]`.
fn package(root: &Path, target: &Path) -> Result<[PathBuf; 3]> {
    eprintln!("packaging {NAMES}, {MACROS} and {SDK} (cargo package, verified)...");
    // `--allow-dirty`: this checks what the package contains and that it
    // builds, not that the work tree is ready to publish.
    run_step(
        cargo()
            .args(["package", "--allow-dirty"])
            .args(["-p", NAMES, "-p", MACROS, "-p", SDK])
            .current_dir(root),
    )?;
    let crate_file = |name: &str| -> Result<PathBuf> {
        let file = target
            .join("package")
            .join(format!("{name}-{}.crate", version(root, name)?));
        if !file.is_file() {
            bail!("cargo package succeeded, but {} is missing", file.display());
        }
        Ok(file)
    };
    Ok([crate_file(SDK)?, crate_file(MACROS)?, crate_file(NAMES)?])
}

/// The version of a workspace package (`cargo pkgid` ends with `@VERSION`,
/// or `#VERSION` when the name is the directory's).
fn version(root: &Path, name: &str) -> Result<String> {
    let out = cargo()
        .args(["pkgid", "-p", name])
        .current_dir(root)
        .output()
        .context("cannot run cargo pkgid")?;
    let pkgid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match pkgid.rsplit(['@', '#']).next() {
        Some(version) if out.status.success() && !version.is_empty() => Ok(version.to_owned()),
        _ => bail!(
            "cargo pkgid -p {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Unpacks each `.crate` (a gzipped tarball of `NAME-VERSION/`) into `dir`,
/// replacing an earlier copy; gives the unpacked directories.
fn unpack<const N: usize>(crates: &[PathBuf; N], dir: &Path) -> Result<[PathBuf; N]> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // `NAME-VERSION.crate` unpacks into `NAME-VERSION/`.
    let unpacked = crates
        .clone()
        .map(|file| dir.join(file.file_stem().unwrap_or_default()));
    for (file, into) in crates.iter().zip(&unpacked) {
        // Only the unpacked crates are replaced: the plugin's build cache
        // beside them stays.
        if into.exists() {
            fs::remove_dir_all(into)
                .with_context(|| format!("cannot remove {}", into.display()))?;
        }
        run_step(Command::new("tar").arg("-xzf").arg(file).arg("-C").arg(dir))
            .with_context(|| format!("cannot unpack {} (is `tar` installed?)", file.display()))?;
        if !into.join("Cargo.toml").is_file() {
            bail!("{} did not unpack into {}", file.display(), into.display());
        }
    }
    Ok(unpacked)
}

/// The plugin crate: the SDK by path, and the crates the packaged SDK names
/// by version, as from crates.io (`patches`: name, unpacked directory)
/// patched to the unpacked ones.
fn write_plugin(dir: &Path, sdk: &Path, patches: &[(&str, &Path)]) -> Result<()> {
    let mut manifest = format!(
        r#"[package]
name = "{PLUGIN}"
version = "0.0.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
toolhost-sdk = {{ path = {sdk:?} }}

[patch.crates-io]
"#,
        sdk = path_str(sdk)?,
    );
    for (name, path) in patches {
        manifest.push_str(&format!("{name} = {{ path = {:?} }}\n", path_str(path)?));
    }
    fs::create_dir_all(dir.join("src"))?;
    fs::write(dir.join("Cargo.toml"), manifest)?;
    fs::write(dir.join("src/lib.rs"), PLUGIN_SOURCE)?;
    Ok(())
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// Builds the plugin (release, wasm32-wasip2) into `target`, which outlives
/// the plugin's directory so the next run reuses the build.
fn build_plugin(dir: &Path, target: &Path) -> Result<PathBuf> {
    eprintln!(
        "building a plugin outside the workspace, in {}...",
        dir.display()
    );
    run_step(
        cargo()
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .env("CARGO_TARGET_DIR", target)
            .current_dir(dir),
    )
    .context("is the wasm32-wasip2 target installed? Run `rustup target add wasm32-wasip2`")?;
    let wasm = target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", PLUGIN.replace('-', "_")));
    if !wasm.is_file() {
        bail!("the build succeeded, but {} is missing", wasm.display());
    }
    Ok(wasm)
}

/// `toolhost call PLUGIN join --input … --json` must complete with exactly
/// the expected output, and report the tool's progress.
fn call(toolhost: &Path, wasm: &Path, cache: &Path) -> Result<()> {
    let out = Command::new(toolhost)
        .arg("call")
        .arg(wasm)
        .args(["join", "--input", INPUT, "--json"])
        .env("TOOLHOST_CACHE_DIR", cache)
        .output()
        .with_context(|| format!("cannot run {}", toolhost.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let completed = out.status.success() && stdout.contains(r#""status": "completed""#);
    if !completed || !stdout.contains(EXPECTED_OUTPUT) || !stderr.contains(EXPECTED_PROGRESS) {
        bail!(
            "toolhost call {} join --input '{INPUT}' --json should complete with\n\
             {EXPECTED_OUTPUT}\nand progress {EXPECTED_PROGRESS} on stderr, but exited \
             with {}:\n{stdout}\nstderr:\n{stderr}",
            wasm.display(),
            out.status
        );
    }
    Ok(())
}
