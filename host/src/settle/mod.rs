//! Settlement: the one execution boundary (R10, R11, R13-R19), a sequence of
//! small steps in the order of the tool contract — resolve the captured
//! tool, decode the input, execute, check the output, normalize content,
//! bound it, run after-hooks, publish the outcome. Each step returns
//! `Result<_, Outcome>`: an `Err` is how the call ends.

mod bound;
mod claim;
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
use crate::settle::bound::Retainer;
use crate::settle::claim::{Claimed, store_fault};
use crate::settle::pipeline::{Pipeline, Record};
use crate::store::InputDigest;

/// Settles one call against captured tools; never fails as a whole: every
/// way a call can end is an [`Outcome`], recorded in the store and
/// published to the sink before this returns. Ids the store has an outcome
/// for replay it, and nothing runs.
pub(crate) async fn settle(pipeline: &Pipeline, tools: &CapturedTools, call: Call) -> Settlement {
    let store = match pipeline.store.get().await {
        Ok(store) => store.cloned(),
        Err(e) => {
            let outcome = store_fault(&call.tool, "open the store", &e);
            return ended(pipeline, call, outcome).await;
        }
    };
    let input = InputDigest::of(&call.input);
    let unclaimed = match &store {
        Some(store) => match claim::claim(store, pipeline, tools, &call, &input).await {
            Ok(Claimed::Run) => false,
            Ok(Claimed::RunUnclaimed) => true,
            Ok(Claimed::Replay(mut settlement)) => {
                settlement.replayed = true;
                return *settlement;
            }
            Err(outcome) => return ended(pipeline, call, outcome).await,
        },
        None => false,
    };
    let scope = call.output_scope().to_owned();
    let retainer = Retainer {
        pipeline,
        store: store.as_ref(),
        scope: &scope,
    };
    let started = Instant::now();
    let mut record = Record::default();
    let outcome = match run(&retainer, tools, &call, started, &mut record).await {
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
        replayed: false,
    };
    hooks::run(&retainer, tools, &mut settlement).await;
    if let Some(store) = &store {
        let unclaimed = unclaimed.then_some(&input);
        publish::record(store, &mut settlement, unclaimed).await;
    }
    publish::publish(pipeline, &mut settlement).await;
    settlement
}

/// A call that ended before it ran (the store failed, or it was cancelled
/// while waiting for its ids): published to the sink, not recorded.
async fn ended(pipeline: &Pipeline, call: Call, outcome: Outcome) -> Settlement {
    let mut settlement = Settlement {
        context: call.context,
        tool: call.tool,
        outcome,
        usage: Default::default(),
        warnings: Vec::new(),
        logs: Default::default(),
        replayed: false,
    };
    publish::publish(pipeline, &mut settlement).await;
    settlement
}

/// The steps up to a bounded, completed result.
async fn run(
    retainer: &Retainer<'_>,
    tools: &CapturedTools,
    call: &Call,
    started: Instant,
    record: &mut Record,
) -> Result<Completed, Outcome> {
    let pipeline = retainer.pipeline;
    let tool = resolve::resolve(tools, &call.tool)?;
    let input = input::decode(tool, call)?;
    let response =
        execute::execute(pipeline, retainer.store, tool, call, input, started, record).await?;
    let bounds = tool.bounds().unwrap_or(pipeline.bounds);
    let output = response.output.as_ref();
    output::check_size(tool, &call.tool, output, bounds.max_machine_output)?;
    output::check(tool, &call.tool, output)?;
    let mut completed = content::normalize(tool, &call.tool, response, &mut record.warnings)?;
    bound::bound(retainer, &mut completed, &bounds).await?;
    Ok(completed)
}
