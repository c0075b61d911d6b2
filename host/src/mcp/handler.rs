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
    Implementation, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::facade::location::Location;
use crate::mcp::ask::{AskMode, McpAsk, QUESTION_KEY, Step, elicit_params, reply_of};
use crate::mcp::call::{Pending, Started};
use crate::mcp::output::{self, READ_OUTPUT};
use crate::mcp::progress;
use crate::mcp::results::{self, BUSY};
use crate::mcp::server::{
    MAX_CALLS_IN_FLIGHT, MAX_CALLS_PER_SESSION, PERMISSION_ANSWER_TIMEOUT, Shared,
};
use crate::model::approval::Reply;
use crate::model::call::Call;
use crate::model::context::CallContext;
use crate::model::outcome::{Outcome, Settlement};

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
}

/// Who a request belongs to: the session of its calls, and the scope of the
/// retained outputs it may read.
pub(crate) struct Scope {
    session: String,
    outputs: String,
}

impl Scope {
    fn same(id: String) -> Scope {
        Scope {
            outputs: id.clone(),
            session: id,
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

fn busy(what: &str, limit: usize) -> ErrorData {
    ErrorData::new(
        BUSY,
        format!("{what} already has {limit} tool calls in flight; retry when one has finished"),
        None,
    )
}

impl Handler {
    /// The client's name from its implementation info: the request's own
    /// (2026-07-28) first, else the one it gave when initializing.
    fn agent(context: &RequestContext<RoleServer>) -> String {
        context
            .client_info()
            .map(|info| info.name)
            .unwrap_or_else(|| "unknown".into())
    }

    /// The scope of a request: the MCP session (HTTP), the connection
    /// (stdio), or the session a stateless HTTP client declares. A
    /// stateless request that declares none is a session of its own
    /// ("always" lasts only for it); its retained outputs are readable by
    /// any stateless request that knows their unguessable ids.
    fn scope(&self, context: &RequestContext<RoleServer>) -> Scope {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Scope::same(self.connection.clone());
        };
        let header = parts.headers.get("mcp-session-id");
        if let Some(id) = header.and_then(|v| v.to_str().ok()) {
            return Scope::same(id.to_owned());
        }
        match meta_str(context, SESSION_ID_KEY) {
            Some(id) => Scope::same(format!("client:{id}")),
            None => Scope {
                session: format!("request:{}", uuid::Uuid::new_v4().simple()),
                outputs: "stateless".into(),
            },
        }
    }

    /// Where a request's tools are: the session's own placement when the
    /// server places MCP servers per session, else the served location.
    async fn location(&self, scope: &Scope) -> Location {
        self.shared
            .session_sources
            .location(&self.shared.location, &scope.session)
            .await
    }

    fn call_context(&self, context: &RequestContext<RoleServer>, session: String) -> CallContext {
        CallContext {
            session_id: session,
            agent: Self::agent(context),
            message_id: meta_str(context, MESSAGE_ID_KEY)
                .unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
            call_id: context.id.to_string(),
        }
    }

    /// Takes a slot in the server's and the session's in-flight limits.
    fn slots(&self, session: &str) -> Result<[OwnedSemaphorePermit; 2], ErrorData> {
        if self.shared.draining.is_cancelled() {
            return Err(ErrorData::new(BUSY, "the server is shutting down", None));
        }
        let all = self.shared.in_flight.clone().try_acquire_owned();
        let all = all.map_err(|_| busy("the server", MAX_CALLS_IN_FLIGHT))?;
        let own = self.shared.session_slots(session).try_acquire_owned();
        let own = own.map_err(|_| busy("this session", MAX_CALLS_PER_SESSION))?;
        Ok([all, own])
    }

    /// How this request's client can be asked for permission.
    fn ask_mode(
        context: &RequestContext<RoleServer>,
        legacy: bool,
        steps: &mpsc::Sender<Step>,
    ) -> AskMode {
        // The request's own capabilities (2026-07-28), else those it gave
        // when initializing.
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        match (elicits, legacy) {
            (false, _) => AskMode::Unable,
            (true, false) => AskMode::Retry(steps.clone()),
            (true, true) => AskMode::Elicit(context.peer.clone()),
        }
    }

    /// Starts settling the call in a task of its own, which can outlive this
    /// request while a 2026-07-28 client answers a question.
    fn start(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        scope: &Scope,
        location: &Location,
    ) -> Result<Started, ErrorData> {
        let permits = self.slots(&scope.session)?;
        let snapshot = location.snapshot();
        let legacy = is_legacy(context);
        let output_schema = snapshot
            .tool(&request.name)
            .and_then(|t| t.output_schema())
            .map(|s| s.document().clone());
        let input = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let cancel = self.shared.shutdown.child_token();
        let (steps_tx, steps) = mpsc::channel(1);
        let ask = Arc::new(McpAsk::new(Self::ask_mode(context, legacy, &steps_tx)));
        let mut call = Call::new(
            request.name,
            input,
            self.call_context(context, scope.session.clone()),
        )
        .with_cancel(cancel.clone());
        if self
            .shared
            .ask_clients
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            call = call.with_approver(ask.clone());
        }
        let mut progress = None;
        if let Some(token) = context.meta.get_progress_token() {
            let (forwarder, task) = progress::forward(context.peer.clone(), token);
            call = call.with_events(forwarder);
            progress = Some(task);
        }
        tokio::spawn(async move {
            let settlement = snapshot.settle(call).await;
            let _ = steps_tx.send(Step::Done(Box::new(settlement))).await;
            drop(permits);
        });
        Ok(Started {
            steps,
            cancel,
            legacy,
            output_schema,
            progress,
            ask,
        })
    }

    /// Waits for the call's next step: its outcome, or a question for a
    /// 2026-07-28 client. Cancelling this request cancels the call.
    async fn drive(
        &self,
        mut started: Started,
        scope: &Scope,
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
            Some(Step::Done(settlement)) => self.finish(started, *settlement, scope).await,
            Some(Step::Input(question)) => {
                let handle = uuid::Uuid::new_v4().simple().to_string();
                let mut requests = InputRequests::new();
                let elicit = ElicitRequest::new(elicit_params(question.message));
                requests.insert(QUESTION_KEY.into(), InputRequest::Elicitation(elicit));
                let pending = Pending {
                    session: scope.outputs.clone(),
                    reply: question.reply,
                    started,
                };
                self.suspend(handle.clone(), pending);
                Ok(InputRequiredResult::new(Some(requests), Some(handle)).into())
            }
            None => Err(ErrorData::internal_error(
                "the call ended without an outcome",
                None,
            )),
        }
    }

