//! Failures a tool reports to the model.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::json::to_value;

/// An expected, model-visible failure of a tool.
///
/// Return it when the tool cannot do what was asked: a missing file, a bad
/// pattern, a denied permission. The host shows the message to the model, so
/// write it for a model to act on. Panics are not tool errors: the host treats
/// a panic as a defect of the plugin.
///
/// `?` converts `&str`, `String` and [`PermissionDenied`] into a `ToolError`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    message: String,
    metadata: Option<Value>,
}

impl ToolError {
    /// A failure with `message`, written for the model.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            metadata: None,
        }
    }

    /// Attach metadata for tool-specific UI. It must serialize to a JSON
    /// object; the host drops anything else (with a warning).
    ///
    /// # Panics
    ///
    /// If `metadata` cannot be serialized as JSON (a plugin bug).
    #[must_use]
    #[track_caller]
    pub fn with_metadata(mut self, metadata: impl Serialize) -> Self {
        self.metadata = Some(to_value(&metadata, "error metadata"));
        self
    }

    /// The model-visible message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The metadata, if any.
    pub fn metadata(&self) -> Option<&Value> {
        self.metadata.as_ref()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<PermissionDenied> for ToolError {
    /// A denial is model-visible as is: `Permission denied: <action> <resource>`.
    fn from(denied: PermissionDenied) -> Self {
        Self::new(denied.message)
    }
}

/// The host refused a [`Context::request_permission`](crate::Context::request_permission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionDenied {
    pub(crate) message: String,
}

impl PermissionDenied {
    /// The host's model-visible message, `Permission denied: <action> <resource>`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PermissionDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PermissionDenied {}
