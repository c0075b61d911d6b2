//! A bridged tool's executor: asks permission `mcp` on `<server>/<tool>`,
//! sends `tools/call` with a progress token, and settles on the answer, the
//! call's cancellation or its deadline, whichever comes first; a call that
//! stops early tells the server without waiting for it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};

use crate::bridge::convert;
use crate::bridge::shared::Shared;
use toolhost::PluginInfo;
use toolhost::ToolFailure;
use toolhost::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation};
use toolhost::permission::PermissionRequest;
use toolhost::{Interruption, outcome::DefectKind};

/// What a bridged call reports instead of fuel and memory it cannot see.
const UNMETERED: &str =
    "fuel and memory are not metered: the tool ran in the MCP server, outside Toolhost's sandbox";

/// One tool of a bridged server.
pub(super) struct BridgedTool {
    pub(super) shared: Arc<Shared>,
    /// The tool's name on the server.
    pub(super) remote: String,
}

impl Executor for BridgedTool {
    fn execute<'a>(&'a self, inv: Invocation<'a>) -> ExecutionFuture<'a> {
        Box::pin(async move {
            // Wall time and a tripped deadline are all a remote call reports.
            let mut execution = Execution::early(self.run(&inv).await, inv.started);
            execution.warnings.push(UNMETERED.to_owned());
            execution
        })
    }

    fn plugin(&self) -> Option<&PluginInfo> {
        Some(&self.shared.info)
    }
}

impl BridgedTool {
    async fn run(&self, inv: &Invocation<'_>) -> Ended {
        let asked = tokio::select! {
            biased;
            () = inv.cancel.cancelled() => return Ended::Interrupted(Interruption::Cancelled),
            () = tokio::time::sleep_until(inv.deadline.into()) => return Ended::Interrupted(Interruption::Deadline),
            asked = self.permission(inv) => asked,
        };
        if let Err(failure) = asked {
            return Ended::ToolFailure(failure);
        }
        let Some(peer) = self.shared.peer() else {
            return self.server_failed("is not connected (it exited or the connection dropped; the bridge is reconnecting)");
        };
        let mut params = CallToolRequestParams::new(self.remote.clone());
        params.arguments = convert::arguments(inv.input.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => return self.service_error(e),
        };
        let _route = self
            .shared
            .routes
            .route(handle.progress_token.clone(), inv.progress.clone());
        let id = handle.id.clone();
        tokio::select! {
            biased;
            () = inv.cancel.cancelled() => self.abandon(id, Interruption::Cancelled),
            () = tokio::time::sleep_until(inv.deadline.into()) => self.abandon(id, Interruption::Deadline),
            answer = handle.await_response() => match answer {
                Ok(ServerResult::CallToolResult(result)) => match convert::response(result) {
                    Ok(response) => Ended::Response(response),
                    Err(failure) => Ended::ToolFailure(failure),
                },
                Ok(_) => self.server_failed("answered tools/call with something other than a tool result (an input request or a task, which the bridge does not support)"),
                Err(e) => self.service_error(e),
            },
        }
    }

    /// Permission `mcp` on `<server>/<tool>`, before anything is sent.
    async fn permission(&self, inv: &Invocation<'_>) -> Result<(), ToolFailure> {
        let resource = format!("{}/{}", self.shared.config.name, self.remote);
        let request = PermissionRequest {
            context: inv.context.clone(),
            plugin: self.shared.config.name.clone(),
            tool: inv.tool_name.to_owned(),
            action: "mcp".into(),
            resources: vec![resource.clone()],
            save: vec![resource],
            metadata: None,
        };
        self.shared
            .policy
            .decide(&request, inv.approver.as_ref())
            .await
            .map_err(|denied| ToolFailure::new(denied.to_string()))
    }

    /// Settles now and tells the server, without waiting for it.
    fn abandon(&self, id: RequestId, why: Interruption) -> Ended {
        if let Some(peer) = self.shared.peer() {
            let notification = CancelledNotification::new(CancelledNotificationParam::new(
                Some(id),
                Some(why.to_string()),
            ));
            tokio::spawn(async move {
                let _ = peer.send_notification(notification.into()).await;
            });
        }
        Ended::Interrupted(why)
    }

    fn service_error(&self, error: ServiceError) -> Ended {
        match error {
            ServiceError::TransportClosed => {
                self.server_failed("disconnected during the call (did it exit?)")
            }
            other => self.server_failed(&format!("failed the call: {other}")),
        }
    }

    fn server_failed(&self, what: &str) -> Ended {
        Ended::Defect(DefectKind::McpServer(format!(
            "MCP server `{}` {what}",
            self.shared.config.name
        )))
    }
}
