//! Serialization shared by responses, errors and progress.

use serde::Serialize;
use serde_json::Value;

/// Serialize a value the tool handed us. Failing here means the plugin's own
/// type cannot be represented as JSON, which is a bug in the plugin, not a
/// failure the model could fix, so it panics (the host reports a defect).
#[track_caller]
pub(crate) fn to_value(value: &impl Serialize, what: &str) -> Value {
    // A `match`, not a closure, so `#[track_caller]` blames the plugin's line.
    match serde_json::to_value(value) {
        Ok(value) => value,
        Err(error) => panic!("toolhost-sdk: {what} cannot be serialized as JSON: {error}"),
    }
}
