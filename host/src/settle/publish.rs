//! Step 8: record the outcome in the store (R38), under the call's claim
//! or as the one write of a call that ran unclaimed, then publish it to
//! the event sink, waiting until each is durable (R19).
//! A store or sink that cannot record it turns the settlement into an
//! operational fault naming it: an unrecorded outcome is not settled.

use std::sync::Arc;

use crate::model::outcome::{FaultKind, Outcome, Settlement};
use crate::settle::claim::store_fault;
use crate::settle::pipeline::Pipeline;
use crate::store::{InputDigest, Store};

/// Records the outcome under the call's claim, or, for a call that ran
/// unclaimed (its input's digest given), as the call's one write.
pub(super) async fn record(
    store: &Arc<dyn Store>,
    settlement: &mut Settlement,
    unclaimed: Option<&InputDigest>,
) {
    let recorded = match unclaimed {
        Some(input) => store.record_unclaimed(settlement, input).await,
        None => store.record(settlement).await,
    };
    if let Err(e) = recorded {
        let doing = "record its outcome (the tool ran, but its outcome is not durable)";
        settlement.outcome = store_fault(&settlement.tool, doing, &e);
    }
}

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
