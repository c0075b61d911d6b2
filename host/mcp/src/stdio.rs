//! MCP over stdin and stdout: one client per process. Every incoming line
//! is bounded; one too large to read is answered, never left unanswered.

mod decode;
mod head;
mod lines;
mod pipes;

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::handler::Handler;
use crate::server::{McpServer, ServeError};

use decode::{Decoded, decode};
use head::Head;
use lines::{BoundedLines, Oversized};
use pipes::{Input, Output};

/// The largest message (one line) read from stdin: rmcp's own line limit,
/// which matches its HTTP client's event limit, so what one transport
/// carries the other does too.
pub const MAX_STDIO_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

impl McpServer {
    /// Serves one client over stdin and stdout until it disconnects or
    /// `stop` fires; then lets calls in flight finish within `grace`,
    /// cancels the rest and returns once each has its outcome (and, on a
    /// stop, its reply). Nothing but protocol goes to stdout.
    ///
    /// The protocol runs on a thread of its own (the front door), where a
    /// call that ends in its first poll (up to one fuel yield of a tool's
    /// code, then its outcome recorded) settles without a hand-off between
    /// threads; a call still running after it moves to the workers of the
    /// runtime this is called on, so calls that take time run in parallel.
    pub async fn serve_stdio(
        &self,
        stop: CancellationToken,
        grace: Duration,
    ) -> Result<(), ServeError> {
        let front = FrontDoor::start()?;
        let tools = Handle::current();
        let server = self.clone();
        let served = front
            .handle()
            .spawn(async move { server.serve_stdio_here(stop, grace, tools).await });
        served
            .await
            .map_err(|e| ServeError::Transport(format!("the stdio front door failed: {e}")))?
    }

    /// [`McpServer::serve_stdio`] on the front door's thread; calls still
    /// running after their first poll move to `tools`.
    async fn serve_stdio_here(
        &self,
        stop: CancellationToken,
        grace: Duration,
        tools: Handle,
    ) -> Result<(), ServeError> {
        use rmcp::ServiceExt as _;

        let handler = Handler::new(
            self.shared.clone(),
            format!("stdio-{}", uuid::Uuid::new_v4().simple()),
        )
        .offloading_to(tools);
        let service = handler
            .serve(BoundedStdio::new())
            .await
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        let cancel = service.cancellation_token();
        // A stop lets the calls end with their outcomes first, then ends the
        // service, which still sends the replies it holds.
        let stopping = async {
            stop.cancelled().await;
            self.shut_down(grace).await;
            cancel.cancel();
            std::future::pending::<()>().await;
        };
        let ended = tokio::select! {
            ended = service.waiting() => ended,
            () = stopping => unreachable!("stopping never ends"),
        };
        // The client may have left with calls running: they are cancelled
        // with it, and their outcomes recorded before this returns.
        self.shut_down(Duration::ZERO).await;
        ended.map_err(|e| ServeError::Transport(e.to_string()))?;
        Ok(())
    }
}

/// The stdio front door's runtime: one worker thread, so the tasks rmcp
/// spawns for each request and reply never wake another; a worker of a
/// multi-threaded runtime, so a store commit may run on it in place.
/// Shut down without waiting when dropped, even inside async code.
struct FrontDoor {
    /// Taken only when dropped.
    runtime: Option<Runtime>,
}

impl FrontDoor {
    fn start() -> Result<FrontDoor, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolhost-stdio")
            .enable_all()
            .build()
            .map_err(|e| {
                ServeError::Transport(format!("cannot start the stdio front door's thread: {e}"))
            })?;
        Ok(FrontDoor {
            runtime: Some(runtime),
        })
    }

    fn handle(&self) -> &Handle {
        self.runtime
            .as_ref()
            .map(Runtime::handle)
            .expect("the runtime is taken only when dropped")
    }
}

