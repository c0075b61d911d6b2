//! Permission questions asked of the MCP client (R27, R29): an elicitation
//! for a 2025-era client that declared the capability, an input-required
//! result with a sealed state (the retry re-runs the call with the answer)
//! for a 2026-07-28 client, else a denial with a hint.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::Peer;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::sealed::{Answers, fingerprint};
use toolhost::Settlement;
use toolhost::permission::{Approver, PermissionRequest, Reply};

/// The key of the permission question in an input-required result.
pub(crate) const QUESTION_KEY: &str = "permission";

/// What a call in flight reports to the request waiting on it.
pub(crate) enum Step {
    /// A permission question for the client.
    Input(Question),
    /// The call settled.
    Done(Box<Settlement>),
    /// The call got none of the server's slots in time and did not run.
    Refused,
}

/// A question and where its answer goes.
pub(crate) struct Question {
    pub(crate) message: String,
    /// Which question it is, for the answer in the retry's sealed state.
    pub(crate) fingerprint: String,
}

/// How this client can be asked.
pub(crate) enum AskMode {
    /// `elicitation/create` on the peer (2025 clients with the capability).
    Elicit(Peer<RoleServer>),
    /// An input-required result, answered by a retry (2026-07-28 clients)
    /// that carries the answers given so far.
    Retry(mpsc::Sender<Step>, Answers),
    /// Neither: questions are denied.
    Unable,
}

/// The approver of one MCP call.
pub(crate) struct McpAsk {
    mode: AskMode,
    /// Set when a question was denied because the client cannot be asked.
    unable: AtomicBool,
}

impl McpAsk {
    pub(crate) fn new(mode: AskMode) -> McpAsk {
        McpAsk {
            mode,
            unable: AtomicBool::new(false),
        }
    }

    /// Whether a question was denied only because nobody could be asked.
    pub(crate) fn could_not_ask(&self) -> bool {
        self.unable.load(Ordering::Relaxed)
    }
}

impl Approver for McpAsk {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        let message = question(request);
        Box::pin(async move {
            match &self.mode {
                AskMode::Elicit(peer) => elicit(peer, message).await,
                AskMode::Retry(steps, answers) => {
                    if let Some(reply) = answers.to(request) {
                        return reply;
                    }
                    if !answers.room() {
                        return Reply::Reject;
                    }
                    let fingerprint = fingerprint(request);
                    let asked = Step::Input(Question {
                        message,
                        fingerprint,
                    });
                    // The request ends with the question and cancels this
                    // run; the retry runs the call again.
                    if steps.send(asked).await.is_ok() {
                        std::future::pending::<()>().await;
                    }
                    Reply::Reject
                }
                AskMode::Unable => {
                    self.unable.store(true, Ordering::Relaxed);
                    Reply::Reject
                }
            }
        })
    }
}

/// The question, for a person: who asks, for what, and exactly what
/// "always" would allow (R29).
fn question(request: &PermissionRequest) -> String {
    let mut text = format!(
        "Plugin `{}`, tool `{}`, asks to `{}`: {}.",
        request.plugin,
        request.tool,
        request.action,
        request.resources.join(", ")
    );
    let broader = request.broader_saves();
    if request.save.is_empty() {
        text.push_str(" Answering \"always\" saves nothing beyond this request.");
    } else {
        let patterns: Vec<String> = request
            .save
            .iter()
            .map(|p| match (p.as_str(), broader.contains(&p.as_str())) {
                ("*", _) => "* (ANY resource)".to_owned(),
                (p, true) => format!("{p} (broader than this request)"),
                (p, false) => p.to_owned(),
            })
            .collect();
        text.push_str(&format!(
            " Answering \"always\" allows `{}` on {} for the rest of this session.",
            request.action,
            patterns.join(", ")
        ));
    }
    text
}

/// The form every question uses: one choice.
pub(crate) fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "title": "Allow?",
                "enum": ["once", "always", "reject"]
            }
        },
        "required": ["answer"]
    })
}

/// The elicitation request of a question.
pub(crate) fn elicit_params(message: String) -> ElicitRequestParams {
    let requested_schema: ElicitationSchema =
        serde_json::from_value(answer_schema()).expect("the answer schema is a valid form");
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

async fn elicit(peer: &Peer<RoleServer>, message: String) -> Reply {
    match peer.create_elicitation(elicit_params(message)).await {
        Ok(result) if result.action == ElicitationAction::Accept => {
            reply_of(result.content.as_ref())
        }
        _ => Reply::Reject,
    }
}

/// The reply an accepted form carries: `{"answer": "once"|"always"|...}`.
pub(crate) fn reply_of(content: Option<&Value>) -> Reply {
    match content.and_then(|c| c["answer"].as_str()) {
        Some("once") => Reply::Once,
        Some("always") => Reply::Always,
        _ => Reply::Reject,
    }
}
