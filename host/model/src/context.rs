//! The durable identity of a call, and who made it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The durable identity of one tool call, supplied by the agent runner.
///
/// `#[non_exhaustive]`: build one with [`CallContext::new`] (and
/// [`with_caller`](CallContext::with_caller)); its fields stay readable
/// and assignable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallContext {
    /// The session the call belongs to.
    pub session_id: String,
    /// The agent that issued the call.
    pub agent: String,
    /// The assistant message that contains the call.
    pub message_id: String,
    /// The provider's identifier of this call.
    pub call_id: String,
    /// Who made the call, when the front door authenticated them (R40):
    /// recorded with every outcome and event. `None`: nobody in particular
    /// (a local agent, stdio, loopback without a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
}

impl CallContext {
    /// The identity of call `call_id` in message `message_id` of session
    /// `session_id`, issued by `agent`, made by nobody in particular.
    pub fn new(
        session_id: impl Into<String>,
        agent: impl Into<String>,
        message_id: impl Into<String>,
        call_id: impl Into<String>,
    ) -> CallContext {
        CallContext {
            session_id: session_id.into(),
            agent: agent.into(),
            message_id: message_id.into(),
            call_id: call_id.into(),
            caller: None,
        }
    }

    /// The same identity, made by `caller` (R40).
    pub fn with_caller(mut self, caller: Caller) -> CallContext {
        self.caller = Some(caller);
        self
    }
}

/// An authenticated caller. Recorded by name only; its claims stay in
/// memory, for permission rules to match (R40).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Caller {
    name: Arc<str>,
    claims: Arc<Map<String, Value>>,
}

impl Caller {
    /// An OAuth caller: `ISSUER#SUBJECT` (an issuer has no fragment, so
    /// the name is unambiguous), with the token's claims.
    pub fn oauth(issuer: &str, subject: &str, claims: Map<String, Value>) -> Caller {
        Caller {
            name: format!("{issuer}#{subject}").into(),
            claims: Arc::new(claims),
        }
    }

    /// A caller known only by name (a static token's digest, or a name
    /// read back from the store); no claims.
    pub fn named(name: impl Into<Arc<str>>) -> Caller {
        Caller {
            name: name.into(),
            claims: Arc::default(),
        }
    }

    /// The caller's stable name: what outcomes record and rules match.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether claim `claim` is a string matching `pattern` (`*` any run,
    /// `?` one character), or a list holding one (e.g. `groups`).
    pub fn has_claim(&self, claim: &str, pattern: &str) -> bool {
        let value = wildmatch::WildMatch::new(pattern);
        match self.claims.get(claim) {
            Some(Value::String(s)) => value.matches(s),
            Some(Value::Array(items)) => items
                .iter()
                .any(|v| v.as_str().is_some_and(|s| value.matches(s))),
            _ => false,
        }
    }
}

impl From<String> for Caller {
    fn from(name: String) -> Caller {
        Caller::named(name)
    }
}

impl From<Caller> for String {
    fn from(caller: Caller) -> String {
        caller.name.to_string()
    }
}
