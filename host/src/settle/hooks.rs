//! Step 7: after-hooks (R18). Each hook sees the bounded outcome and may
//! change it; the result is normalized and bounded again, and a hook that
//! leaves invalid content is named as the culprit of an operational fault.

use serde_json::Value;

use crate::model::hook::HookCall;
use crate::model::outcome::{FaultKind, Outcome, Settlement};
use crate::registry::snapshot::CapturedTools;
use crate::settle::bound::{self, Retainer};
use crate::settle::content::check;
use crate::settle::metadata::check_metadata;

pub(super) async fn run(
    retainer: &Retainer<'_>,
    tools: &CapturedTools,
    settlement: &mut Settlement,
) {
    let pipeline = retainer.pipeline;
    let bounds = tools
        .tools
        .get(&settlement.tool)
        .and_then(|t| t.bounds())
        .unwrap_or(pipeline.bounds);
    for hook in &pipeline.hooks {
        let call = HookCall {
            context: &settlement.context,
            tool: &settlement.tool,
        };
        hook.after(&call, &mut settlement.outcome);
        let Outcome::Completed(completed) = &mut settlement.outcome else {
            continue;
        };
        let metadata = completed.metadata.take().map(Value::Object);
        completed.metadata = check_metadata(metadata, &mut settlement.warnings);
        let checked = check(completed).map_err(|problem| {
            Outcome::fault(
                FaultKind::Hook,
                format!(
                    "after-hook {} left invalid content for tool `{}`: {problem}",
                    hook.name(),
                    settlement.tool
                ),
            )
        });
        let bounded = match checked {
            Ok(()) => bound::bound(retainer, completed, &bounds).await,
            Err(failed) => Err(failed),
        };
        if let Err(failed) = bounded {
            settlement.outcome = failed;
        }
    }
}
