//! Step 5: normalize content (R15) and metadata (R17). Given content is
//! kept; omitted content is derived once from the output; the result must
//! not be empty, and media must fit its limit.

use serde_json::Value;

use crate::model::content::{ContentPart, ToolResponse};
use crate::model::outcome::{Completed, Culprit, DefectKind, Outcome};
use crate::model::tool::Tool;
use crate::settle::execute::defect;
use crate::settle::metadata::check_metadata;

/// The largest media part a tool may return; media is never cut, so larger
/// parts are rejected.
pub const MAX_MEDIA_BYTES: usize = 5 << 20;

/// The most media one result may carry, all parts together (R28).
pub const MAX_RESULT_MEDIA_BYTES: usize = 10 << 20;

pub(super) fn normalize(
    tool: &Tool,
    name: &str,
    response: ToolResponse,
    warnings: &mut Vec<String>,
) -> Result<Completed, Outcome> {
    let guest_defect = |problem: String| {
        Outcome::defect(Culprit::Guest(Box::new(defect(
            tool,
            name,
            DefectKind::Contract(problem),
        ))))
    };
    let ToolResponse {
        output,
        content,
        metadata,
    } = response;
    let content = match (content, &output) {
        (Some(parts), _) => parts,
        (None, Some(Value::String(s))) => vec![ContentPart::text(s.clone())],
        (None, Some(other)) => vec![ContentPart::text(other.to_string())],
        (None, None) => return Err(guest_defect("returned neither content nor output".into())),
    };
    let completed = Completed {
        content,
        metadata: check_metadata(metadata, warnings),
        output,
        retained: Vec::new(),
    };
    check(&completed).map_err(guest_defect)?;
    Ok(completed)
}

/// Content must be non-empty and media within [`MAX_MEDIA_BYTES`] per part
/// and [`MAX_RESULT_MEDIA_BYTES`] in all; the problem, if not.
pub(super) fn check(completed: &Completed) -> Result<(), String> {
    if completed.content.is_empty() {
        return Err("returned empty content".into());
    }
    let mut total = 0;
    for part in &completed.content {
        let ContentPart::Media { data, .. } = part else {
            continue;
        };
        if data.len() > MAX_MEDIA_BYTES {
            return Err(format!(
                "returned a media part of {} bytes; the limit is {MAX_MEDIA_BYTES}",
                data.len()
            ));
        }
        total += data.len();
    }
    if total > MAX_RESULT_MEDIA_BYTES {
        return Err(format!(
            "returned {total} bytes of media in one result; the limit is {MAX_RESULT_MEDIA_BYTES}"
        ));
    }
    Ok(())
}
