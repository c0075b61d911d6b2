//! MCP over stdin and stdout: one client per process.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::mcp::handler::Handler;
use crate::mcp::server::{McpServer, ServeError};

impl McpServer {
    /// Serves one client over stdin and stdout until it disconnects or
    /// `stop` fires; then lets calls in flight finish within `grace` and
    /// cancels the rest. Nothing but protocol goes to stdout.
    pub async fn serve_stdio(
        &self,
        stop: CancellationToken,
        grace: Duration,
    ) -> Result<(), ServeError> {
        use rmcp::ServiceExt as _;

        let handler = Handler {
            shared: self.shared.clone(),
            connection: format!("stdio-{}", uuid::Uuid::new_v4().simple()),
        };
        let service = handler
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        let cancel = service.cancellation_token();
        tokio::select! {
            ended = service.waiting() => {
                ended.map_err(|e| ServeError::Transport(e.to_string()))?;
            }
            () = stop.cancelled() => {
                self.shut_down(grace).await;
                cancel.cancel();
            }
        }
        Ok(())
    }
}
