//! Step 3: run the tool under its budget (R20-R24) and sort how it ended:
//! a response goes on to be checked; everything else ends the call here.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::model::call::Call;
use crate::model::content::ToolResponse;
use crate::model::event::{CallEvents, EventSink};
use crate::model::execution::{Ended, Invocation};
use crate::model::outcome::{Culprit, Defect, DefectKind, ErrorKind, Outcome};
use crate::model::text::{MAX_MESSAGE_BYTES, truncate};
use crate::model::tool::Tool;
use crate::settle::metadata::check_metadata;
use crate::settle::pipeline::{MAX_PARTIAL_BYTES, Pipeline, Record};
use crate::store::{EventsToStore, Store};

pub(super) async fn execute(
    pipeline: &Pipeline,
    store: Option<&Arc<dyn Store>>,
    tool: &Tool,
    call: &Call,
    input: Value,
    started: Instant,
    record: &mut Record,
) -> Result<ToolResponse, Outcome> {
    let bounds = tool.bounds().unwrap_or(pipeline.bounds);
    let budget = tool
        .budget()
        .unwrap_or(pipeline.budget)
        .with(&call.overrides);
    let progress = CallEvents::new(
        call.context.clone(),
        call.tool.clone(),
        pipeline.sink.clone(),
        store.map(|s| Arc::new(EventsToStore(s.clone())) as Arc<dyn EventSink>),
        call.events.clone(),
    );
    let execution = tool
        .executor()
        .execute(Invocation {
            tool_name: &call.tool,
            input,
            input_text: &call.input,
            context: &call.context,
            progress: progress.clone(),
            budget,
            max_machine_output: bounds.max_machine_output,
            started,
            deadline: started + budget.timeout,
            cancel: &call.cancel,
            approver: call.approver.clone(),
        })
        .await;
    let (last_progress, progress_warnings) = progress.finish();
    record.usage = execution.usage;
    record.logs = execution.logs;
    record.warnings.extend(execution.warnings);
    record.warnings.extend(progress_warnings);
    match execution.ended {
        Ended::Response(response) => Ok(response),
        Ended::ToolFailure(failure) => Err(Outcome::Error {
            message: truncate(failure.message, MAX_MESSAGE_BYTES),
            kind: ErrorKind::ToolFailure,
            partial: bound_partial(last_progress, &mut record.warnings),
            metadata: check_metadata(failure.metadata, &mut record.warnings),
        }),
        Ended::Interrupted(reason) => Err(Outcome::Interrupted { reason }),
        Ended::Defect(kind) => {
            let defect = defect(tool, &call.tool, kind);
            Err(Outcome::defect(Culprit::Guest(Box::new(defect))))
        }
        Ended::HostFault(fault) => Err(Outcome::defect(Culprit::Host(fault))),
    }
}

/// A defect with its plugin, version and tool named.
pub(super) fn defect(tool: &Tool, name: &str, kind: DefectKind) -> Defect {
    let (plugin, version) = match tool.plugin() {
        Some(info) => (info.name.clone(), info.version.clone()),
        None => ("native".to_owned(), env!("CARGO_PKG_VERSION").to_owned()),
    };
    Defect {
        plugin,
        version,
        tool: name.to_owned(),
        kind,
    }
}

/// The last progress update, kept as the error's partial snapshot when it
/// is small enough (R19).
fn bound_partial(partial: Option<Value>, warnings: &mut Vec<String>) -> Option<Value> {
    let partial = partial?;
    let size = serde_json::to_vec(&partial).map_or(usize::MAX, |v| v.len());
    if size <= MAX_PARTIAL_BYTES {
        Some(partial)
    } else {
        warnings.push(format!(
            "partial progress dropped: {size} bytes exceeds the {MAX_PARTIAL_BYTES}-byte limit"
        ));
        None
    }
}
