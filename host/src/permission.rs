//! Permission rules, evaluation and approval (R12, R27).
//!
//! Trusted code formulates requests (`action` on `resources`); the host
//! evaluates them against rules. The last matching rule wins; no match means
//! ask. `*` matches any run of characters including `/`, `?` one character.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wildmatch::WildMatch;

use crate::model::call::CallContext;

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Allowed without asking.
    Allow,
    /// Refused without asking.
    Deny,
    /// The approver decides.
    Ask,
}

/// `{action, resource, effect}`: patterns for the action and the resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Pattern for the action, e.g. `edit` or `*`.
    pub action: String,
    /// Pattern for the resource, e.g. `/work/**` or `*`.
    pub resource: String,
    /// What to do when both match.
    pub effect: Effect,
}

impl Rule {
    /// A rule from its parts.
    pub fn new(action: impl Into<String>, resource: impl Into<String>, effect: Effect) -> Rule {
        Rule {
            action: action.into(),
            resource: resource.into(),
            effect,
        }
    }

    fn matches(&self, action: &str, resource: &str) -> bool {
        WildMatch::new(&self.action).matches(action)
            && WildMatch::new(&self.resource).matches(resource)
    }
}

/// An ordered list of rules; later rules override earlier ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// The effect for `action` on `resource`: the last matching rule, or
    /// [`Effect::Ask`] when none matches.
    pub fn evaluate(&self, action: &str, resource: &str) -> Effect {
        self.0
            .iter()
            .rev()
            .find(|r| r.matches(action, resource))
            .map_or(Effect::Ask, |r| r.effect)
    }

    /// Whether a tool stays in the catalog: hidden only when the last rule for
    /// its name with resource `*` denies it (R12, visibility only).
    pub fn is_visible(&self, tool: &str) -> bool {
        self.0
            .iter()
            .rev()
            .find(|r| r.resource == "*" && WildMatch::new(&r.action).matches(tool))
            .is_none_or(|r| r.effect != Effect::Deny)
    }

    /// Appends a rule.
    pub fn push(&mut self, rule: Rule) {
        self.0.push(rule);
    }
}

/// A tool's request to act, as the approver sees it.
#[derive(Debug, Clone, Serialize)]
pub struct PermissionRequest {
    /// The call asking.
    pub context: CallContext,
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

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Allow this request only.
    Once,
    /// Allow, and allow the request's save patterns for the rest of the session.
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

/// Rules plus the approver plus what users allowed "always", per session.
#[derive(Clone, Default)]
pub(crate) struct Policy {
    pub(crate) rules: Rules,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    saved: Arc<Mutex<HashMap<String, Rules>>>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rules)
            .field("approver", &self.approver.is_some())
            .finish_non_exhaustive()
    }
}

impl Policy {
    pub(crate) fn new(rules: Rules, approver: Option<Arc<dyn Approver>>) -> Policy {
        Policy {
            rules,
            approver,
            saved: Arc::default(),
        }
    }

    /// The same policy with `extra` rules appended (they win over ours).
    pub(crate) fn with_rules(&self, extra: &Rules) -> Policy {
        let mut rules = self.rules.clone();
        rules.0.extend(extra.0.iter().cloned());
        Policy {
            rules,
            approver: self.approver.clone(),
            saved: self.saved.clone(),
        }
    }

    fn effect(&self, session: &str, action: &str, resource: &str) -> Effect {
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        match saved.get(session).map(|r| r.evaluate(action, resource)) {
            Some(Effect::Allow) => Effect::Allow,
            _ => self.rules.evaluate(action, resource),
        }
    }

    /// Evaluates `request`: any deny refuses; any ask goes to the approver
    /// (no approver refuses); "always" saves the request's patterns for the
    /// session.
    pub(crate) async fn decide(&self, request: &PermissionRequest) -> Result<(), PermissionDenied> {
        let denied = |resource: &str| PermissionDenied {
            action: request.action.clone(),
            resource: resource.to_owned(),
        };
        let session = &request.context.session_id;
        let mut asking = None;
        for resource in &request.resources {
            match self.effect(session, &request.action, resource) {
                Effect::Deny => return Err(denied(resource)),
                Effect::Ask => asking = asking.or(Some(resource)),
                Effect::Allow => {}
            }
        }
        let Some(first) = asking else { return Ok(()) };
        let Some(approver) = &self.approver else {
            return Err(denied(first));
        };
        match approver.ask(request).await {
            Reply::Once => Ok(()),
            Reply::Always => {
                let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
                let rules = saved.entry(session.clone()).or_default();
                for pattern in &request.save {
                    rules.push(Rule::new(&request.action, pattern, Effect::Allow));
                }
                Ok(())
            }
            Reply::Reject => Err(denied(first)),
        }
    }
}
