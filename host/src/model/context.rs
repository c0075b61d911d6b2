//! The durable identity of a call.

use serde::{Deserialize, Serialize};

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
