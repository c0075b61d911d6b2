//! Step 0: claim the call's ids in the store (R38). Ids with a recorded
//! outcome replay it without running anything; ids another settle runs
//! now (here or on another replica) are waited for, bounded by that
//! settle's lease, so the same call never runs twice at once. Ids minted
//! for the call cannot be held by anyone: while the store answers, such a
//! call runs unclaimed and its outcome is its one write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::call::Call;
use crate::model::outcome::{ErrorKind, FaultKind, Interruption, Outcome, Settlement};
use crate::registry::snapshot::CapturedTools;
use crate::settle::pipeline::Pipeline;
use crate::store::{Claim, IdConflict, InputDigest, Store, StoreError};

/// A claim holds the ids this much longer than the call may run, for the
/// steps after the tool returns (bounding, hooks, the record).
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// The first pause before looking again at ids another settle runs; each
/// pause doubles, up to [`MAX_CLAIM_POLL`].
const FIRST_CLAIM_POLL: Duration = Duration::from_millis(20);

/// The longest pause between looks at ids another settle runs.
const MAX_CLAIM_POLL: Duration = Duration::from_secs(1);

/// What the claim decided.
pub(super) enum Claimed {
    /// Run the call; its outcome is recorded under the claim.
    Run,
    /// Run the call unclaimed; its outcome is recorded as a new row.
    RunUnclaimed,
    /// Return this recorded settlement; nothing runs.
    Replay(Box<Settlement>),
}

/// Claims `call`'s ids (for its input, digested as `input`), waiting
/// while another settle holds them.
pub(super) async fn claim(
    store: &Arc<dyn Store>,
    pipeline: &Pipeline,
    tools: &CapturedTools,
    call: &Call,
    input: &InputDigest,
) -> Result<Claimed, Outcome> {
    if call.is_minted() && store.runs_unclaimed() {
        return Ok(Claimed::RunUnclaimed);
    }
    let lease = lease(pipeline, tools, call);
    // The other settle's claim runs out within one lease: then the ids are
    // free, or taken over by this settle.
    let give_up = Instant::now() + lease + LEASE_MARGIN;
    let mut pause = FIRST_CLAIM_POLL;
    loop {
        match store.claim(&call.context, &call.tool, input, lease).await {
            Ok(Claim::Claimed) => return Ok(Claimed::Run),
            Ok(Claim::Replay(settlement)) => return Ok(Claimed::Replay(settlement)),
            Ok(Claim::Conflict(conflict)) => return Err(reused(call, conflict)),
            Ok(Claim::Running { .. }) if Instant::now() < give_up => {}
            Ok(Claim::Running { .. }) => return Err(still_running(call)),
            Err(e) => return Err(store_fault(&call.tool, "claim the call's ids", &e)),
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = call.cancel.cancelled() => {
                return Err(Outcome::Interrupted { reason: Interruption::Cancelled });
            }
        }
        pause = (pause * 2).min(MAX_CLAIM_POLL);
    }
}

/// How long this settle may hold the ids: the call's timeout and a margin.
fn lease(pipeline: &Pipeline, tools: &CapturedTools, call: &Call) -> Duration {
    let budget = tools
        .tools
        .get(&call.tool)
        .and_then(|tool| tool.budget())
        .unwrap_or(pipeline.budget)
        .with(&call.overrides);
    budget.timeout + LEASE_MARGIN
}

fn still_running(call: &Call) -> Outcome {
    Outcome::fault(
        FaultKind::Store,
        format!(
            "call `{}` of message `{}` is still running in another settle after its lease; \
             retry later, or give the new call ids of its own",
            call.context.call_id, call.context.message_id
        ),
    )
}

/// The client's error of giving a call ids another call holds: nothing
/// runs and nothing is replayed. Another caller's call is not described.
fn reused(call: &Call, conflict: IdConflict) -> Outcome {
    let ids = &call.context;
    let which = match conflict {
        IdConflict::Caller => "another caller's call".to_owned(),
        IdConflict::Tool => "a call of another tool".to_owned(),
        IdConflict::Input => format!("a call of `{}` with other arguments", call.tool),
    };
    Outcome::error(
        ErrorKind::IdsReused,
        format!(
            "call `{}` of message `{}` in session `{}` already names {which}; ids name one call: give this call ids of its own",
            ids.call_id, ids.message_id, ids.session_id
        ),
    )
}

/// An operational failure naming the store and what it could not do.
pub(super) fn store_fault(tool: &str, doing: &str, e: &StoreError) -> Outcome {
    Outcome::fault(
        FaultKind::Store,
        format!("tool `{tool}`: could not {doing}: {e}; check that the store is reachable"),
    )
}
