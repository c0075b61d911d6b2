//! `cargo xtask test deploy`: the Kubernetes manifests of `deploy/kubernetes`
//! rendered with `kubectl kustomize` (the base and each overlay, offline,
//! into `target/deploy/`), every object validated against the Kubernetes
//! schemas by `kubernetes-validate` from the venv (the pins of
//! `tests/deploy/requirements.txt`; it ships the schemas, so nothing is
//! fetched), then `tests/deploy/check_workloads.py`: every container runs
//! as non-root on a read-only root filesystem with no privilege escalation,
//! no capabilities and the runtime's seccomp profile, and the toolhost
//! Deployment's probes and termination grace period fit `serve`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::run_step;
use crate::venv::Venv;

/// The step's name in `cargo xtask test`.
pub(crate) const STEP: &str =
    "Kubernetes manifests (kubectl kustomize, kubernetes-validate, restricted containers)";

/// What is rendered: a name for the output file, and the kustomization.
const KUSTOMIZATIONS: &[(&str, &str)] = &[
    ("base", "deploy/kubernetes/base"),
    ("postgres", "deploy/kubernetes/overlays/postgres"),
];

/// The Kubernetes versions every object must validate against: the oldest
/// the manifests support (the kubelet's `preStop` sleep is on by default
/// from 1.30) and the newest whose schemas kubernetes-validate ships.
const KUBERNETES_VERSIONS: &[&str] = &["1.30", "1.37"];

/// The kustomize (inside kubectl) the kustomizations are written for:
/// kustomize 5, in kubectl 1.27 and newer (Debian's `kubernetes-client`,
/// kubectl 1.20, has kustomize 2, which cannot read `labels`).
const MIN_KUSTOMIZE_MAJOR: u32 = 5;

/// Renders, validates and checks every kustomization.
pub(crate) fn run(root: &Path, venv: &Venv) -> Result<()> {
    check_kubectl()?;
    let out = root.join("target").join("deploy");
    fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut rendered = Vec::new();
    for &(name, dir) in KUSTOMIZATIONS {
        rendered.push(render(root, name, dir, &out)?);
    }
    let validate = venv.bin().join("kubernetes-validate");
    for version in KUBERNETES_VERSIONS {
        eprintln!(
            "$ kubernetes-validate --strict --quiet --kubernetes-version {version} {}",
            describe(&rendered)
        );
        let output = Command::new(&validate)
            .args(["--strict", "--quiet", "--kubernetes-version", version])
            .args(&rendered)
            .current_dir(root)
            .output()
            .with_context(|| {
                format!(
                    "cannot run {} (installed from tests/deploy/requirements.txt)",
                    validate.display()
                )
            })?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprint!("{text}");
        // A kind it has no schema for is only a warning to it; here it is a
        // failure, since nothing would have checked that object.
        if !output.status.success() || text.contains("WARN") || text.contains("ERROR") {
            bail!("the rendered manifests do not validate against Kubernetes {version}");
        }
        eprintln!(
            "every object validates against Kubernetes {version} (strict: no unknown fields)"
        );
    }
    let check = root.join("tests/deploy/check_workloads.py");
    eprintln!(
        "$ python tests/deploy/check_workloads.py {}",
        describe(&rendered)
    );
    run_step(
        Command::new(venv.python())
            .arg(&check)
            .args(&rendered)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(root),
    )
}

/// `kubectl kustomize DIR` into `OUT/NAME.yaml`.
fn render(root: &Path, name: &str, dir: &str, out: &Path) -> Result<PathBuf> {
    eprintln!("$ kubectl kustomize {dir} > target/deploy/{name}.yaml");
    let output = Command::new("kubectl")
        .args(["kustomize", dir])
        .current_dir(root)
        .output()
        .context("cannot run kubectl")?;
    if !output.status.success() {
        bail!(
            "`kubectl kustomize {dir}` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let file = out.join(format!("{name}.yaml"));
    fs::write(&file, &output.stdout).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(file)
}

/// Fails clearly when kubectl is missing or its kustomize is too old.
fn check_kubectl() -> Result<()> {
    let output = Command::new("kubectl")
        .args(["version", "--client", "--output=yaml"])
        .output()
        .context(
            "cannot run kubectl: install it (.ci/run does with apt; docs/deploy.md has the \
             other ways); the deploy step renders the manifests with `kubectl kustomize`",
        )?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("kustomizeVersion:"))
        .map(|v| v.trim().trim_start_matches('v').to_owned())
        .unwrap_or_default();
    match version.split('.').next().map(str::parse::<u32>) {
        Some(Ok(major)) if major >= MIN_KUSTOMIZE_MAJOR => Ok(()),
        _ => bail!(
            "kubectl's kustomize is {version:?}; the manifests need kustomize \
             {MIN_KUSTOMIZE_MAJOR} or newer (kubectl 1.27 or newer)"
        ),
    }
}

/// The rendered files, relative to the workspace when they are in it.
fn describe(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| {
            f.strip_prefix(crate::support::root())
                .unwrap_or(f)
                .display()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}
