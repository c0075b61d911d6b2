//! The system programs the tests start (and the CLI's build needs), each
//! from its Debian package, installed when missing: as root, or through
//! `sudo` without a password, saying what is installed and why. CI runs
//! the same (`.ci/run` calls `cargo xtask test`), so CI proves the README.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::support::run_step;

/// A Debian package a step needs, how to tell it is there, and why.
struct Requirement {
    package: &'static str,
    present: fn() -> bool,
    why: &'static str,
}

/// `make`, which builds jemalloc, the CLI's allocator: the demo needs it.
const MAKE: Requirement = Requirement {
    package: "make",
    present: || on_path("make"),
    why: "builds jemalloc (tikv-jemalloc-sys), the CLI's allocator",
};

/// Everything `cargo xtask test` starts.
const FOR_TESTS: &[Requirement] = &[
    MAKE,
    Requirement {
        package: "postgresql",
        present: || {
            std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
                versions
                    .flatten()
                    .any(|v| v.path().join("bin/initdb").is_file())
            })
        },
        why: "the private Postgres clusters of the store and replica tests (tests/src/postgres.rs)",
    },
    Requirement {
        package: "haproxy",
        present: || on_path("haproxy") || Path::new("/usr/sbin/haproxy").is_file(),
        why: "the load balancer in front of the replicas of tests/mcp/test_replicas.py",
    },
    Requirement {
        package: "docker-registry",
        present: || Path::new("/usr/bin/docker-registry").is_file(),
        why: "the OCI registry of tests/all/oci.rs (tests/src/registry.rs)",
    },
    Requirement {
        package: "kubectl",
        present: || on_path("kubectl"),
        why: "`kubectl kustomize` renders deploy/kubernetes for the deploy step",
    },
];

/// Where Debian's postgresql-common reads whether to make (and start) its
/// own `main` cluster: the tests run clusters of their own instead.
const CREATE_CLUSTER_CONF: &str = "/etc/postgresql-common/createcluster.d/toolhost-tests.conf";

/// Installs what `cargo xtask test` needs and is missing.
pub(crate) fn ensure_for_tests() -> Result<()> {
    ensure(FOR_TESTS)
}

/// Installs what building the CLI needs and is missing.
pub(crate) fn ensure_for_build() -> Result<()> {
    ensure(&[MAKE])
}

fn ensure(requirements: &[Requirement]) -> Result<()> {
    let missing: Vec<&Requirement> = requirements.iter().filter(|r| !(r.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let as_root = Privilege::find(&missing)?;
    eprintln!("installing what the tests need and this machine lacks ({as_root}):");
    for requirement in &missing {
        eprintln!("  {}: {}", requirement.package, requirement.why);
    }
    if missing.iter().any(|r| r.package == "postgresql") {
        // Before the package: it reads this when it is installed.
        as_root
            .run(Command::new("mkdir").args(["-p", "/etc/postgresql-common/createcluster.d"]))?;
        as_root.run(Command::new("sh").arg("-c").arg(format!(
            "echo 'create_main_cluster = false' > {CREATE_CLUSTER_CONF}"
        )))?;
    }
    as_root.run(Command::new("apt-get").args(["update", "-qq"]))?;
    // kubectl alone: where no apt source has it, the rest still installs.
    let (kubectl, rest): (Vec<&Requirement>, Vec<&Requirement>) =
        missing.iter().partition(|r| r.package == "kubectl");
    if !rest.is_empty() {
        as_root.run(&mut apt_install(&rest))?;
    }
    if !kubectl.is_empty() && as_root.run(&mut apt_install(&kubectl)).is_err() {
        bail!(
            "kubectl is missing and no apt source here has it (Debian's own `kubernetes-client` is too old): see docs/deploy.md#checking-the-manifests"
        );
    }
    let still: Vec<&str> = missing
        .iter()
        .filter(|r| !(r.present)())
        .map(|r| r.package)
        .collect();
    if !still.is_empty() {
        bail!("apt-get ran, but {} still missing", still.join(", "));
    }
    Ok(())
}

fn apt_install(requirements: &[&Requirement]) -> Command {
    let mut install = Command::new("apt-get");
    install.args(["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(requirements.iter().map(|r| r.package));
    install.env("DEBIAN_FRONTEND", "noninteractive");
    install
}

/// How packages are installed: this process is root, or `sudo` runs
/// without asking for a password.
enum Privilege {
    Root,
    Sudo,
}

impl std::fmt::Display for Privilege {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Privilege::Root => "apt-get, as root",
            Privilege::Sudo => "apt-get, through sudo",
        })
    }
}

impl Privilege {
    fn find(missing: &[&Requirement]) -> Result<Privilege> {
        if is_root() {
            return Ok(Privilege::Root);
        }
        let sudo = Command::new("sudo")
            .args(["-n", "true"])
            .status()
            .is_ok_and(|s| s.success());
        if sudo {
            return Ok(Privilege::Sudo);
        }
        let packages: Vec<&str> = missing.iter().map(|r| r.package).collect();
        bail!(
            "this machine lacks {} and this user cannot install them (not root, no password-less sudo): run `sudo apt-get install --no-install-recommends {}` and retry",
            packages.join(", "),
            packages.join(" ")
        )
    }

    fn run(&self, command: &mut Command) -> Result<()> {
        match self {
            Privilege::Root => run_step(command),
            Privilege::Sudo => {
                let mut sudo = Command::new("sudo");
                sudo.arg("-n").arg("--preserve-env=DEBIAN_FRONTEND");
                sudo.arg(command.get_program()).args(command.get_args());
                for (key, value) in command.get_envs() {
                    if let Some(value) = value {
                        sudo.env(key, value);
                    }
                }
                run_step(&mut sudo)
            }
        }
        .context("installing the packages the tests need")
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(unix)]
fn is_root() -> bool {
    // `id -u` rather than a libc call: xtask has no libc dependency.
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

#[cfg(not(unix))]
fn is_root() -> bool {
    false
}
