//! `cargo xtask layers`: prints the library's crates, bottom to top, with
//! their lines of Rust and the library crates each depends on, and fails if
//! one depends on a crate above it. Cargo already refuses a circle; this
//! holds the order itself (the store must not come to depend on the
//! configuration layer, say, even though that would compile). [`CRATES`]
//! is the one list of the layers; README.md and the crates' docs show it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The library's crates, bottom to top: each depends only on crates before
/// it. Their directories are under `host/`.
const CRATES: &[(&str, &str)] = &[
    (
        "toolhost-model",
        "model types, errors, bounded file reading, native tools",
    ),
    (
        "toolhost-store",
        "the store: SQLite (file or memory), Postgres",
    ),
    (
        "toolhost-core",
        "configuration, manifests, permission, the registry, output bounding, the event log, TLS",
    ),
    (
        "toolhost-oci",
        "plugins from OCI registries: pull, verify, push, sign, lock",
    ),
    (
        "toolhost-runtime",
        "the wasm runtime, outbound HTTP, Code Mode's interpreter",
    ),
    (
        "toolhost",
        "settlement, Code Mode's execute tool, the facade: what embedders use",
    ),
    ("toolhost-mcp", "the MCP server and bridge"),
];

/// One library crate as cargo describes it.
struct Crate {
    name: String,
    /// The directory holding its Cargo.toml.
    dir: String,
    /// The library crates it depends on (not counting dev-dependencies).
    uses: BTreeSet<String>,
}

pub(crate) fn check(root: &Path) -> Result<()> {
    let crates = library_crates(root)?;
    let position = |name: &str| CRATES.iter().position(|(n, _)| *n == name);
    let mut problems = Vec::new();
    eprintln!("the library's crates, bottom to top (each depends only on crates below it):");
    for (i, (name, what)) in CRATES.iter().enumerate() {
        let Some(krate) = crates.iter().find(|c| c.name == *name) else {
            problems.push(format!(
                "{name} is in xtask/src/layers.rs but not in the workspace"
            ));
            continue;
        };
        let lines = rust_lines(&Path::new(&krate.dir).join("src"))?;
        let uses: Vec<&str> = krate.uses.iter().map(String::as_str).collect();
        eprintln!("  {i}. {name} ({lines} lines): {what}");
        eprintln!(
            "       uses: {}",
            if uses.is_empty() {
                "-".into()
            } else {
                uses.join(", ")
            }
        );
        for used in &krate.uses {
            if position(used).is_none_or(|theirs| theirs >= i) {
                problems.push(format!("{name} depends on {used}, which is not below it"));
            }
        }
    }
    for krate in &crates {
        if position(&krate.name).is_none() {
            problems.push(format!(
                "{} is a library crate under host/ with no place in xtask/src/layers.rs",
                krate.name
            ));
        }
    }
    if problems.is_empty() {
        eprintln!(
            "layers: {} crates, none depends on a crate above it",
            CRATES.len()
        );
        return Ok(());
    }
    bail!("{}", problems.join("\n"))
}

/// The workspace's packages under `host/`, with their dependencies on one
/// another, from `cargo metadata`.
fn library_crates(root: &Path) -> Result<Vec<Crate>> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metadata: Value = serde_json::from_slice(&out.stdout).context("cargo metadata's JSON")?;
    let host = root.join("host");
    let mut crates = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().unwrap_or(manifest);
        if !dir.starts_with(&host) {
            continue;
        }
        let uses = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            // `kind` is null for normal dependencies, "build" or "dev".
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .filter_map(|d| d["name"].as_str())
            .filter(|name| CRATES.iter().any(|(n, _)| n == name))
            .map(str::to_owned)
            .collect();
        crates.push(Crate {
            name: package["name"].as_str().unwrap_or_default().to_owned(),
            dir: dir.to_string_lossy().into_owned(),
            uses,
        });
    }
    Ok(crates)
}

/// Lines of the `.rs` files under `dir`.
fn rust_lines(dir: &Path) -> Result<usize> {
    let mut lines = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                lines += std::fs::read_to_string(&path)?.lines().count();
            }
        }
    }
    Ok(lines)
}
