//! The MCP handler: `tools/list`, `tools/call` (settled through the same
//! pipeline as any call), the retained-output resources, and tool-list
//! subscriptions. One handler per stdio connection or HTTP session; the
//! state they share lives in [`Shared`].

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ContentBlock, ElicitRequest, ErrorData,
    Implementation, InputRequest, InputRequests, InputRequiredResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::admission::{Admitted, Settling};
use crate::ask::{AskMode, McpAsk, QUESTION_KEY, Step, elicit_params, reply_of};
use crate::bindings::Credential;
use crate::call::Started;
use crate::http::auth::{Access, Authenticated};
use crate::output::{self, READ_OUTPUT};
use crate::progress;
use crate::results::{self, INTERRUPTED_ERROR_CODE};
use crate::sealed::{Answers, Binding};
use crate::server::{HandlerMark, Shared};
use toolhost::Call;
use toolhost::CallContext;
use toolhost::Caller;
use toolhost::Location;
use toolhost::permission::Reply;
use toolhost::registry::{SnapshotOptions, ToolFilter};
use toolhost::{Interruption, Outcome, Settlement};

/// The `_meta` key a client may set to name the assistant message of a call.
pub const MESSAGE_ID_KEY: &str = "io.toolhost/message-id";

/// The `_meta` key a 2026-07-28 HTTP client may set to group its stateless
/// requests into one session (retained outputs, "always" answers).
pub const SESSION_ID_KEY: &str = "io.toolhost/session-id";

/// How long a settled call waits for its last progress notification to go
/// out before the result does.
const PROGRESS_FLUSH: Duration = Duration::from_secs(1);

/// The protocol versions served: both eras clients speak.
const VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) shared: Arc<Shared>,
    /// This connection's id: the session of stdio calls.
    pub(crate) connection: String,
    /// What this handler leaves in the shared state, forgotten with it.
    pub(crate) mark: Arc<HandlerMark>,
    /// Where calls still running after their first poll move, when this
    /// handler's requests run on a front door's thread of their own.
    offload: Option<Handle>,
}

/// Who a request belongs to: the session of its calls, and the scope of the
/// retained outputs it may read.
pub(crate) struct RequestScope {
    session: String,
    outputs: String,
    /// The caller's credential, by its stable name.
    caller: String,
    /// The caller its token names, recorded with its calls (R40).
    who: Option<Caller>,
}

impl RequestScope {
    fn same(id: String, caller: &Credential, who: Option<Caller>) -> RequestScope {
        RequestScope {
            outputs: id.clone(),
            session: id,
            caller: caller.name(),
            who,
        }
    }
}

/// Whether the request's client speaks an era before 2026-07-28.
fn is_legacy(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_none_or(|v| v.as_str() < ProtocolVersion::V_2026_07_28.as_str())
}

