//! Native Rust tools: the same [`Tool`] value as wasm tools, run in place
//! behind `catch_unwind`, under the same deadline and cancellation.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt as _;
use serde_json::Value;

use crate::budget::{Limit, Usage};
use crate::content::{ToolFailure, ToolResponse};
use crate::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation, ToolContext};
use crate::interrupt::interruptible;
use crate::outcome::{DefectKind, Interruption, Logs};
use crate::plugin::PluginInfo;
use crate::schema::{Schema, SchemaError};
use crate::tool::Tool;

type NativeFuture = Pin<Box<dyn Future<Output = Result<ToolResponse, ToolFailure>> + Send>>;

type NativeFn = dyn Fn(Value, ToolContext) -> NativeFuture + Send + Sync;

/// A native tool's function.
struct NativeTool(Arc<NativeFn>);

impl Tool {
    /// Builds a native Rust tool.
    ///
    /// `input_schema` and `output_schema` are JSON Schema documents; they are
    /// compiled here, once. `execute` receives input that already passed the
    /// input schema.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolhost_model::{content::ToolResponse, tool::Tool};
    ///
    /// let echo = Tool::native(
    ///     "Echo the message back",
    ///     json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    ///     None,
    ///     |input, _cx| async move {
    ///         Ok(ToolResponse { output: Some(input["message"].clone()), ..Default::default() })
    ///     },
    /// )
    /// .unwrap();
    /// # let _ = echo;
    /// ```
    pub fn native<F, Fut>(
        description: impl Into<String>,
        input_schema: Value,
        output_schema: Option<Value>,
        execute: F,
    ) -> Result<Tool, SchemaError>
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolResponse, ToolFailure>> + Send + 'static,
    {
        let input = Schema::compile(input_schema)?;
        let output = output_schema.map(Schema::compile).transpose()?;
        let f: Arc<NativeFn> = Arc::new(move |v, cx| Box::pin(execute(v, cx)));
        Ok(Tool::from_parts(
            description.into(),
            input,
            output,
            Arc::new(NativeTool(f)),
        ))
    }
}

impl Executor for NativeTool {
    fn execute<'a>(&'a self, inv: Invocation<'a>) -> ExecutionFuture<'a> {
        Box::pin(async move {
            let cx = ToolContext {
                call: inv.context.clone(),
                progress: inv.progress.clone(),
            };
            // A panicking native tool becomes a defect, not a crashed host;
            // cancellation and the deadline drop its future.
            let run = AssertUnwindSafe((self.0)(inv.input, cx)).catch_unwind();
            let ended = match interruptible(inv.cancel, inv.deadline, run).await {
                Err(interruption) => Ended::Interrupted(interruption),
                Ok(Ok(Ok(r))) => Ended::Response(r),
                Ok(Ok(Err(f))) => Ended::ToolFailure(f),
                Ok(Err(panic)) => Ended::Defect(DefectKind::Panic(panic_text(panic.as_ref()))),
            };
            let tripped = matches!(ended, Ended::Interrupted(Interruption::Deadline))
                .then_some(Limit::Deadline);
            Execution {
                ended,
                usage: Usage {
                    wall_time: inv.started.elapsed(),
                    tripped,
                    ..Usage::default()
                },
                logs: Logs::default(),
                warnings: Vec::new(),
            }
        })
    }

    fn plugin(&self) -> Option<&PluginInfo> {
        None
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "native tool panicked".into())
}
