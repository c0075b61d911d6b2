//! JSON Schema compilation and validation at the tool boundary.

mod probe;

use std::fmt::{self, Write as _};
use std::sync::Arc;

use jsonschema::ValidationError;
use serde_json::Value;

use crate::schema::probe::{Probe, Probed};

/// Violations listed in an error: enough to fix the input, few enough to
/// read (R13, R28).
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// Violations counted beyond the listed ones; validation stops there, so
/// millions of violations cost the host nothing more (R28).
pub const MAX_COUNTED_VIOLATIONS: usize = 10_000;

/// The longest path or message kept for one violation: messages quote the
/// offending value, which may be huge.
const MAX_VIOLATION_TEXT: usize = 512;

/// Errors the validator may build before it stops looking: enough to list
/// and count, and to know there are more. It builds them all before it
/// yields one, so this bounds its memory (R28).
const MAX_BUILT_VIOLATIONS: usize = MAX_LISTED_VIOLATIONS + MAX_COUNTED_VIOLATIONS + 1;

/// A JSON Schema document compiled once, when its tool is registered.
#[derive(Clone)]
pub struct Schema {
    document: Arc<Value>,
    validator: Arc<jsonschema::Validator<Probed>>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.document).finish()
    }
}

/// One way an instance fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
            (0, false) => Ok(()),
            (0, true) => write!(f, "\n- and possibly more"),
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
        let validator = jsonschema::options_for::<Probed>()
            .build(&document)
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
    /// [`MAX_LISTED_VIOLATIONS`] listed, the rest counted up to
    /// [`MAX_COUNTED_VIOLATIONS`], and no more built than that (R28). Empty
    /// when the instance is valid.
    pub fn violations(&self, instance: &Value) -> Violations {
        // The common case is valid input: skip building errors for it.
        if self.validator.is_valid(Probe(instance)) {
            return Violations::default();
        }
        let (errors, stopped) = probe::within(MAX_BUILT_VIOLATIONS, || {
            self.validator.iter_errors(Probe(instance))
        });
        // After a stop only the errors built before it are sure.
        let mut errors = errors.filter(|e| !stopped || probe::exact(e));
        let listed: Vec<Violation> = errors
            .by_ref()
            .take(MAX_LISTED_VIOLATIONS)
            .map(|e| violation(&e))
            .collect();
        if listed.is_empty() {
            return Violations::unlistable();
        }
        let unlisted = errors.by_ref().take(MAX_COUNTED_VIOLATIONS).count();
        Violations {
            listed,
            unlisted,
            stopped: stopped || errors.next().is_some(),
        }
    }
}

impl Violations {
    /// For an instance whose every error built before the stop lay inside
    /// another (`anyOf` branches, say): invalid, but nothing sure to list.
    fn unlistable() -> Violations {
        Violations {
            listed: vec![Violation {
                path: String::new(),
                message: "does not match the schema, in too many places to list them one by one"
                    .into(),
            }],
            unlisted: 0,
            stopped: true,
        }
    }
}

fn violation(e: &ValidationError<'_>) -> Violation {
    Violation {
        path: capped(e.instance_path().as_str()),
        message: capped(e),
    }
}

/// `text` as at most [`MAX_VIOLATION_TEXT`] bytes, cut at a UTF-8 boundary
/// with a marker saying how long it was, without ever holding all of it (a
/// message quotes the offending value, which may be the whole input).
fn capped(text: impl fmt::Display) -> String {
    let mut capped = Capped::default();
    // `Capped` never fails: the text is cut, not refused.
    let _ = write!(capped, "{text}");
    if capped.total > capped.kept.len() {
        let total = capped.total;
        let _ = write!(capped.kept, "… (cut; {total} bytes in all)");
    }
    capped.kept
}

#[derive(Default)]
struct Capped {
    kept: String,
    total: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Once one character did not fit, nothing after it is kept.
        if self.total == self.kept.len() {
            let mut end = s.len().min(MAX_VIOLATION_TEXT - self.kept.len());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.kept.push_str(&s[..end]);
        }
        self.total += s.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(document: Value) -> Schema {
        Schema::compile(document).unwrap()
    }

    #[test]
    fn r13_each_violation_is_listed_with_its_pointer_when_there_are_few() {
        let s = schema(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"items": {"type": "string"}}},
            "required": ["c"]
        }));
        let found = s.violations(&json!({"a": "x", "b": ["y", 2]}));
        let text = found.to_string();
        assert!(
            text.contains("- /a: \"x\" is not of type \"integer\""),
            "{text}"
        );
        assert!(
            text.contains("- /b/1: 2 is not of type \"string\""),
            "{text}"
        );
        assert!(text.contains("- /: \"c\" is a required property"), "{text}");
        assert_eq!((found.listed().len(), found.unlisted()), (3, 0));
        assert!(!found.stopped());
        assert!(s.violations(&json!({"a": 1, "b": [], "c": 0})).is_empty());
    }

    #[test]
    fn r28_violations_inside_branches_past_the_budget_still_say_invalid() {
        // Every error built lies inside an `anyOf` branch: when the budget
        // ends in the first branch, the second sees a cut-short array.
        let s = schema(json!({"anyOf": [
            {"items": {"type": "integer"}},
            {"items": {"type": "string"}}
        ]}));
        let found = s.violations(&json!(vec![true; 2 * MAX_BUILT_VIOLATIONS]));
        assert!(!found.is_empty());
        assert!(found.stopped());
        assert_eq!(found.listed()[0].path, "");
        assert!(
            found.to_string().ends_with("\n- and possibly more"),
            "{found}"
        );
    }

    #[test]
    fn r28_a_violation_quoting_a_huge_value_keeps_only_its_bound() {
        let s = schema(json!({"type": "object"}));
        let huge = json!(vec!["é"; 100_000]);
        let found = s.violations(&huge);
        let message = &found.listed()[0].message;
        let total = huge.to_string().len() + " is not of type \"object\"".len();
        assert!(
            message.ends_with(&format!("… (cut; {total} bytes in all)")),
            "{message}"
        );
        assert!(
            message.len() < MAX_VIOLATION_TEXT + 64,
            "{} bytes",
            message.len()
        );
    }
}
