//! One tool call from the model, and its durable identity.

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::model::budget::BudgetOverrides;

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

/// One tool call from the model.
#[derive(Debug, Clone)]
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
        }
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
}
