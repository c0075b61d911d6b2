//! A tool call in flight, as the request waiting on it sees it.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ask::{McpAsk, Step};
use crate::progress::Flush;
use crate::sealed::{Answers, Binding};

/// A call in flight, as the request waiting on it sees it.
pub(crate) struct Started {
    pub(crate) steps: mpsc::Receiver<Step>,
    pub(crate) cancel: CancellationToken,
    /// Whether its structured output is sent wrapped in `{"result": …}`.
    pub(crate) wraps_output: bool,
    pub(crate) progress: Option<Flush>,
    pub(crate) ask: Arc<McpAsk>,
    /// What a sealed state of this call is bound to.
    pub(crate) binding: Binding,
    /// The answers it was started with (from a retry's sealed state).
    pub(crate) answers: Answers,
}
