//! One tool call from the model, and its durable identity.

use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::budget::BudgetOverrides;
use crate::context::CallContext;
use crate::event::EventSink;

/// One tool call from the model.
pub struct Call {
    /// The effective tool name the model used.
    pub tool: String,
    /// The raw arguments, JSON text as the provider gave them.
    pub input: String,
    /// The call's durable identity.
    pub context: CallContext,
    /// Budget overrides for this call. Default: none.
    pub overrides: BudgetOverrides,
    /// Cancels the call when triggered. Default: a token nobody triggers
    /// (dropping the settle future also cancels).
    pub cancel: CancellationToken,
    /// Decides this call's permission requests that rules leave to "ask",
    /// instead of the host's approver (e.g. the MCP client that made the
    /// call). Default: none, the host's.
    pub approver: Option<Arc<dyn Approver>>,
    /// Also receives this call's progress events, besides the host's sink.
    /// Default: none.
    pub events: Option<Arc<dyn EventSink>>,
    /// Who may read the outputs this call retains. Default: the call's
    /// session ([`CallContext::session_id`]).
    pub output_scope: Option<String>,
    /// Whether the message id was minted for this call alone, so no store
    /// can hold its ids yet (set only by [`Call::minted`], never cloned).
    minted: bool,
}

impl Clone for Call {
    /// The same call, under the same ids. A clone of a [`Call::minted`]
    /// call claims its ids like any other: only the original may skip that.
    fn clone(&self) -> Call {
        Call {
            tool: self.tool.clone(),
            input: self.input.clone(),
            context: self.context.clone(),
            overrides: self.overrides,
            cancel: self.cancel.clone(),
            approver: self.approver.clone(),
            events: self.events.clone(),
            output_scope: self.output_scope.clone(),
            minted: false,
        }
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("tool", &self.tool)
            .field("context", &self.context)
            .field("overrides", &self.overrides)
            .field("approver", &self.approver.is_some())
            .field("events", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl Call {
    /// A call of `tool` with raw JSON `input`.
    pub fn new(tool: impl Into<String>, input: impl Into<String>, context: CallContext) -> Call {
        Call {
            tool: tool.into(),
            input: input.into(),
            context,
            overrides: BudgetOverrides::default(),
            cancel: CancellationToken::new(),
            approver: None,
            events: None,
            output_scope: None,
            minted: false,
        }
    }

    /// A call of `tool` under a message id minted for it (`msg_` and a
    /// random UUID) in place of `context`'s, for a front door whose caller
    /// names no message: no store can hold its ids yet, so while the store
    /// answers it runs unclaimed and its outcome is its only write (R38).
    /// Nothing can replay it; a clone of it claims first.
    ///
    /// ```
    /// # use toolhost_model::{call::Call, context::CallContext};
    /// let context = CallContext::new("ses_1", "my-agent", "", "call_1");
    /// let call = Call::minted("echo", r#"{"message":"hi"}"#, context);
    /// assert!(call.context.message_id.starts_with("msg_"));
    /// ```
    pub fn minted(
        tool: impl Into<String>,
        input: impl Into<String>,
        mut context: CallContext,
    ) -> Call {
        context.message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        Call {
            minted: true,
            ..Call::new(tool, input, context)
        }
    }

    /// Whether its ids were minted for it ([`Call::minted`]).
    pub fn is_minted(&self) -> bool {
        self.minted
    }

    /// The same call with budget overrides.
    pub fn with_overrides(mut self, overrides: BudgetOverrides) -> Call {
        self.overrides = overrides;
        self
    }

    /// The same call, cancelled by `token`.
    pub fn with_cancel(mut self, token: CancellationToken) -> Call {
        self.cancel = token;
        self
    }

    /// The same call, its "ask" decisions made by `approver`.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Call {
        self.approver = Some(approver);
        self
    }

    /// The same call, its retained outputs readable by `scope` instead of
    /// its session (a front door whose sessions are per request).
    pub fn with_output_scope(mut self, scope: impl Into<String>) -> Call {
        self.output_scope = Some(scope.into());
        self
    }

    /// Who may read the outputs this call retains.
    pub fn output_scope(&self) -> &str {
        self.output_scope
            .as_deref()
            .unwrap_or(&self.context.session_id)
    }

    /// The same call, its progress also reported to `events`.
    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Call {
        self.events = Some(events);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> CallContext {
        CallContext {
            session_id: "ses".into(),
            agent: "tester".into(),
            message_id: "named".into(),
            call_id: "c1".into(),
            caller: None,
        }
    }

    #[test]
    fn r38_only_a_minted_call_itself_may_skip_its_claim() {
        let minted = Call::minted("echo", "{}", context());
        let again = Call::minted("echo", "{}", context());
        assert!(minted.is_minted());
        assert!(minted.context.message_id.starts_with("msg_"));
        assert_ne!(minted.context.message_id, again.context.message_id);
        let clone = minted.clone();
        assert_eq!(clone.context, minted.context, "the same ids");
        assert!(!clone.is_minted(), "a clone claims them first");
        assert!(!Call::new("echo", "{}", context()).is_minted());
    }
}
