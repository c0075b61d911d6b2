//! Step 4: a tool with an output schema must return output that validates;
//! invalid output never yields success (R14).

use serde_json::Value;

use crate::model::outcome::{ErrorKind, Outcome};
use crate::model::tool::Tool;
use crate::settle::input::list;

pub(super) fn check(tool: &Tool, name: &str, output: Option<&Value>) -> Result<(), Outcome> {
    let Some(schema) = tool.output_schema() else {
        return Ok(());
    };
    let Some(value) = output else {
        return Err(Outcome::error(
            ErrorKind::InvalidOutput,
            format!(
                "Tool `{name}` returned no output, but it declares an output schema. The tool is at fault; do not retry with the same arguments."
            ),
        ));
    };
    let violations = schema.violations(value);
    if violations.is_empty() {
        return Ok(());
    }
    Err(Outcome::error(
        ErrorKind::InvalidOutput,
        format!(
            "Tool `{name}` returned output that does not match its output schema:\n{}\nThe tool is at fault; do not retry with the same arguments.",
            list(&violations)
        ),
    ))
}
