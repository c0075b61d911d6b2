//! Step 2: decode the raw arguments and validate them against the input
//! schema (R13). The tool never runs on bad input.

use serde_json::Value;

use crate::model::call::Call;
use crate::model::outcome::{ErrorKind, Outcome};
use crate::model::tool::Tool;

/// How much of the given arguments an input error quotes back.
const MAX_QUOTED_ARGUMENTS: usize = 2_000;

pub(super) fn decode(tool: &Tool, call: &Call) -> Result<Value, Outcome> {
    let input: Value = serde_json::from_str(&call.input).map_err(|e| {
        Outcome::error(
            ErrorKind::MalformedInput,
            format!(
                "The arguments for tool `{}` are not valid JSON: {e}.\nArguments given: {}\nSend the arguments as one JSON object and call the tool again.",
                call.tool,
                quote(&call.input)
            ),
        )
    })?;
    let violations = tool.input_schema().violations(&input);
    if violations.is_empty() {
        return Ok(input);
    }
    Err(Outcome::error(
        ErrorKind::InvalidInput,
        format!(
            "The arguments for tool `{}` do not match its input schema:\n{}\nArguments given: {}\nCorrect the arguments and call the tool again.",
            call.tool,
            violations,
            quote(&call.input)
        ),
    ))
}

fn quote(input: &str) -> String {
    if input.len() <= MAX_QUOTED_ARGUMENTS {
        return input.to_owned();
    }
    let mut end = MAX_QUOTED_ARGUMENTS;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &input[..end], input.len())
}
