//! Fields renamed to opencode's names (`path` to `filePath`, `patch` to
//! `patchText`): the old names are accepted as serde aliases for one
//! release. A schema cannot require one of two names without advertising
//! the old one (and clients refuse a top-level `anyOf`), so until the
//! aliases go the renamed field is left out of `required`; a call that
//! gives neither gets serde's "missing field" error, naming the new one.

use toolhost_sdk::prelude::Value;
use toolhost_sdk::schemars::Schema;

/// `filePath` is not required while `path` is its alias.
pub fn file_path(schema: &mut Schema) {
    not_required(schema, "filePath");
}

/// `patchText` is not required while `patch` is its alias.
pub fn patch_text(schema: &mut Schema) {
    not_required(schema, "patchText");
}

fn not_required(schema: &mut Schema, field: &str) {
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| name != field);
        if required.is_empty() {
            schema.remove("required");
        }
    }
}
