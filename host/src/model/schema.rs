//! JSON Schema compilation and validation at the tool boundary.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A JSON Schema document compiled once, when its tool is registered.
#[derive(Clone)]
pub struct Schema {
    document: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.document).finish()
    }
}

/// One way an instance fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON Pointer to the offending value (empty for the document root).
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Why a schema document cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(String);

impl Schema {
    /// Compiles a schema document, checking it against its meta-schema.
    pub fn compile(document: Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::validator_for(&document)
            .map_err(|e| SchemaError(format!("not a valid JSON Schema: {e}")))?;
        Ok(Schema {
            document: Arc::new(document),
            validator: Arc::new(validator),
        })
    }

    /// Parses JSON text and compiles it.
    pub fn parse(text: &str) -> Result<Self, SchemaError> {
        let document = serde_json::from_str(text)
            .map_err(|e| SchemaError(format!("schema is not valid JSON: {e}")))?;
        Self::compile(document)
    }

    /// The schema document as given.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Every violation of this schema by `instance`; empty when it is valid.
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        // The common case is valid input: skip collecting errors for it.
        if self.validator.is_valid(instance) {
            return Vec::new();
        }
        self.validator
            .iter_errors(instance)
            .map(|e| Violation {
                path: e.instance_path().as_str().to_owned(),
                message: e.to_string(),
            })
            .collect()
    }
}
