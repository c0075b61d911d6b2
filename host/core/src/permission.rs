//! Permission rules, evaluation and approval (R12, R27).
//!
//! Trusted code formulates requests (`action` on `resources`); the host
//! evaluates them against rules. The last matching rule wins; no match means
//! ask. `*` matches any run of characters including `/`, `?` one character.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wildmatch::WildMatch;

pub use crate::model::approval::{Approver, PermissionDenied, PermissionRequest, Reply};
use crate::model::context::{CallContext, Caller};
use crate::store::StoreSlot;

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

/// `{action, resource, effect}`: patterns for the action and the resource,
/// and optionally for who is calling (R40).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Pattern for the action, e.g. `edit` or `*`.
    pub action: String,
    /// Pattern for the resource, e.g. `/work/**` or `*`.
    pub resource: String,
    /// What to do when both match.
    pub effect: Effect,
    /// Pattern for the caller's name (`ISSUER#SUBJECT`); a rule with one
    /// never matches a call without an authenticated caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// `CLAIM=PATTERN`: the caller's token claim (a string, or a list
    /// such as `groups` holding one) must match; never matches a call
    /// without an authenticated caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

impl Rule {
    /// A rule from its parts, for any caller.
    pub fn new(action: impl Into<String>, resource: impl Into<String>, effect: Effect) -> Rule {
        Rule {
            action: action.into(),
            resource: resource.into(),
            effect,
            caller: None,
            claim: None,
        }
    }

    fn matches(&self, action: &str, resource: &str, caller: Option<&Caller>) -> bool {
        WildMatch::new(&self.action).matches(action)
            && WildMatch::new(&self.resource).matches(resource)
            && self.applies_to(caller)
    }

    /// Whether the rule's caller conditions hold for `caller`.
    fn applies_to(&self, caller: Option<&Caller>) -> bool {
        if self.caller.is_none() && self.claim.is_none() {
            return true;
        }
        let Some(caller) = caller else { return false };
        let named = self
            .caller
            .as_ref()
            .is_none_or(|p| WildMatch::new(p).matches(caller.name()));
        let claimed = self.claim.as_ref().is_none_or(|c| match c.split_once('=') {
            Some((claim, pattern)) => caller.has_claim(claim, pattern),
            None => false,
        });
        named && claimed
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
        self.matching_for(action, resource, None)
    }

    /// The effect of the last rule matching `action` on `resource` for
    /// `caller` (rules naming a caller or a claim match only theirs).
    pub fn matching_for(
        &self,
        action: &str,
        resource: &str,
        caller: Option<&Caller>,
    ) -> Option<Effect> {
        self.0
            .iter()
            .rev()
            .find(|r| r.matches(action, resource, caller))
            .map(|r| r.effect)
    }

    /// Whether a tool stays in the catalog: hidden only when the last rule for
    /// its name with resource `*` denies it (R12, visibility only).
    pub fn is_visible(&self, tool: &str) -> bool {
        self.0
            .iter()
            .rev()
            .find(|r| {
                r.resource == "*" && WildMatch::new(&r.action).matches(tool) && r.applies_to(None)
            })
            .is_none_or(|r| r.effect != Effect::Deny)
    }

    /// Appends a rule.
    pub fn push(&mut self, rule: Rule) {
        self.0.push(rule);
    }
}

/// Rules plus the approver plus what users allowed "always", per session
/// and plugin, kept in the store (R29, R38).
#[derive(Clone, Default)]
pub struct Policy {
    pub(crate) rules: Rules,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// Whose policy this is: the plugin's identity (name and digest), so
    /// two plugins that share a name never share saved answers.
    owner: String,
    /// Where saved answers live; without one, "always" counts as once.
    store: Option<Arc<StoreSlot>>,
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
    /// The host's policy: its rules and approver, answers saved in `store`.
    pub fn new(rules: Rules, approver: Option<Arc<dyn Approver>>, store: Arc<StoreSlot>) -> Policy {
        Policy {
            rules,
            approver,
            owner: String::new(),
            store: Some(store),
        }
    }

    /// This policy for one plugin (`owner` identifies it), with the
    /// plugin's `extra` rules appended (they win over ours).
    pub fn for_plugin(&self, owner: String, extra: &Rules) -> Policy {
        let mut rules = self.rules.clone();
        rules.0.extend(extra.0.iter().cloned());
        Policy {
            rules,
            approver: self.approver.clone(),
            owner,
            store: self.store.clone(),
        }
    }

    /// The store's key of the answers saved for `context`'s session, its
    /// caller (R40) and this plugin, as a JSON array, so no two of them
    /// can collide.
    fn scope(&self, context: &CallContext) -> String {
        match &context.caller {
            None => serde_json::json!([context.session_id, self.owner]),
            Some(c) => serde_json::json!([context.session_id, self.owner, c.name()]),
        }
        .to_string()
    }

