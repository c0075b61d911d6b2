//! `execute`'s executor: runs the program, settling each tool call it makes
//! as a child call of the `execute` call.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::code::CodeMode;
use crate::code::imports::{NestedCall, Settler};
use crate::code::interpreter::{ProgramEnd, ProgramRun, RunError};
use crate::model::approval::Approver;
use crate::model::budget::BudgetOverrides;
use crate::model::call::Call;
use crate::model::content::{ContentPart, ToolFailure, ToolResponse};
use crate::model::context::CallContext;
use crate::model::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation};
use crate::model::outcome::{FaultKind, HostFault, Interruption};
use crate::model::plugin::PluginInfo;
use crate::registry::snapshot::CapturedTools;
use crate::settle::pipeline::Pipeline;
use crate::settle::settle;

/// Defines `tools` (each property a function that starts a call of that
/// name) and hides the raw import from the program.
const PRELUDE: &str = r#"{
  const call = globalThis.__toolhost_call;
  delete globalThis.__toolhost_call;
  const tools = new Proxy(Object.freeze({}), {
    // Not `then`: awaiting `tools` itself must not call a tool.
    get: (_, name) => typeof name === "string" && name !== "then"
      ? (input) => call(name, input === undefined ? {} : input)
      : undefined,
  });
  Object.defineProperty(globalThis, "tools", { value: tools });
}"#;

/// Bytes of the end of the console kept as a failed program's partial
/// snapshot (R19), under the host's partial-snapshot limit.
const PARTIAL_CONSOLE_BYTES: usize = 8 << 10;

/// Runs one program against the tools captured with it.
pub(super) struct CodeTool {
    pub(super) code: Arc<CodeMode>,
    /// The snapshot's tools, without `execute` itself; no definitions,
    /// since programs only resolve and settle.
    pub(super) tools: Arc<CapturedTools>,
    pub(super) pipeline: Arc<Pipeline>,
}

impl Executor for CodeTool {
    fn execute<'a>(&'a self, invocation: Invocation<'a>) -> ExecutionFuture<'a> {
        Box::pin(self.run(invocation))
    }

    fn plugin(&self) -> Option<&PluginInfo> {
        Some(&self.code.info)
    }
}

impl CodeTool {
    async fn run(&self, mut inv: Invocation<'_>) -> Execution {
        // Only a program that runs before the interpreter is ready waits
        // for it. The host's compile is not the program's time (its own
        // compile limits bound it): the wait ends only by cancellation, and
        // the program's deadline counts from when the interpreter is ready.
        let waiting = Instant::now();
        let ready = tokio::select! {
            ready = self.code.interpreter.get() => Ok(ready),
            () = inv.cancel.cancelled() => Err(Interruption::Cancelled),
        };
        inv.deadline += waiting.elapsed();
        let interpreter = match ready {
            Ok(Ok(interpreter)) => interpreter,
            Ok(Err(reason)) => {
                let fault = HostFault::new(
                    FaultKind::Setup,
                    format!("Code Mode's interpreter could not be compiled: {reason}"),
                );
                return Execution::early(Ended::HostFault(fault), inv.started);
            }
            Err(interruption) => {
                return Execution::early(Ended::Interrupted(interruption), inv.started);
            }
        };
        // The input schema requires `code` to be a string.
        let program = inv.input["code"].as_str().unwrap_or_default();
        let calls_cancel = inv.cancel.child_token();
        let settler = self.settler(&inv, calls_cancel.clone());
        let end = interpreter
            .run(ProgramRun {
                program,
                prelude: PRELUDE,
                budget: inv.budget,
                settler,
                started: inv.started,
                deadline: inv.deadline,
                cancel: inv.cancel,
                calls_cancel,
            })
            .await;
        execution(end, &inv)
    }

    /// Settles each nested call through this snapshot's tools, as a child
    /// of the `execute` call: same session, agent and message, call id
    /// `<parent>/<n>`, within the parent's deadline and cancellation, asking
    /// the parent's approver.
    fn settler(&self, inv: &Invocation<'_>, cancel: CancellationToken) -> Settler {
        let tools = self.tools.clone();
        let pipeline = self.pipeline.clone();
        let parent = inv.context.clone();
        let approver = inv.approver.clone();
        let deadline = inv.deadline;
        Arc::new(move |nested: NestedCall| {
            let call = child_call(&parent, nested, &tools, &pipeline, deadline)
                .with_cancel(cancel.clone());
            let call = with_approver(call, approver.clone());
            let tools = tools.clone();
            let pipeline = pipeline.clone();
            Box::pin(async move { settle(&pipeline, &tools, call).await })
        })
    }
}

fn child_call(
    parent: &CallContext,
    nested: NestedCall,
    tools: &CapturedTools,
    pipeline: &Pipeline,
    deadline: Instant,
) -> Call {
    let mut context = parent.clone();
    context.call_id = format!("{}/{}", parent.call_id, nested.index + 1);
    let own = tools
        .tools
        .get(&nested.tool)
        .and_then(|t| t.budget())
        .unwrap_or(pipeline.budget)
        .timeout;
    let remaining = deadline.saturating_duration_since(Instant::now());
    Call::new(nested.tool, nested.input, context).with_overrides(BudgetOverrides {
        timeout: Some(own.min(remaining)),
        ..BudgetOverrides::default()
    })
}

fn with_approver(call: Call, approver: Option<Arc<dyn Approver>>) -> Call {
    match approver {
        Some(approver) => call.with_approver(approver),
        None => call,
    }
}

/// How the program ended, as `execute`'s execution: its console and
/// returned value as content, or its error with the console so far as the
/// partial snapshot.
fn execution(end: ProgramEnd, inv: &Invocation<'_>) -> Execution {
    let ended = match end.ended {
        Ok(Ok(value)) => Ended::Response(response(end.console, value)),
        Ok(Err(error)) => {
            inv.progress
                .report(json!({ "console": tail(&end.console, PARTIAL_CONSOLE_BYTES) }));
            Ended::ToolFailure(ToolFailure {
                message: failure_message(&error),
                metadata: None,
            })
        }
        Err(stopped) => stopped,
    };
    Execution {
        ended,
        usage: end.usage,
        logs: end.logs,
        warnings: Vec::new(),
    }
}

/// The console (when there is any) and the returned value (unless the
/// program returned nothing and printed something).
fn response(console: String, value: String) -> ToolResponse {
    let mut content = Vec::new();
    let printed = !console.is_empty();
    if printed {
        let text = console.strip_suffix('\n').unwrap_or(&console).to_owned();
        content.push(ContentPart::Text { text });
    }
    if value != "null" || !printed {
        content.push(ContentPart::Text { text: value });
    }
    ToolResponse {
        output: None,
        content: Some(content),
        metadata: None,
    }
}

fn failure_message(error: &RunError) -> String {
    match (error.line, error.column) {
        (Some(line), Some(column)) => {
            format!("{} (line {line}, column {column})", error.message)
        }
        (Some(line), None) => format!("{} (line {line})", error.message),
        _ => error.message.clone(),
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
