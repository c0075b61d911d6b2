//! The context of one tool call.

use serde::Serialize;
use serde_json::Value;

use crate::PermissionDenied;
use crate::bindings::toolhost::plugin::{call, types::CallContext};
use crate::json::to_value;

/// The call being executed: its durable identity, plus the services the host
/// offers a running call (progress and permission requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    session_id: String,
    agent: String,
    message_id: String,
    call_id: String,
}

impl Context {
    pub(crate) fn new(context: CallContext) -> Self {
        Self {
            session_id: context.session_id,
            agent: context.agent,
            message_id: context.message_id,
            call_id: context.call_id,
        }
    }

    /// The session the call belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The agent that issued the call.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The assistant message that contains the call.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// The provider's identifier of this call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The plugin's configuration: the JSON object `activate` received
    /// (`{}` when the host passed none). Every call can read it, although
    /// each runs in a fresh instance.
    ///
    /// ```no_run
    /// # fn run(cx: &toolhost_sdk::Context) {
    /// let config = cx.config();
    /// let base = config["base_url"].as_str().unwrap_or("https://example.invalid");
    /// # let _ = base;
    /// # }
    /// ```
    pub fn config(&self) -> Value {
        // The host always passes valid JSON; `Null` only if it did not.
        serde_json::from_str(&call::config()).unwrap_or(Value::Null)
    }

    /// Report progress. `update` should serialize to a JSON object, such as
    /// `{"bytes_done": 1024, "bytes_total": 4096}`. Each update replaces the
    /// previous one; if the call fails, the last one is kept as its partial
    /// result.
    ///
    /// # Panics
    ///
    /// If `update` cannot be serialized as JSON (a plugin bug).
    #[track_caller]
    pub fn progress(&self, update: impl Serialize) {
        call::progress(&to_value(&update, "progress update").to_string());
    }

    /// Ask the host for permission to perform `action` on `resources`.
    ///
    /// The host evaluates its permission rules and may ask the user. `save`
    /// holds the patterns to remember if the user answers "always" (`*`
    /// matches any run of characters, `?` one character). `metadata` is an
    /// optional JSON object shown to the user. The returned
    /// [`PermissionDenied`] converts into a [`ToolError`](crate::ToolError)
    /// with `?`, which is usually what a tool wants.
    ///
    /// ```no_run
    /// # fn run(cx: &toolhost_sdk::Context, path: &str) -> Result<(), toolhost_sdk::ToolError> {
    /// cx.request_permission("edit", &[path], &[path], None)?;
    /// # Ok(()) }
    /// ```
    pub fn request_permission(
        &self,
        action: &str,
        resources: &[&str],
        save: &[&str],
        metadata: Option<Value>,
    ) -> Result<(), PermissionDenied> {
        let owned = |items: &[&str]| items.iter().map(|&s| s.to_owned()).collect::<Vec<_>>();
        let metadata = metadata.map(|m| m.to_string());
        call::request_permission(action, &owned(resources), &owned(save), metadata.as_deref())
            .map_err(|denied| PermissionDenied {
                message: denied.message,
            })
    }
}
