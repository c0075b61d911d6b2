//! The seam between settlement and whatever runs a tool: settlement hands an
//! [`Executor`] an [`Invocation`] and gets back an [`Execution`]. Wasm
//! plugins and native Rust tools implement it in the runtime.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::approval::Approver;
use crate::budget::{Budget, Limit, Usage};
use crate::content::{ToolFailure, ToolResponse};
use crate::context::CallContext;
use crate::event::CallEvents;
use crate::outcome::{DefectKind, HostFault, Interruption, Logs};
use crate::plugin::PluginInfo;

/// What an executor needs to run one call.
#[allow(missing_debug_implementations)] // holds a `dyn Approver`
pub struct Invocation<'a> {
    /// The effective name the model used.
    pub tool_name: &'a str,
    /// The input, already validated against the input schema.
    pub input: Value,
    /// The same input as the JSON text the model sent.
    pub input_text: &'a str,
    /// The call's identity.
    pub context: &'a CallContext,
    /// Where the call's progress and audited requests go.
    pub progress: CallEvents,
    /// The call's effective budget.
    pub budget: Budget,
    /// The largest machine output (JSON text) the result may carry: an
    /// executor may refuse a larger one before parsing it.
    pub max_machine_output: usize,
    /// When settlement began: wall time counts from here.
    pub started: Instant,
    /// When the call's deadline passes: settlement started the clock, so
    /// time spent waiting for a slot counts.
    pub deadline: Instant,
    /// Cancelled when the caller gives up on the call.
    pub cancel: &'a CancellationToken,
    /// The call's own approver, over the host's.
    pub approver: Option<Arc<dyn Approver>>,
}

/// How execution ended, before settlement checks and bounds the result.
#[derive(Debug)]
pub enum Ended {
    /// The tool returned a response.
    Response(ToolResponse),
    /// The tool reported a model-visible failure.
    ToolFailure(ToolFailure),
    /// Cancellation, the deadline or fuel stopped it.
    Interrupted(Interruption),
    /// The guest misbehaved.
    Defect(DefectKind),
    /// The host could not run it; not the guest's doing.
    HostFault(HostFault),
}

/// An ended execution with what it consumed and printed.
#[derive(Debug)]
pub struct Execution {
    /// How it ended.
    pub ended: Ended,
    /// What it consumed.
    pub usage: Usage,
    /// What it printed.
    pub logs: Logs,
    /// Warnings for the outcome (e.g. progress updates rejected).
    pub warnings: Vec<String>,
}

impl Execution {
    /// An execution that ended before the tool ran (e.g. while it waited
    /// for a slot).
    pub fn early(ended: Ended, started: Instant) -> Execution {
        let tripped =
            matches!(ended, Ended::Interrupted(Interruption::Deadline)).then_some(Limit::Deadline);
        Execution {
            ended,
            usage: Usage {
                wall_time: started.elapsed(),
                tripped,
                ..Usage::default()
            },
            logs: Logs::default(),
            warnings: Vec::new(),
        }
    }
}

/// What a native tool receives besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's identity.
    pub call: CallContext,
    pub(crate) progress: CallEvents,
}

impl ToolContext {
    /// Reports progress (a JSON object); each update replaces the last.
    pub fn progress(&self, update: Value) {
        self.progress.report(update);
    }
}

/// The future an executor returns.
pub type ExecutionFuture<'a> = Pin<Box<dyn Future<Output = Execution> + Send + 'a>>;

/// Runs calls of one tool.
pub trait Executor: Send + Sync {
    /// Runs one call to its end; never panics, never fails as a whole.
    fn execute<'a>(&'a self, invocation: Invocation<'a>) -> ExecutionFuture<'a>;

    /// The plugin that provides the tool; `None` for native tools.
    fn plugin(&self) -> Option<&PluginInfo>;
}
