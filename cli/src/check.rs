//! `toolhost check PLUGIN...`: load, activate, validate, run samples.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;
use serde_json::Value;
#[cfg(feature = "mcp")]
use toolhost::config::McpServerConfig;
use toolhost::outcome::Status;
use toolhost::{Call, CallContext, Host, Outcome, Snapshot};

use crate::common::{Common, Spec, read_bounded, specs};
use crate::junit::{self, Case, Suite};
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

pub(crate) async fn run(
    plugins: &[PathBuf],
    junit: Option<&Path>,
    common: &Common,
) -> Result<u8, Failure> {
    let host = common.host(None, true).await?;
    let mut suites = Vec::new();
    let specs = specs(plugins, common)?;
    for spec in &specs.plugins {
        suites.push(check_one(&host, spec, common).await?);
    }
    // Without MCP, `specs` refused any manifest naming a server.
    #[cfg(feature = "mcp")]
    for server in &specs.servers {
        suites.push(check_server(&host, server).await?);
    }
    let cases: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failed: usize = suites.iter().map(Suite::failures).sum();
    report(&format!("{} passed, {failed} failed", cases - failed))?;
    if let Some(path) = junit {
        junit::write(path, &suites)?;
    }
    Ok(if failed == 0 {
        exit::COMPLETED
    } else {
        exit::TOOL_ERROR
    })
}

/// Checks one plugin: activation (its own location, so plugins do not
/// shadow each other), then each sample. Prints a line per check.
async fn check_one(host: &Host, spec: &Spec, common: &Common) -> anyhow::Result<Suite> {
    let location = host.location(spec.source.label());
    let started = Instant::now();
    let activation = match location.load(&spec.source, &spec.options).await {
        Ok(activation) => activation,
        Err(e) => {
            let name = spec.source.to_string();
            report(&format!("FAIL {name}: {e}"))?;
            let case = case("activate", started, Some(e.to_string()));
            return Ok(Suite {
                name,
                cases: vec![case],
            });
        }
    };
    let name = activation.plugin().info().name.clone();
    let snapshot = location.snapshot();
    let tools: Vec<&str> = snapshot
        .definitions()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    report(&format!(
        "ok   {name}: activated; tools with valid schemas: {}",
        tools.join(", ")
    ))?;
    let mut suite = Suite {
        cases: vec![case("activate", started, None)],
        name,
    };
    let Some(samples_path) = &spec.samples else {
        report(&format!(
            "note {}: no samples file; add `samples = \"samples.toml\"` to its manifest",
            suite.name
        ))?;
        return Ok(suite);
    };
    match read_samples(samples_path) {
        Ok(samples) => run_samples(&snapshot, samples, common, &mut suite).await?,
        Err(e) => {
            report(&format!("FAIL {}: {e}", suite.name))?;
            suite
                .cases
                .push(case("samples", Instant::now(), Some(e.to_string())));
        }
    }
    Ok(suite)
}

/// Checks one MCP server: it connects, and every tool it lists registers
/// (a schema that does not compile fails the check).
#[cfg(feature = "mcp")]
async fn check_server(host: &Host, server: &McpServerConfig) -> anyhow::Result<Suite> {
    let location = host.location(format!("mcp:{}", server.name));
    let started = Instant::now();
    let name = server.name.clone();
    let connection = match toolhost_mcp::McpConnection::connect(&location, server.clone()).await {
        Ok(connection) => connection,
        Err(e) => {
            report(&format!("FAIL {name}: {e}"))?;
            let case = case("connect", started, Some(e.to_string()));
            return Ok(Suite {
                name,
                cases: vec![case],
            });
        }
    };
    let snapshot = location.snapshot();
    let tools: Vec<&str> = snapshot
        .definitions()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    report(&format!(
        "ok   {name}: connected; tools with valid schemas: {}",
        tools.join(", ")
    ))?;
    let mut cases = vec![case("connect", started, None)];
    if !connection.warnings().is_empty() {
        let skipped = connection.warnings().join("\n");
        report(&format!("FAIL {name}: {}", terminal::text(&skipped)))?;
        cases.push(case("tools", Instant::now(), Some(skipped)));
    }
    Ok(Suite { name, cases })
}