    /// The answers saved for `scope`, as allow rules; none when the store
    /// cannot be read (the request then asks again).
    async fn saved(&self, scope: &str) -> Rules {
        let Some(slot) = &self.store else {
            return Rules::default();
        };
        let answers = match slot.get().await {
            Ok(Some(store)) => store.answers(scope).await,
            Ok(None) => return Rules::default(),
            Err(e) => Err(e),
        };
        match answers {
            Ok(answers) => Rules(
                answers
                    .into_iter()
                    .map(|(action, pattern)| Rule::new(action, pattern, Effect::Allow))
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!("cannot read saved permission answers: {e}");
                Rules::default()
            }
        }
    }

    /// Saves "always" answers for `scope`; a store that cannot keep them
    /// means the next such request asks again.
    async fn save(&self, scope: &str, answers: Vec<(String, String)>) {
        let Some(slot) = &self.store else { return };
        let saved = match slot.get().await {
            Ok(Some(store)) => store.save_answers(scope, &answers).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = saved {
            tracing::warn!("cannot save an \"always\" permission answer: {e}");
        }
    }

    /// Evaluates `request`: any deny refuses; any ask goes to the call's
    /// approver, else the host's (no approver refuses); "always" saves the
    /// request's patterns for the session and the plugin that asked.
    pub async fn decide(
        &self,
        request: &PermissionRequest,
        call_approver: Option<&Arc<dyn Approver>>,
    ) -> Result<(), PermissionDenied> {
        self.decide_unmatched(request, call_approver, Effect::Ask)
            .await
    }

    /// As [`Policy::decide`], but a resource no rule matches gets
    /// `unmatched` (an HTTP request within a granted origin is allowed: the
    /// grant is the user's consent). Saved answers turn an "ask" into an
    /// allow, never a deny rule.
    pub async fn decide_unmatched(
        &self,
        request: &PermissionRequest,
        call_approver: Option<&Arc<dyn Approver>>,
        unmatched: Effect,
    ) -> Result<(), PermissionDenied> {
        let denied = |resource: &str| PermissionDenied {
            action: request.action.clone(),
            resource: resource.to_owned(),
        };
        let action = &request.action;
        let mut asking = Vec::new();
        for resource in &request.resources {
            let caller = request.context.caller.as_ref();
            match self
                .rules
                .matching_for(action, resource, caller)
                .unwrap_or(unmatched)
            {
                Effect::Deny => return Err(denied(resource)),
                Effect::Ask => asking.push(resource),
                Effect::Allow => {}
            }
        }
        if asking.is_empty() {
            return Ok(());
        }
        let scope = self.scope(&request.context);
        let saved = self.saved(&scope).await;
        let Some(first) = asking
            .into_iter()
            .find(|r| saved.evaluate(action, r) != Effect::Allow)
        else {
            return Ok(());
        };
        let Some(approver) = call_approver.or(self.approver.as_ref()) else {
            return Err(denied(first));
        };
        match approver.ask(request).await {
            Reply::Once => Ok(()),
            Reply::Always => {
                let answers = request.save.iter().map(|p| (action.clone(), p.clone()));
                self.save(&scope, answers.collect()).await;
                Ok(())
            }
            Reply::Reject => Err(denied(first)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn r40_rules_naming_a_caller_or_a_claim_match_only_those_callers() {
        let claims = |groups: serde_json::Value| {
            let mut claims = serde_json::Map::new();
            claims.insert("groups".into(), groups);
            claims
        };
        let admin = Caller::oauth(
            "https://idp.example",
            "erin",
            claims(json!(["staff", "admins"])),
        );
        let staff = Caller::oauth("https://idp.example", "frank", claims(json!("staff")));
        let by_claim = Rules(vec![Rule {
            claim: Some("groups=admin*".into()),
            ..Rule::new("net", "*", Effect::Allow)
        }]);
        assert_eq!(
            by_claim.matching_for("net", "x", Some(&admin)),
            Some(Effect::Allow)
        );
        assert_eq!(by_claim.matching_for("net", "x", Some(&staff)), None);
        assert_eq!(by_claim.matching_for("net", "x", None), None);
        let by_name = Rules(vec![Rule {
            caller: Some("https://idp.example#f*".into()),
            ..Rule::new("net", "*", Effect::Deny)
        }]);
        assert_eq!(
            by_name.matching_for("net", "x", Some(&staff)),
            Some(Effect::Deny)
        );
        assert_eq!(by_name.matching_for("net", "x", Some(&admin)), None);
        // A rule for some callers never hides a tool from everyone.
        let hide = Rules(vec![Rule {
            caller: Some("*".into()),
            ..Rule::new("echo", "*", Effect::Deny)
        }]);
        assert!(hide.is_visible("echo"));
    }

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
