//! Settlement: the one execution boundary (R10, R11, R13-R19), a sequence of
//! small steps in the order of the tool contract — resolve the captured
//! tool, decode the input, execute, check the output, normalize content,
//! bound it, run after-hooks, publish the outcome. Each step returns
//! `Result<_, Outcome>`: an `Err` is how the call ends.

mod bound;
pub(crate) mod content;
mod execute;
mod hooks;
mod input;
pub(crate) mod metadata;
mod output;
pub(crate) mod pipeline;
mod publish;
mod resolve;

use std::time::Instant;

use crate::model::call::Call;
use crate::model::outcome::{Completed, Outcome, Settlement};
use crate::registry::snapshot::CapturedTools;
use crate::settle::pipeline::{Pipeline, Record};

/// Settles one call against captured tools; never fails as a whole: every
/// way a call can end is an [`Outcome`], published to the sink before this
/// returns.
pub(crate) async fn settle(pipeline: &Pipeline, tools: &CapturedTools, call: Call) -> Settlement {
    let started = Instant::now();
    let mut record = Record::default();
    let outcome = match run(pipeline, tools, &call, started, &mut record).await {
        Ok(completed) => Outcome::Completed(completed),
        Err(outcome) => outcome,
    };
    let mut settlement = Settlement {
        context: call.context,
        tool: call.tool,
        outcome,
        usage: record.usage,
        warnings: record.warnings,
        logs: record.logs,
    };
    hooks::run(pipeline, tools, &mut settlement);
    publish::publish(pipeline, &mut settlement).await;
    settlement
}

/// The steps up to a bounded, completed result.
async fn run(
    pipeline: &Pipeline,
    tools: &CapturedTools,
    call: &Call,
    started: Instant,
    record: &mut Record,
) -> Result<Completed, Outcome> {
    let tool = resolve::resolve(tools, &call.tool)?;
    let input = input::decode(tool, call)?;
    let response = execute::execute(pipeline, tool, call, input, started, record).await?;
    let bounds = tool.bounds().unwrap_or(pipeline.bounds);
    let output = response.output.as_ref();
    output::check_size(tool, &call.tool, output, bounds.max_machine_output)?;
    output::check(tool, &call.tool, output)?;
    let mut completed = content::normalize(tool, &call.tool, response, &mut record.warnings)?;
    bound::bound(pipeline, &mut completed, &bounds)?;
    Ok(completed)
}
