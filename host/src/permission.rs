//! Permission rules, evaluation and approval (R12, R27).
//!
//! Trusted code formulates requests (`action` on `resources`); the host
//! evaluates them against rules. The last matching rule wins; no match means
//! ask. `*` matches any run of characters including `/`, `?` one character.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use wildmatch::WildMatch;

pub use crate::model::approval::{Approver, PermissionDenied, PermissionRequest, Reply};

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
        self.matching(action, resource).unwrap_or(Effect::Ask)
    }

    /// The effect of the last rule matching `action` on `resource`, if any.
    pub fn matching(&self, action: &str, resource: &str) -> Option<Effect> {
        self.0
            .iter()
            .rev()
            .find(|r| r.matches(action, resource))
            .map(|r| r.effect)
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

/// Rules plus the approver plus what users allowed "always", per session
/// and plugin.
#[derive(Clone, Default)]
pub(crate) struct Policy {
    pub(crate) rules: Rules,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// Whose policy this is: the plugin's identity (name and digest), so
    /// two plugins that share a name never share saved answers.
    owner: String,
    saved: Arc<Mutex<HashMap<SavedKey, Rules>>>,
}

/// Saved answers belong to one session and one plugin (R29).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SavedKey {
    session: String,
    owner: String,
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
            owner: String::new(),
            saved: Arc::default(),
        }
    }

    /// This policy for one plugin (`owner` identifies it), with the
    /// plugin's `extra` rules appended (they win over ours).
    pub(crate) fn for_plugin(&self, owner: String, extra: &Rules) -> Policy {
        let mut rules = self.rules.clone();
        rules.0.extend(extra.0.iter().cloned());
        Policy {
            rules,
            approver: self.approver.clone(),
            owner,
            saved: self.saved.clone(),
        }
    }

    /// The rules' effect; an "ask" that a saved answer covers is an allow.
    /// Saved answers never override a deny rule.
    fn effect(&self, key: &SavedKey, action: &str, resource: &str, unmatched: Effect) -> Effect {
        match self.rules.matching(action, resource).unwrap_or(unmatched) {
            Effect::Ask => {
                let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
                match saved.get(key).map(|r| r.evaluate(action, resource)) {
                    Some(Effect::Allow) => Effect::Allow,
                    _ => Effect::Ask,
                }
            }
            decided => decided,
        }
    }

    /// Evaluates `request`: any deny refuses; any ask goes to the call's
    /// approver, else the host's (no approver refuses); "always" saves the
    /// request's patterns for the session and the plugin that asked.
    pub(crate) async fn decide(
        &self,
        request: &PermissionRequest,
        call_approver: Option<&Arc<dyn Approver>>,
    ) -> Result<(), PermissionDenied> {
        self.decide_unmatched(request, call_approver, Effect::Ask)
            .await
    }

    /// As [`Policy::decide`], but a resource no rule matches gets
    /// `unmatched` (an HTTP request within a granted origin is allowed: the
    /// grant is the user's consent).
    pub(crate) async fn decide_unmatched(
        &self,
        request: &PermissionRequest,
        call_approver: Option<&Arc<dyn Approver>>,
        unmatched: Effect,
    ) -> Result<(), PermissionDenied> {
        let denied = |resource: &str| PermissionDenied {
            action: request.action.clone(),
            resource: resource.to_owned(),
        };
        let key = SavedKey {
            session: request.context.session_id.clone(),
            owner: self.owner.clone(),
        };
        let mut asking = None;
        for resource in &request.resources {
            match self.effect(&key, &request.action, resource, unmatched) {
                Effect::Deny => return Err(denied(resource)),
                Effect::Ask => asking = asking.or(Some(resource)),
                Effect::Allow => {}
            }
        }
        let Some(first) = asking else { return Ok(()) };
        let Some(approver) = call_approver.or(self.approver.as_ref()) else {
            return Err(denied(first));
        };
        match approver.ask(request).await {
            Reply::Once => Ok(()),
            Reply::Always => {
                let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
                let rules = saved.entry(key).or_default();
                for pattern in &request.save {
                    rules.push(Rule::new(&request.action, pattern, Effect::Allow));
                }
                Ok(())
            }
            Reply::Reject => Err(denied(first)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::context::CallContext;

    fn allow(resource: &str) -> Rules {
        Rules(vec![Rule::new("edit", resource, Effect::Allow)])
    }

    proptest! {
        #[test]
        fn r27_literal_patterns_match_only_themselves(a in "[a-z/._-]{1,20}", b in "[a-z/._-]{1,20}") {
            prop_assert_eq!(allow(&a).evaluate("edit", &a), Effect::Allow);
            prop_assert_eq!(allow(&a).evaluate("edit", &b) == Effect::Allow, a == b);
        }

        #[test]
        fn r27_star_matches_any_run_and_question_one_character(
            prefix in "[a-z/]{0,10}",
            rest in "\\PC{0,20}",
            one in "\\PC",
        ) {
            let star = allow(&format!("{prefix}*"));
            prop_assert_eq!(star.evaluate("edit", &format!("{prefix}{rest}")), Effect::Allow);
            let question = allow(&format!("{prefix}?"));
            prop_assert_eq!(question.evaluate("edit", &format!("{prefix}{one}")), Effect::Allow);
            prop_assert_eq!(question.evaluate("edit", &prefix), Effect::Ask);
        }

        #[test]
        fn r29_broader_saves_are_exactly_the_non_literal_or_unrequested_ones(
            resources in proptest::collection::vec("[a-z/]{1,8}", 1..4),
            extra in "[a-z/]{1,8}",
        ) {
            let request = |save: Vec<String>| PermissionRequest {
                context: CallContext::default(),
                plugin: "p".into(),
                tool: "t".into(),
                action: "edit".into(),
                resources: resources.clone(),
                save,
                metadata: None,
            };
            prop_assert!(request(resources.clone()).broader_saves().is_empty());
            let wild = request(vec![format!("{}*", resources[0])]);
            prop_assert_eq!(wild.broader_saves().len(), 1);
            let unrelated = request(vec![extra.clone()]);
            prop_assert_eq!(unrelated.broader_saves().is_empty(), resources.contains(&extra));
        }
    }
}
