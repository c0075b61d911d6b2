//! Step 1: the captured tool the call names (R10, R11). Each rejection is
//! per call: it never affects another.

use crate::model::outcome::{ErrorKind, FINAL_STEP_MESSAGE, Outcome};
use crate::model::tool::Tool;
use crate::registry::snapshot::CapturedTools;

pub(super) fn resolve<'a>(tools: &'a CapturedTools, name: &str) -> Result<&'a Tool, Outcome> {
    if tools.final_step {
        return Err(Outcome::error(
            ErrorKind::Disabled,
            FINAL_STEP_MESSAGE.into(),
        ));
    }
    tools
        .tools
        .get(name)
        .ok_or_else(|| Outcome::error(ErrorKind::UnknownTool, format!("Unknown tool: {name}")))
}
