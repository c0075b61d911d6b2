//! JSON Schema compilation and validation at the tool boundary.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::model::text::truncate;

/// Violations listed in an error: enough to fix the input, few enough to
/// read (R13, R28).
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// Violations counted beyond the listed ones; validation stops there, so
/// millions of violations cost the host nothing more (R28).
pub const MAX_COUNTED_VIOLATIONS: usize = 10_000;

/// The longest path or message kept for one violation: messages quote the
/// offending value, which may be huge.
const MAX_VIOLATION_TEXT: usize = 512;

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

/// The violations of one instance: the first [`MAX_LISTED_VIOLATIONS`],
/// and a count of the rest up to [`MAX_COUNTED_VIOLATIONS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations {
    listed: Vec<Violation>,
    unlisted: usize,
    stopped: bool,
}

impl Violations {
    /// Whether the instance is valid.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// The violations listed, in validation order.
    pub fn listed(&self) -> &[Violation] {
        &self.listed
    }

    /// How many more were found beyond the listed ones.
    pub fn unlisted(&self) -> usize {
        self.unlisted
    }

    /// Whether counting stopped at [`MAX_COUNTED_VIOLATIONS`], so there may
    /// be more still.
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// One violation per line, `- /path: message`, then how many more.
impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.listed.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "- {v}")?;
        }
        match (self.unlisted, self.stopped) {
            (0, _) => Ok(()),
            (n, false) => write!(f, "\n- and {n} more"),
            (n, true) => write!(f, "\n- and at least {n} more"),
        }
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

    /// The violations of this schema by `instance`, bounded: the first
    /// [`MAX_LISTED_VIOLATIONS`] listed, the rest counted lazily up to
    /// [`MAX_COUNTED_VIOLATIONS`]. Empty when the instance is valid.
    pub fn violations(&self, instance: &Value) -> Violations {
        // The common case is valid input: skip collecting errors for it.
        if self.validator.is_valid(instance) {
            return Violations::default();
        }
        let mut found = Violations::default();
        let mut errors = self.validator.iter_errors(instance);
        for e in errors.by_ref().take(MAX_LISTED_VIOLATIONS) {
            found.listed.push(Violation {
                path: truncate(e.instance_path().as_str().to_owned(), MAX_VIOLATION_TEXT),
                message: truncate(e.to_string(), MAX_VIOLATION_TEXT),
            });
        }
        found.unlisted = errors.by_ref().take(MAX_COUNTED_VIOLATIONS).count();
        found.stopped = found.unlisted == MAX_COUNTED_VIOLATIONS && errors.next().is_some();
        found
    }
}