    /// Keeps a call suspended until the client retries with the answer, or
    /// denies it after [`PERMISSION_ANSWER_TIMEOUT`].
    fn suspend(&self, handle: String, pending: Pending) {
        self.shared.put_pending(handle.clone(), pending);
        let shared = self.shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PERMISSION_ANSWER_TIMEOUT).await;
            if let Some(expired) = shared.take_pending(&handle) {
                let _ = expired.reply.send(Reply::Reject);
            }
        });
    }

    /// A 2026-07-28 retry: the answer for the suspended call, then its next
    /// step.
    async fn resume(
        &self,
        handle: &str,
        responses: Option<InputResponses>,
        scope: &Scope,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let unknown = || {
            ErrorData::invalid_params("unknown or expired requestState: call the tool again", None)
        };
        let pending = self.shared.take_pending(handle).ok_or_else(unknown)?;
        if pending.session != scope.outputs {
            self.shared.put_pending(handle.to_owned(), pending);
            return Err(unknown());
        }
        let answer = responses.as_ref().and_then(|r| r.get(QUESTION_KEY));
        let reply = match answer {
            Some(result) if result["action"] == "accept" => reply_of(result.get("content")),
            _ => Reply::Reject,
        };
        let _ = pending.reply.send(reply);
        self.drive(pending.started, scope, context).await
    }

    /// The result of a settled call, after its last progress notification.
    async fn finish(
        &self,
        started: Started,
        settlement: Settlement,
        scope: &Scope,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(task) = started.progress {
            let _ = tokio::time::timeout(PROGRESS_FLUSH, task).await;
        }
        if let Outcome::Completed(c) = &settlement.outcome {
            for retained in &c.retained {
                let id = output::id_of_reference(&retained.reference);
                self.shared.record_output(&scope.outputs, id);
            }
        }
        let mut result =
            results::call_result(&settlement, started.output_schema.as_ref(), started.legacy)?;
        if result.is_error == Some(true) && started.ask.could_not_ask() {
            result.content.push(ContentBlock::text(
                "This client can answer permission questions neither by elicitation nor by retrying: start `toolhost serve` with an --allow rule for this action (e.g. --allow 'ACTION:PATTERN').",
            ));
        }
        Ok(result.into())
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
        self.shared.add_peer(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let legacy = is_legacy(&context);
        let snapshot = self.location(&self.scope(&context)).await.snapshot();
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
        if request.name == READ_OUTPUT {
            let arguments = Value::Object(request.arguments.unwrap_or_default());
            return output::read_output(&self.shared, &scope.outputs, &arguments).map(Into::into);
        }
        if let Some(handle) = request.request_state.clone() {
            return self
                .resume(&handle, request.input_responses, &scope, &context)
                .await;
        }
        let location = self.location(&scope).await;
        let started = self.start(request, &context, &scope, &location)?;
        self.drive(started, &scope, &context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let scope = self.scope(&context);
        Ok(ListResourcesResult::with_all_items(output::resources(
            &self.shared,
            &scope.outputs,
        )))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let scope = self.scope(&context);
        let contents = output::read_resource(&self.shared, &scope.outputs, &request.uri)?;
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
