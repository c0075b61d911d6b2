//! The approval seam (R27, R29): what a tool asks, and who answers when the
//! rules leave it to "ask".

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;

use crate::context::CallContext;

/// A tool's request to act, as the approver sees it. Every string in it
/// comes from the guest: show it escaped (see [`PermissionRequest::broader_saves`]
/// for what an "always" would allow beyond this request).
#[derive(Debug, Clone, Serialize)]
pub struct PermissionRequest {
    /// The call asking.
    pub context: CallContext,
    /// The plugin asking (its name); saved answers are kept per plugin.
    pub plugin: String,
    /// The effective name of the tool asking.
    pub tool: String,
    /// What it wants to do, e.g. `edit`.
    pub action: String,
    /// What it wants to do it to.
    pub resources: Vec<String>,
    /// Patterns to remember if the answer is [`Reply::Always`].
    pub save: Vec<String>,
    /// Optional JSON object to show the user.
    pub metadata: Option<Value>,
}

impl PermissionRequest {
    /// The save patterns that would allow more than exactly the requested
    /// resources if the answer is [`Reply::Always`]: any pattern with a
    /// wildcard, or one naming something not requested. An approver should
    /// call these out before offering "always" (R29).
    pub fn broader_saves(&self) -> Vec<&str> {
        self.save
            .iter()
            .map(String::as_str)
            .filter(|p| p.contains(['*', '?']) || !self.resources.iter().any(|r| r == p))
            .collect()
    }
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Allow this request only.
    Once,
    /// Allow, and allow exactly the request's save patterns (as shown) for
    /// the rest of the session, for the plugin that asked.
    Always,
    /// Refuse.
    Reject,
}

/// Decides requests that no rule settles. Supplied by the embedder.
pub trait Approver: Send + Sync {
    /// Asks about `request`.
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;
}

/// The model-visible refusal: `Permission denied: <action> <resource>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Permission denied: {action} {resource}")]
pub struct PermissionDenied {
    /// The refused action.
    pub action: String,
    /// The first refused resource.
    pub resource: String,
}
