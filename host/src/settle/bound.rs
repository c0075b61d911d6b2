//! Step 6: bound the text that reaches the model (R16). Over the limit, the
//! full text is retained first, then replaced by head + marker + tail; if
//! retention fails the call fails operationally: never a lossy success.

use crate::model::budget::OutputBounds;
use crate::model::content::ContentPart;
use crate::model::outcome::{Completed, FaultKind, Outcome};
use crate::output::bound::{preview, within};
use crate::settle::pipeline::Pipeline;

pub(super) fn bound(
    pipeline: &Pipeline,
    completed: &mut Completed,
    bounds: &OutputBounds,
) -> Result<(), Outcome> {
    for part in &mut completed.content {
        let ContentPart::Text { text } = part else {
            continue;
        };
        if within(text, bounds) {
            continue;
        }
        let store = pipeline.outputs.as_ref().map_err(|e| {
            Outcome::fault(
                FaultKind::Retention,
                format!("cannot retain oversized output: {e}"),
            )
        })?;
        let retained = store.retain(text).map_err(|e| {
            Outcome::fault(
                FaultKind::Retention,
                format!(
                    "cannot retain oversized output in {}: {e}; check that the output directory is writable",
                    store.path().display()
                ),
            )
        })?;
        *text = preview(text, bounds, &retained.reference);
        completed.retained.push(retained);
    }
    Ok(())
}
