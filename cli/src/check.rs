//! `toolhost check PLUGIN...`: load, activate, validate, run samples.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use toolhost::{Call, CallContext, Host, Outcome};

use crate::common::{Common, Spec, specs};
use crate::{Failure, exit, stdio, terminal};

/// The largest samples file `check` reads: a few calls, never data.
const MAX_SAMPLES_BYTES: u64 = 1024 * 1024;

/// A samples file: `[[sample]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Samples {
    sample: Vec<Sample>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    name: String,
    tool: String,
    #[serde(default)]
    input: Option<toml::Table>,
    status: Status,
    output: Option<toml::Value>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Status {
    Completed,
    Error,
    Interrupted,
    Defect,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Error => "error",
            Status::Interrupted => "interrupted",
            Status::Defect => "defect",
        }
    }
}

pub(crate) async fn run(plugins: &[PathBuf], common: &Common) -> Result<u8, Failure> {
    let host = common.host(None, true)?;
    let mut failed = 0usize;
    let mut passed = 0usize;
    for spec in specs(plugins, common)? {
        match check_one(&host, &spec, common).await {
            Ok((p, f)) => {
                passed += p;
                failed += f;
            }
            Err(e) => {
                failed += 1;
                report(&format!("FAIL {}: {e}", spec.path.display()))?;
            }
        }
    }
    report(&format!("{passed} passed, {failed} failed"))?;
    Ok(if failed == 0 {
        exit::COMPLETED
    } else {
        exit::TOOL_ERROR
    })
}

async fn check_one(host: &Host, spec: &Spec, common: &Common) -> anyhow::Result<(usize, usize)> {
    // A location of its own per plugin, so plugins do not shadow each other.
    let location = host.location(spec.path.clone());
    let activation = location.load(&spec.path, &spec.options).await?;
    let name = activation.plugin().info().name.clone();
    let snapshot = location.snapshot();
    report(&format!(
        "ok   {name}: activated; tools with valid schemas: {}",
        snapshot
            .definitions()
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))?;
    let Some(samples_path) = &spec.samples else {
        report(&format!(
            "note {name}: no samples file; add `samples = \"samples.toml\"` to its manifest"
        ))?;
        return Ok((1, 0));
    };
    let samples = read_samples(samples_path)?;
    let (mut passed, mut failed) = (1, 0);
    for (i, sample) in samples.sample.into_iter().enumerate() {
        let input = Value::Object(
            sample
                .input
                .clone()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default(),
        );
        let context = CallContext {
            session_id: "check".into(),
            agent: "toolhost-check".into(),
            message_id: "check".into(),
            call_id: format!("sample-{i}"),
        };
        let call =
            Call::new(&sample.tool, input.to_string(), context).with_overrides(common.overrides());
        let settlement = snapshot.settle(call).await;
        match verdict(&sample, &settlement.outcome) {
            Ok(()) => {
                passed += 1;
                report(&format!("ok   {name}: {}", sample.name))?;
            }
            Err(why) => {
                failed += 1;
                report(&format!("FAIL {name}: {}: {why}", sample.name))?;
            }
        }
    }
    Ok((passed, failed))
}

fn read_samples(path: &Path) -> anyhow::Result<Samples> {
    let text = read_bounded(path)
        .map_err(|e| anyhow::anyhow!("cannot read samples {}: {e}", path.display()))?;
    toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("invalid samples file {}: {e}", path.display()))
}

/// Reads a regular file of at most [`MAX_SAMPLES_BYTES`]. Opened without
/// blocking, so a FIFO in its place cannot stall the CLI (R31).
fn read_bounded(path: &Path) -> anyhow::Result<String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        anyhow::bail!("it is not a regular file");
    }
    let mut text = String::new();
    file.take(MAX_SAMPLES_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SAMPLES_BYTES {
        anyhow::bail!(
            "it is larger than {} KiB; a samples file lists a few calls",
            MAX_SAMPLES_BYTES / 1024
        );
    }
    Ok(text)
}

/// One line of the report on stdout; it can carry guest text (R30).
fn report(line: &str) -> anyhow::Result<()> {
    stdio::line(&terminal::text(line))
}

fn verdict(sample: &Sample, outcome: &Outcome) -> Result<(), String> {
    let got = outcome.status();
    if got != sample.status.name() {
        let detail = match outcome {
            Outcome::Error { message, .. } | Outcome::Defect { message, .. } => {
                format!(": {message}")
            }
            Outcome::Interrupted { reason } => format!(": {reason}"),
            _ => String::new(),
        };
        return Err(format!(
            "expected status {}, got {got}{detail}",
            sample.status.name()
        ));
    }
    if let (Some(expected), Outcome::Completed(c)) = (&sample.output, outcome) {
        let expected = serde_json::to_value(expected).map_err(|e| e.to_string())?;
        if c.output.as_ref() != Some(&expected) {
            return Err(format!(
                "expected output {expected}, got {}",
                c.output
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), Value::to_string)
            ));
        }
    }
    Ok(())
}
