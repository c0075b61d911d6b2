//! Step 8: publish the outcome to the event sink and wait until it is
//! durable (R19). A sink that cannot record it turns the settlement into an
//! operational fault naming the sink: an unrecorded outcome is not settled.

use crate::model::outcome::{FaultKind, Outcome, Settlement};
use crate::settle::pipeline::Pipeline;

pub(super) async fn publish(pipeline: &Pipeline, settlement: &mut Settlement) {
    let Some(sink) = &pipeline.sink else {
        return;
    };
    if let Err(e) = sink.outcome(settlement).await {
        settlement.outcome = Outcome::fault(
            FaultKind::Sink,
            format!(
                "the outcome of tool `{}` could not be recorded by the event sink: {e}; the tool ran, but its outcome is not durable",
                settlement.tool
            ),
        );
    }
}
