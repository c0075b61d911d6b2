//! A tool call in flight, as the requests waiting on it see it: started by
//! one request, and for 2026-07-28 clients possibly suspended in a
//! permission question until a retry brings the answer.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::mcp::ask::{McpAsk, Step};
use crate::model::approval::Reply;

/// A call in flight, as the request waiting on it sees it.
pub(crate) struct Started {
    pub(crate) steps: mpsc::Receiver<Step>,
    pub(crate) cancel: CancellationToken,
    pub(crate) legacy: bool,
    pub(crate) output_schema: Option<Value>,
    pub(crate) progress: Option<JoinHandle<()>>,
    pub(crate) ask: Arc<McpAsk>,
}

/// A call suspended in a question, waiting for the client's retry.
pub(crate) struct Pending {
    /// The scope (a session, or all stateless requests) whose retry may
    /// answer it; the handle itself is unguessable.
    pub(crate) session: String,
    pub(crate) reply: oneshot::Sender<Reply>,
    pub(crate) started: Started,
}