fn meta_str(context: &RequestContext<RoleServer>, key: &str) -> Option<String> {
    context
        .meta
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The snapshot options of a request: the tools its token's scopes let it
/// call (R40), which is all it may see and all its Code Mode programs may
/// call; every tool without OAuth.
fn snapshot_options(context: &RequestContext<RoleServer>) -> SnapshotOptions {
    let parts = context.extensions.get::<http::request::Parts>();
    let access = parts.and_then(|p| {
        Some((
            p.extensions.get::<Arc<Access>>()?.clone(),
            p.extensions.get::<Authenticated>()?.scopes.clone(),
        ))
    });
    SnapshotOptions {
        callable: access.map(|(access, scopes)| {
            ToolFilter::new(move |tool| access.missing(&scopes, tool).is_empty())
        }),
        ..SnapshotOptions::default()
    }
}

/// The 2025-era session a request names, if it names one.
fn session_header(parts: &http::request::Parts) -> Option<&str> {
    parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
}

/// The reply to a call the server cancelled because it is stopping: the
/// client did not cancel it, so it must hear why it ended.
fn stopping(settlement: &Settlement) -> ErrorData {
    ErrorData::new(
        INTERRUPTED_ERROR_CODE,
        format!(
            "The server is stopping: the call of `{}` was cancelled before it finished. Retry it after the server restarts (or on another replica).",
            settlement.tool
        ),
        Some(
            serde_json::json!({"status": "interrupted", "reason": "cancelled", "server": "stopping"}),
        ),
    )
}

impl Handler {
    /// A handler for a new stdio connection or HTTP session.
    pub(crate) fn new(shared: Arc<Shared>, connection: String) -> Handler {
        Handler {
            mark: shared.mark(),
            shared,
            connection,
            offload: None,
        }
    }

    /// Moves calls still running after their first poll to `runtime`.
    pub(crate) fn offloading_to(mut self, runtime: Handle) -> Handler {
        self.offload = Some(runtime);
        self
    }

    /// The client's name from its implementation info: the request's own
    /// (2026-07-28) first, else the one it gave when initializing.
    fn agent(context: &RequestContext<RoleServer>) -> String {
        context
            .client_info()
            .map(|info| info.name)
            .unwrap_or_else(|| "unknown".into())
    }

    /// The scope of a request: the MCP session (2025-era HTTP), the
    /// connection (stdio), or the session a stateless HTTP client declares,
    /// within its credential's. A stateless request that declares none is a
    /// session of its own ("always" lasts only for it); its retained outputs
    /// are readable by the same credential's stateless requests that know
    /// their unguessable ids. A 2026-07-28 request never resolves a 2025
    /// session from its header.
    fn scope(&self, context: &RequestContext<RoleServer>) -> RequestScope {
        let anonymous = Credential::anonymous();
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return RequestScope::same(self.connection.clone(), &anonymous, None);
        };
        let credential = parts.extensions.get::<Credential>().unwrap_or(&anonymous);
        let who = parts.extensions.get::<Caller>().cloned();
        if is_legacy(context)
            && let Some(id) = session_header(parts)
        {
            self.mark.serves(id);
            return RequestScope::same(id.to_owned(), credential, who);
        }
        match meta_str(context, SESSION_ID_KEY) {
            Some(id) => RequestScope::same(credential.declared_session(&id), credential, who),
            None => RequestScope {
                session: format!("request:{}", uuid::Uuid::new_v4().simple()),
                outputs: credential.stateless_outputs(),
                caller: credential.name(),
                who,
            },
        }
    }

    /// Where a request's tools are: the session's own placement when the
    /// server places MCP servers per session, else the served location.
    async fn location(&self, scope: &RequestScope) -> Location {
        self.shared
            .session_sources
            .location(&self.shared.location, &scope.session)
            .await
    }

    /// The call of `tool`, under the message id the client named, else
    /// one minted for it.
    fn call(
        &self,
        tool: impl Into<String>,
        input: String,
        context: &RequestContext<RoleServer>,
        scope: &RequestScope,
    ) -> Call {
        let message = meta_str(context, MESSAGE_ID_KEY);
        let minted = message.is_none();
        let mut ids = CallContext::new(
            scope.session.clone(),
            Self::agent(context),
            message.unwrap_or_default(),
            context.id.to_string(),
        );
        ids.caller = scope.who.clone();
        if minted {
            Call::minted(tool, input, ids)
        } else {
            Call::new(tool, input, ids)
        }
    }

    /// How this request's client can be asked for permission.
    fn ask_mode(
        context: &RequestContext<RoleServer>,
        legacy: bool,
        steps: &mpsc::Sender<Step>,
        answers: Answers,
    ) -> AskMode {
        // The request's own capabilities (2026-07-28), else those it gave
        // when initializing.
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        match (elicits, legacy) {
            (false, _) => AskMode::Unable,
            (true, false) => AskMode::Retry(steps.clone(), answers),
            (true, true) => AskMode::Elicit(context.peer.clone()),
        }
    }

    /// The call, ready to settle: what its request waits on, and the work
    /// of settling it, which that request polls (see [`Settling`]).
    fn start(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        scope: &RequestScope,
        location: &Location,
        answers: Answers,
    ) -> Result<(Started, Settling), ErrorData> {
        let admitted = self.shared.admission.admit(&scope.session)?;
        let arguments = request.arguments.unwrap_or_default();
        let binding = Binding::new(&scope.caller, &scope.outputs, &request.name, &arguments);
        let snapshot = location.snapshot_with(&snapshot_options(context));
        let legacy = is_legacy(context);
        let output_schema = snapshot.tool(&request.name).and_then(|t| t.output_schema());
        let wraps_output = results::wraps_output(output_schema.map(|s| s.document()), legacy);
        let input = Value::Object(arguments).to_string();
        let cancel = self.shared.admission.stopping.child_token();
        let (steps_tx, steps) = mpsc::channel(1);
        let mode = Self::ask_mode(context, legacy, &steps_tx, answers.clone());
        let ask = Arc::new(McpAsk::new(mode));
        let mut call = self
            .call(request.name, input, context, scope)
            .with_cancel(cancel.clone())
            .with_output_scope(scope.outputs.clone());
        if self
            .shared
            .ask_clients
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            call = call.with_approver(ask.clone());
        }
        let mut progress = None;
        if let Some(token) = context.meta.get_progress_token() {
            let (forwarder, flush) = progress::forward(context.peer.clone(), token);
            call = call.with_events(forwarder);
            progress = Some(flush);
        }
        let admission = self.shared.admission.clone();
        let task_cancel = cancel.clone();
        let work = async move {
            let step = match admitted.slot(&task_cancel).await {
                Some(slot) => {
                    let settlement = snapshot.settle(call).await;
                    admission.settled(&settlement);
                    drop((slot, admitted));
                    Step::Done(Box::new(settlement))
                }
                None => Step::Refused,
            };
            let _ = steps_tx.send(step).await;
        };
        let settling = self.shared.admission.settling(work, self.offload.clone());
        let started = Started {
            steps,
            cancel,
            wraps_output,
            progress,
            ask,
            binding,
            answers,
        };
        Ok((started, settling))
    }

    /// Settles the call while waiting for its reply.
    async fn drive(
        &self,
        (started, settling): (Started, Settling),
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Settling first: a call that ends within one poll has its reply
        // read in the same poll, so its task does not wake itself and go
        // back to tokio's queue (which wakes an idle worker to share it).
        let ((), reply) = tokio::join!(biased; settling, self.reply(started, context));
        reply
    }

    /// Waits for the call's next step: its outcome, or a question for a
    /// 2026-07-28 client. Cancelling this request cancels the call.
    async fn reply(
        &self,
        mut started: Started,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let step = tokio::select! {
            step = started.steps.recv() => step,
            () = context.ct.cancelled() => {
                started.cancel.cancel();
                started.steps.recv().await
            }
        };
        match step {
            Some(Step::Done(settlement)) => self.finish(started, *settlement).await,
            Some(Step::Refused) => Err(Admitted::refusal()),
            Some(Step::Input(question)) => {
                // Nothing waits between requests: this run stops here, and
                // the retry re-runs the call with the answer (R39).
                started.cancel.cancel();
                // Its outcome (interrupted) is recorded before the answer.
                while let Some(Step::Input(_)) = started.steps.recv().await {}
                let state = self.shared.state_keys().ask(
                    &started.binding,
                    &started.answers,
                    &question.fingerprint,
                );
                let mut requests = InputRequests::new();
                let elicit = ElicitRequest::new(elicit_params(question.message));
                requests.insert(QUESTION_KEY.into(), InputRequest::Elicitation(elicit));
                Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
            }
            None => Err(ErrorData::internal_error(
                "the call ended without an outcome",
                None,
            )),
        }
    }

    /// A 2026-07-28 retry: its sealed state opened and checked against
    /// this call, then the call run again from the start with every
    /// answer so far.
    async fn resume(
        &self,
        mut request: CallToolRequestParams,
        state: &str,
        scope: &RequestScope,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let binding = Binding::new(&scope.caller, &scope.outputs, &request.name, &arguments);
        let responses = request.input_responses.take();
        let answer = responses.as_ref().and_then(|r| r.get(QUESTION_KEY));
        let reply = match answer {
            Some(result) if result["action"] == "accept" => reply_of(result.get("content")),
            _ => Reply::Reject,
        };
        let answers = self
            .shared
            .state_keys()
            .answered(state, &binding, reply)
            .map_err(|refused| ErrorData::invalid_params(refused.to_string(), None))?;
        self.shared.loaded().await;
        let location = self.location(scope).await;
        let started = self.start(request, context, scope, &location, answers)?;
        self.drive(started, context).await
    }

    /// The result of a settled call, after its last progress notification.
    async fn finish(
        &self,
        started: Started,
        settlement: Settlement,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(flush) = started.progress {
            flush.wait(PROGRESS_FLUSH).await;
        }
        if let Outcome::Interrupted {
            reason: Interruption::Cancelled,
        } = settlement.outcome
            && self.shared.admission.stopping.is_cancelled()
        {
            return Err(stopping(&settlement));
        }
        let mut result = results::call_result(&settlement, started.wraps_output)?;
        if result.is_error == Some(true) && started.ask.could_not_ask() {
            result.content.push(ContentBlock::text(
                "This client can answer permission questions neither by elicitation nor by retrying: start `toolhost serve` with an --allow rule for this action (e.g. --allow 'ACTION:PATTERN').",
            ));
        }
        Ok(result.into())
    }

    /// A `tools/call` in its request's scope.
    async fn call_in_scope(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        scope: RequestScope,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == READ_OUTPUT {
            let arguments = Value::Object(request.arguments.unwrap_or_default());
            return output::read_output(&self.shared, &scope.outputs, &arguments)
                .await
                .map(Into::into);
        }
        if let Some(state) = request.request_state.take() {
            return self.resume(request, &state, &scope, &context).await;
        }
        self.shared.loaded().await;
        let location = self.location(&scope).await;
        let started = self.start(request, &context, &scope, &location, Answers::default())?;
        self.drive(started, &context).await
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools from WebAssembly plugins, each call isolated and bounded. When a result says output was omitted, read the rest with `read_output`.",
            )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(VERSIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(id) = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(session_header)
        {
            self.mark.serves(id);
        }
        self.shared.add_peer(&self.mark, context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let legacy = is_legacy(&context);
        self.shared.loaded().await;
        let location = self.location(&self.scope(&context)).await;
        let snapshot = location.snapshot_with(&snapshot_options(&context));
        let mut tools: Vec<_> = snapshot
            .definitions()
            .iter()
            .filter(|d| d.name != READ_OUTPUT)
            .map(|d| results::tool(d, legacy))
            .collect();
        tools.push(output::read_output_tool());
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let scope = self.scope(&context);
        // What is logged during the call says whose it is (R40).
        let span = tracing::debug_span!(
            "call",
            tool = %request.name,
            caller = scope.who.as_ref().map_or("", |c| c.name()),
        );
        // Boxed, as are the other handlers' bodies below: rmcp moves each
        // request's future, sized for its largest handler, into a task of
        // its own, so inline bodies made every request copy kilobytes.
        Box::pin(self.call_in_scope(request, context, scope).instrument(span)).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let scope = self.scope(&context);
        Ok(ListResourcesResult::with_all_items(
            Box::pin(output::resources(&self.shared, &scope.outputs)).await?,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let scope = self.scope(&context);
        let read = output::read_resource(&self.shared, &scope.outputs, &request.uri);
        let contents = Box::pin(read).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        Box::pin(self.forward_changes(subscription)).await
    }
}

impl Handler {
    /// Tells a subscription of tool-list changes until it ends.
    async fn forward_changes(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.shared.tools_changed.subscribe();
        loop {
            tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                change = changes.recv() => {
                    if matches!(change, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return Ok(());
                    }
                    if subscription.accepted().tools_list_changed == Some(true)
                        && subscription.sink().notify_tool_list_changed().await.is_err()
                    {
                        return Ok(());
                    }
                }
            }
        }
    }
}
