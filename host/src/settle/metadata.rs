//! Metadata for tool-specific UI (R17): a small JSON object, or dropped with
//! a warning; the call still succeeds.

use serde_json::{Map, Value};

/// The largest metadata object kept, serialized (R17).
pub const MAX_METADATA_BYTES: usize = 16 << 10;

/// Metadata must be a JSON object of at most [`MAX_METADATA_BYTES`];
/// otherwise it is dropped with a warning and the call still succeeds (R17).
pub(crate) fn check_metadata(
    metadata: Option<Value>,
    warnings: &mut Vec<String>,
) -> Option<Map<String, Value>> {
    match metadata? {
        Value::Object(map) => {
            let size = serde_json::to_vec(&map).map_or(usize::MAX, |v| v.len());
            if size <= MAX_METADATA_BYTES {
                Some(map)
            } else {
                warnings.push(format!(
                    "metadata dropped: {size} bytes exceeds the {MAX_METADATA_BYTES}-byte limit"
                ));
                None
            }
        }
        other => {
            warnings.push(format!(
                "metadata dropped: it must be a JSON object, not {}",
                json_kind(&other)
            ));
            None
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
