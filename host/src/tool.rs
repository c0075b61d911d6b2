//! The one tool value: native Rust tools and wasm tools alike.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bound::Bounds;
use crate::budget::Budget;
use crate::events::Progress;
use crate::plugin::WasmTool;
use crate::schema::{Schema, SchemaError};

/// The longest effective tool name providers accept.
pub const MAX_NAME_LEN: usize = 64;

/// The name reserved for Code Mode.
pub const RESERVED_NAME: &str = "execute";

/// The durable identity of one tool call, supplied by the agent runner.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallContext {
    /// The session the call belongs to.
    pub session_id: String,
    /// The agent that issued the call.
    pub agent: String,
    /// The assistant message that contains the call.
    pub message_id: String,
    /// The provider's identifier of this call.
    pub call_id: String,
}

/// One part of the content a model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Text; the host measures and bounds it.
    Text {
        /// The text.
        text: String,
    },
    /// Binary media, passed through untouched.
    Media {
        /// MIME type of `data`.
        mime_type: String,
        /// The bytes.
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
        /// Optional file name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }
}

/// Media bytes travel as base64 in JSON views (events, `--json`).
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// What a tool returned on success, before settlement normalizes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResponse {
    /// The machine value; required when the tool has an output schema.
    pub output: Option<Value>,
    /// Model-facing content; derived from `output` when absent.
    pub content: Option<Vec<ContentPart>>,
    /// Compact JSON object for tool-specific UI.
    pub metadata: Option<Value>,
}

/// An expected, model-visible failure of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// What went wrong, for the model.
    pub message: String,
    /// Optional JSON object for tool-specific UI.
    pub metadata: Option<Value>,
}

impl ToolFailure {
    /// A failure with just a message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolFailure {
            message: message.into(),
            metadata: None,
        }
    }
}

/// What a native tool receives besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's identity.
    pub call: CallContext,
    pub(crate) progress: Progress,
}

impl ToolContext {
    /// Reports progress (a JSON object); each update replaces the last.
    pub fn progress(&self, update: Value) {
        self.progress.report(update);
    }
}

/// The future a native tool returns.
pub type NativeFuture = Pin<Box<dyn Future<Output = Result<ToolResponse, ToolFailure>> + Send>>;

type NativeFn = dyn Fn(Value, ToolContext) -> NativeFuture + Send + Sync;

#[derive(Clone)]
pub(crate) enum Executor {
    Native(Arc<NativeFn>),
    Wasm(Arc<WasmTool>),
}

/// A tool: a description, input and optional output schema, and exactly one
/// way to execute. Cheap to clone; registries capture it by value.
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

struct ToolInner {
    description: String,
    input: Schema,
    output: Option<Schema>,
    executor: Executor,
    budget: Option<Budget>,
    bounds: Option<Bounds>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("description", &self.inner.description)
            .field("kind", &self.kind())
            .finish_non_exhaustive()
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
    /// Builds a native Rust tool.
    ///
    /// `input_schema` and `output_schema` are JSON Schema documents; they are
    /// compiled here, once. `execute` receives input that already passed the
    /// input schema.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolhost::{Tool, ToolResponse};
    ///
    /// let echo = Tool::native(
    ///     "Echo the message back",
    ///     json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    ///     None,
    ///     |input, _cx| async move {
    ///         Ok(ToolResponse { output: Some(input["message"].clone()), ..Default::default() })
    ///     },
    /// )
    /// .unwrap();
    /// # let _ = echo;
    /// ```
    pub fn native<F, Fut>(
        description: impl Into<String>,
        input_schema: Value,
        output_schema: Option<Value>,
        execute: F,
    ) -> Result<Tool, SchemaError>
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolResponse, ToolFailure>> + Send + 'static,
    {
        let input = Schema::compile(input_schema)?;
        let output = output_schema.map(Schema::compile).transpose()?;
        let f: Arc<NativeFn> = Arc::new(move |v, cx| Box::pin(execute(v, cx)));
        Ok(Tool::from_parts(
            description.into(),
            input,
            output,
            Executor::Native(f),
        ))
    }

    pub(crate) fn from_parts(
        description: String,
        input: Schema,
        output: Option<Schema>,
        executor: Executor,
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
        let i = &self.inner;
        let mut inner = ToolInner {
            description: i.description.clone(),
            input: i.input.clone(),
            output: i.output.clone(),
            executor: i.executor.clone(),
            budget: i.budget,
            bounds: i.bounds,
        };
        change(&mut inner);
        Tool {
            inner: Arc::new(inner),
        }
    }

    /// The same tool with its own budget, overriding the host's default
    /// (per-call limits still apply over it).
    pub fn with_budget(self, budget: Budget) -> Tool {
        self.with_inner(|i| i.budget = Some(budget))
    }

    /// The same tool with its own output bounds, overriding the host's.
    pub fn with_bounds(self, bounds: Bounds) -> Tool {
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

    /// `"native"`, or the plugin that provides the tool.
    pub fn kind(&self) -> String {
        match &self.inner.executor {
            Executor::Native(_) => "native".to_owned(),
            Executor::Wasm(w) => w.plugin.label(),
        }
    }

    /// The plugin providing this tool, for wasm tools.
    pub fn plugin(&self) -> Option<&crate::PluginInfo> {
        match &self.inner.executor {
            Executor::Native(_) => None,
            Executor::Wasm(w) => Some(w.plugin.info()),
        }
    }

    pub(crate) fn budget(&self) -> Option<Budget> {
        self.inner.budget
    }

    pub(crate) fn bounds(&self) -> Option<Bounds> {
        self.inner.bounds
    }

    pub(crate) fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    pub(crate) fn definition(&self, name: &str) -> ToolDefinition {
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
}

/// Why a name cannot become an effective tool name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// Empty after normalization.
    #[error(
        "tool name is empty; give the tool a name of 1-{MAX_NAME_LEN} characters from [A-Za-z0-9_-]"
    )]
    Empty,
    /// Longer than [`MAX_NAME_LEN`].
    #[error("tool name `{0}` is {1} characters long; shorten it to at most {MAX_NAME_LEN}")]
    TooLong(String, usize),
    /// The reserved name.
    #[error("tool name `{RESERVED_NAME}` is reserved for Code Mode; pick another name")]
    Reserved,
}

/// Normalizes an authored name into the effective model-facing name (R1):
/// every character outside `[A-Za-z0-9_-]` becomes `_`.
pub fn normalize_name(authored: &str) -> Result<String, NameError> {
    let name: String = authored
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let len = name.chars().count();
    if len == 0 {
        Err(NameError::Empty)
    } else if len > MAX_NAME_LEN {
        Err(NameError::TooLong(name, len))
    } else if name == RESERVED_NAME {
        Err(NameError::Reserved)
    } else {
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn media_round_trips_through_base64() {
        let part = ContentPart::Media {
            mime_type: "image/png".into(),
            data: (0u8..=255).collect(),
            name: None,
        };
        let json = serde_json::to_string(&part).unwrap();
        assert_eq!(serde_json::from_str::<ContentPart>(&json).unwrap(), part);
    }
}
