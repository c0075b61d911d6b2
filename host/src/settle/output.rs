//! Step 4: the machine output must fit its cap (R28), and a tool with an
//! output schema must return output that validates; invalid output never
//! yields success (R14).

use std::io;

use serde_json::Value;

use crate::model::outcome::{Culprit, DefectKind, ErrorKind, Outcome};
use crate::model::tool::Tool;
use crate::settle::execute::defect;

/// Refuses a machine output whose JSON text is over `max` bytes, counting
/// without building the text.
pub(super) fn check_size(
    tool: &Tool,
    name: &str,
    output: Option<&Value>,
    max: usize,
) -> Result<(), Outcome> {
    let Some(value) = output else {
        return Ok(());
    };
    let mut counter = Counter { bytes: 0, max };
    if serde_json::to_writer(&mut counter, value).is_ok() {
        return Ok(());
    }
    let kind = DefectKind::machine_output_too_large(counter.bytes, max);
    Err(Outcome::defect(Culprit::Guest(Box::new(defect(
        tool, name, kind,
    )))))
}

/// Counts bytes written, failing once past `max`.
struct Counter {
    bytes: usize,
    max: usize,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len();
        if self.bytes > self.max {
            return Err(io::Error::other("over the cap"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

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
            violations
        ),
    ))
}