async fn run_samples(
    snapshot: &Snapshot,
    samples: Samples,
    common: &Common,
    suite: &mut Suite,
) -> anyhow::Result<()> {
    // Fresh ids each run: the store replays ids it has an outcome for.
    let run = format!("check-{}", uuid::Uuid::new_v4().simple());
    for (i, sample) in samples.sample.into_iter().enumerate() {
        let input = Value::Object(
            sample
                .input
                .clone()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default(),
        );
        let context = CallContext::new(
            run.clone(),
            "toolhost-check",
            "check",
            format!("sample-{i}"),
        );
        let call =
            Call::new(&sample.tool, input.to_string(), context).with_overrides(common.overrides());
        let started = Instant::now();
        let settlement = snapshot.settle(call).await;
        let failure = verdict(&sample, &settlement.outcome).err();
        match &failure {
            None => report(&format!("ok   {}: {}", suite.name, sample.name))?,
            Some(why) => report(&format!("FAIL {}: {}: {why}", suite.name, sample.name))?,
        }
        suite.cases.push(case(&sample.name, started, failure));
    }
    Ok(())
}

fn case(name: &str, started: Instant, failure: Option<String>) -> Case {
    Case {
        name: name.to_owned(),
        time: started.elapsed(),
        failure,
    }
}

fn read_samples(path: &Path) -> anyhow::Result<Samples> {
    let text = read_bounded(path, MAX_SAMPLES_BYTES).map_err(|e| {
        anyhow::anyhow!(
            "cannot read samples {}: {e}; a samples file lists a few calls",
            path.display()
        )
    })?;
    toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("invalid samples file {}: {e}", path.display()))
}

/// One line of the report on stdout; it can carry guest text (R30).
fn report(line: &str) -> anyhow::Result<()> {
    stdio::line(&terminal::text(line))
}

fn verdict(sample: &Sample, outcome: &Outcome) -> Result<(), String> {
    let got = outcome.status();
    if got != sample.status {
        let detail = match outcome {
            Outcome::Error { message, .. } | Outcome::Defect { message, .. } => {
                format!(": {message}")
            }
            Outcome::Interrupted { reason } => format!(": {reason}"),
            _ => String::new(),
        };
        return Err(format!(
            "expected status {}, got {got}{detail}",
            sample.status
        ));
    }
    if let (Some(expected), Outcome::Completed(c)) = (&sample.output, outcome) {
        let expected = serde_json::to_value(expected).map_err(|e| e.to_string())?;
        if !c.output.as_ref().is_some_and(|got| same(got, &expected)) {
            return Err(format!(
                "expected output {}, got {}",
                shown(&expected),
                c.output.as_ref().map_or_else(|| "none".to_owned(), shown)
            ));
        }
    }
    Ok(())
}

/// The most of an output a failed check shows: enough to see the
/// difference, bounded because a tool's output can be megabytes.
const MAX_SHOWN_OUTPUT_BYTES: usize = 2048;

fn shown(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > MAX_SHOWN_OUTPUT_BYTES {
        let mut cut = MAX_SHOWN_OUTPUT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let omitted = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("… ({omitted} more bytes)"));
    }
    text
}

/// Equal as JSON values, numbers by value: `22` and `22.0` are the same
/// output, so one samples file serves builds of a tool in any language.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Integers compare exactly; anything with a fraction compares as `f64`.
fn same_number(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let integer = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (integer(x), integer(y)) {
        (Some(a), Some(b)) => a == b,
        _ => x.as_f64() == y.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value_everywhere_in_a_value() {
        assert!(same(&json!({"c": [22, 1.5]}), &json!({"c": [22.0, 1.5]})));
        assert!(!same(&json!({"c": 22}), &json!({"c": 22.5})));
        assert!(!same(&json!({"c": 22}), &json!({"c": "22"})));
        assert!(!same(&json!([1, 2]), &json!([1, 2, 3])));
        assert!(!same(&json!({"a": 1}), &json!({"b": 1})));
        assert!(same(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!same(&json!(u64::MAX), &json!(u64::MAX - 1)));
    }

    #[test]
    fn shown_output_is_bounded_at_a_character_boundary() {
        let long = Value::String("é".repeat(5000));
        let text = shown(&long);
        assert!(text.len() < MAX_SHOWN_OUTPUT_BYTES + 40, "{}", text.len());
        assert!(text.ends_with("more bytes)"), "{text}");
    }
}
