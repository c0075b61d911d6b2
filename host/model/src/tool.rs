//! The one tool value: native Rust tools and wasm tools alike.

use std::fmt;
use std::sync::{Arc, Weak};

use serde::Serialize;
use serde_json::Value;

use crate::budget::{Budget, OutputBounds};
use crate::execution::Executor;
use crate::plugin::PluginInfo;
use crate::schema::Schema;

// The name rules (R1) live in a crate of their own, which the SDK's macros
// apply at compile time too.
pub use toolhost_names::{MAX_NAME_LEN, NameError, RESERVED_NAME, normalize_name};

/// A tool: a description, input and optional output schema, and exactly one
/// way to execute. Cheap to clone; registries capture it by value.
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

#[derive(Clone)]
struct ToolInner {
    description: String,
    input: Schema,
    output: Option<Schema>,
    executor: Arc<dyn Executor>,
    budget: Option<Budget>,
    bounds: Option<OutputBounds>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("description", &self.inner.description)
            .field("provider", &self.provider())
            .finish_non_exhaustive()
    }
}

/// A tool's identity without its contents: see [`Tool::downgrade`].
#[allow(missing_debug_implementations)] // an address, nothing to show
pub struct WeakTool(Weak<ToolInner>);

impl WeakTool {
    /// Whether `tool` is the tool this was made from. Exact: the weak
    /// reference keeps the allocation, so no other tool can take its address.
    pub fn is(&self, tool: &Tool) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&tool.inner))
    }
}

/// An advertised tool, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The effective (normalized) name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the machine output, when the tool has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl Tool {
    /// A tool whose calls `executor` runs, with its description and
    /// compiled schemas: how a tool source outside this crate (the MCP
    /// bridge) makes its tools.
    pub fn from_parts(
        description: String,
        input: Schema,
        output: Option<Schema>,
        executor: Arc<dyn Executor>,
    ) -> Tool {
        Tool {
            inner: Arc::new(ToolInner {
                description,
                input,
                output,
                executor,
                budget: None,
                bounds: None,
            }),
        }
    }

    /// A copy of this tool's parts with `change` applied.
    fn with_inner(self, change: impl FnOnce(&mut ToolInner)) -> Tool {
        let mut inner = ToolInner::clone(&self.inner);
        change(&mut inner);
        Tool {
            inner: Arc::new(inner),
        }
    }

    /// The same tool with its own budget, overriding the host's default
    /// (per-call overrides still apply over it).
    pub fn with_budget(self, budget: Budget) -> Tool {
        self.with_inner(|i| i.budget = Some(budget))
    }

    /// The same tool with its own output bounds, overriding the host's.
    pub fn with_bounds(self, bounds: OutputBounds) -> Tool {
        self.with_inner(|i| i.bounds = Some(bounds))
    }

    /// What the tool does.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The compiled input schema.
    pub fn input_schema(&self) -> &Schema {
        &self.inner.input
    }

    /// The compiled output schema, if the tool has one.
    pub fn output_schema(&self) -> Option<&Schema> {
        self.inner.output.as_ref()
    }

    /// `"native"`, or the name and version of the plugin providing the tool.
    pub fn provider(&self) -> String {
        match self.plugin() {
            None => "native".to_owned(),
            Some(info) => format!("{} {}", info.name, info.version),
        }
    }

    /// The plugin providing this tool: a wasm plugin, or `code-mode` (the
    /// interpreter) for `execute`; `None` for native tools.
    pub fn plugin(&self) -> Option<&PluginInfo> {
        self.inner.executor.plugin()
    }

    /// The budget the tool carries (a plugin's), if any.
    pub fn budget(&self) -> Option<Budget> {
        self.inner.budget
    }

    /// The output bounds the tool carries (a plugin's), if any.
    pub fn bounds(&self) -> Option<OutputBounds> {
        self.inner.bounds
    }

    /// What runs the tool's calls.
    pub fn executor(&self) -> &dyn Executor {
        &*self.inner.executor
    }

    /// The tool's definition as advertised under `name`.
    pub fn definition(&self, name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: self.inner.description.clone(),
            input_schema: self.inner.input.document().clone(),
            output_schema: self.inner.output.as_ref().map(|s| s.document().clone()),
        }
    }

    /// Whether two handles are the same captured tool.
    pub fn ptr_eq(&self, other: &Tool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A handle that recognizes this tool without keeping it (or its
    /// plugin) alive.
    pub fn downgrade(&self) -> WeakTool {
        WeakTool(Arc::downgrade(&self.inner))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn r01_normalized_names_are_safe_and_normalizing_twice_changes_nothing(name in "\\PC{0,80}") {
            match normalize_name(&name) {
                Ok(n) => {
                    prop_assert!(n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
                    prop_assert_eq!(n.len(), name.chars().count());
                    prop_assert!((1..=MAX_NAME_LEN).contains(&n.len()));
                    prop_assert_eq!(normalize_name(&n), Ok(n.clone()));
                }
                Err(NameError::Empty) => prop_assert!(name.is_empty()),
                Err(NameError::TooLong(_, len)) => prop_assert!(len > MAX_NAME_LEN),
                Err(NameError::Reserved) => prop_assert_eq!(name, RESERVED_NAME),
                Err(other) => prop_assert!(false, "a NameError this test does not know: {other}"),
            }
        }
    }

    #[test]
    fn r01_normalize_replaces_unsupported_characters() {
        assert_eq!(normalize_name("read.file v2").unwrap(), "read_file_v2");
        assert_eq!(normalize_name("héllo").unwrap(), "h_llo");
        assert_eq!(normalize_name("ok-name_1").unwrap(), "ok-name_1");
        assert_eq!(normalize_name(""), Err(NameError::Empty));
        assert_eq!(normalize_name("execute"), Err(NameError::Reserved));
        assert!(matches!(
            normalize_name(&"a".repeat(65)),
            Err(NameError::TooLong(_, 65))
        ));
        assert_eq!(normalize_name(&"a".repeat(64)).unwrap().len(), 64);
    }
}