impl Drop for FrontDoor {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// MCP over bounded lines of stdin and rmcp's writer to stdout, answering
/// each line that was too long: a request gets an error reply; a response
/// to one of our requests (an elicitation's answer) fails that request at
/// once.
struct BoundedStdio {
    stdin: StdinLines,
    write: AsyncRwTransport<RoleServer, tokio::io::Empty, Output>,
    oversized: mpsc::UnboundedReceiver<Oversized>,
}

impl BoundedStdio {
    fn new() -> BoundedStdio {
        let (tx, oversized) = mpsc::unbounded_channel();
        BoundedStdio {
            stdin: StdinLines {
                read: BufReader::new(BoundedLines::new(
                    pipes::input(),
                    MAX_STDIO_MESSAGE_BYTES,
                    tx,
                )),
                line: Vec::new(),
            },
            write: AsyncRwTransport::new_server(tokio::io::empty(), pipes::output()),
            oversized,
        }
    }
}

/// Stdin, a line at a time.
struct StdinLines {
    /// Every line this yields fits the bound (or was cut to it).
    read: BufReader<BoundedLines<Input>>,
    /// The line being read; a read cancelled part-way leaves its bytes here.
    line: Vec<u8>,
}

impl StdinLines {
    /// What the next line carries; `None` once stdin ends (a last line
    /// without its newline is incomplete, so nothing) or fails. Safe to
    /// cancel: `read_until` keeps what it read in `line`.
    async fn next(&mut self) -> Option<Decoded> {
        if let Err(e) = self.read.read_until(b'\n', &mut self.line).await {
            tracing::error!("cannot read stdin: {e}");
            return None;
        }
        if !self.line.ends_with(b"\n") {
            return None;
        }
        let decoded = decode(&self.line);
        self.line.clear();
        Some(decoded)
    }
}

/// The answer to a line that was JSON but no message, as rmcp answers it.
fn invalid_request() -> TxJsonRpcMessage<RoleServer> {
    TxJsonRpcMessage::<RoleServer>::error(ErrorData::invalid_request("Invalid request", None), None)
}

impl Transport<RoleServer> for BoundedStdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let dropped = tokio::select! {
                biased;
                Some(dropped) = self.oversized.recv() => dropped,
                line = self.stdin.next() => match line? {
                    Decoded::Message(message) => return Some(message),
                    Decoded::Dropped => continue,
                    Decoded::Invalid => {
                        self.write.send(invalid_request()).await.ok()?;
                        continue;
                    }
                },
            };
            match dropped.head {
                Head::Request(id) => {
                    let reply =
                        TxJsonRpcMessage::<RoleServer>::error(too_large(dropped.bytes), Some(id));
                    if self.write.send(reply).await.is_err() {
                        return None;
                    }
                }
                Head::Response(id) => return Some(failed_response(dropped.bytes, id)),
                Head::Other => tracing::warn!(
                    "dropped a stdio message of {} bytes (a notification, or not JSON-RPC): {}",
                    dropped.bytes,
                    limit_text()
                ),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.write.close()
    }
}

fn limit_text() -> String {
    format!(
        "one message may have at most {} MiB (MAX_STDIO_MESSAGE_BYTES)",
        MAX_STDIO_MESSAGE_BYTES >> 20
    )
}

/// The error a request too long to read is answered with.
fn too_large(bytes: u64) -> ErrorData {
    tracing::warn!(
        "answered a stdio request of {} bytes with an error: {}",
        bytes,
        limit_text()
    );
    ErrorData::invalid_request(
        format!(
            "the request is {bytes} bytes, too large to read: {}; send smaller arguments",
            limit_text()
        ),
        Some(json!({"bytes": bytes, "limit": MAX_STDIO_MESSAGE_BYTES})),
    )
}

/// What the server's request gets in place of a response too long to read.
fn failed_response(bytes: u64, id: RequestId) -> RxJsonRpcMessage<RoleServer> {
    tracing::warn!(
        "the client's response of {bytes} bytes was too large to read: {}",
        limit_text()
    );
    JsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "the client's response was too large to read: {}",
                limit_text()
            ),
            None,
        ),
        Some(id),
    )
}
