//! Settlement: the one execution boundary (R10, R11, R13-R19). In the order
//! of the tool contract: resolve the captured tool, decode and validate
//! input, execute, validate output, normalize content, bound it (retaining
//! the full text), check metadata, run after-hooks, publish the outcome.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::bound::{self, Bounds, MAX_MEDIA_BYTES, OutputStore, RetainedOutput};
use crate::budget::{Budget, Limits, Usage};
use crate::error::{Defect, DefectKind};
use crate::events::{EventSink, Progress};
use crate::execute::{self, Executed, Interruption, Invocation, Logs};
use crate::permission::Policy;
use crate::registry::Captured;
use crate::tool::{CallContext, ContentPart, Tool, ToolDefinition, ToolResponse};

/// The exact error for every call of a final-step snapshot (R11).
pub const FINAL_STEP_MESSAGE: &str = "Tools are disabled after the maximum agent steps";

/// The largest metadata object kept, serialized (R17).
pub const MAX_METADATA_BYTES: usize = 16 << 10;

/// The largest partial-progress snapshot kept on an error outcome (R19).
pub const MAX_PARTIAL_BYTES: usize = 16 << 10;

/// How much of the given arguments an input error quotes back.
const MAX_QUOTED_ARGUMENTS: usize = 2_000;

/// One tool call from the model.
#[derive(Debug, Clone)]
pub struct Call {
    /// The effective tool name the model used.
    pub tool: String,
    /// The raw arguments, JSON text as the provider gave them.
    pub input: String,
    /// The call's durable identity.
    pub context: CallContext,
    /// Budget overrides for this call. Default: none.
    pub limits: Limits,
    /// Cancels the call when triggered. Default: a token nobody triggers
    /// (dropping the settle future also cancels).
    pub cancel: CancellationToken,
}

impl Call {
    /// A call of `tool` with raw JSON `input`.
    pub fn new(tool: impl Into<String>, input: impl Into<String>, context: CallContext) -> Call {
        Call {
            tool: tool.into(),
            input: input.into(),
            context,
            limits: Limits::default(),
            cancel: CancellationToken::new(),
        }
    }

    /// The same call with budget overrides.
    pub fn with_limits(mut self, limits: Limits) -> Call {
        self.limits = limits;
        self
    }

    /// The same call, cancelled by `token`.
    pub fn with_cancel(mut self, token: CancellationToken) -> Call {
        self.cancel = token;
        self
    }
}

/// Why a call ended in a model-visible error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// No such tool in the snapshot (R10).
    UnknownTool,
    /// The snapshot is a final step (R11).
    Disabled,
    /// The arguments are not JSON (R13).
    MalformedInput,
    /// The arguments violate the input schema (R13).
    InvalidInput,
    /// The output violates the output schema (R14).
    InvalidOutput,
    /// The tool reported a failure.
    ToolFailure,
}

/// A completed call's canonical result (R19).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completed {
    /// Non-empty, bounded model content.
    pub content: Vec<ContentPart>,
    /// Metadata, a JSON object of at most [`MAX_METADATA_BYTES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The validated machine output, when the tool has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Full texts retained because their parts were bounded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedOutput>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Success.
    Completed(Completed),
    /// A model-visible error.
    Error {
        /// What went wrong, written for the model.
        message: String,
        /// Why.
        kind: ErrorKind,
        /// The last progress update, bounded (R19).
        #[serde(skip_serializing_if = "Option::is_none")]
        partial: Option<Value>,
    },
    /// Stopped by cancellation, deadline or fuel; not a tool result (R20).
    Interrupted {
        /// Which.
        reason: Interruption,
    },
    /// An operational failure: a defect of the guest (R20) or a failure of
    /// the host to settle (e.g. retention, R16).
    Defect {
        /// What went wrong, naming plugin, version and tool.
        message: String,
        /// The classified defect, when a guest caused it.
        #[serde(skip_serializing_if = "Option::is_none")]
        defect: Option<Defect>,
    },
}

impl Outcome {
    /// `completed`, `error`, `interrupted` or `defect`.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Completed(_) => "completed",
            Outcome::Error { .. } => "error",
            Outcome::Interrupted { .. } => "interrupted",
            Outcome::Defect { .. } => "defect",
        }
    }
}

/// A settled call: its identity, outcome, usage, warnings and logs.
#[derive(Debug, Clone, Serialize)]
pub struct Settlement {
    /// The exact ids the runner supplied (R19).
    pub context: CallContext,
    /// The tool name the model used.
    pub tool: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// What it consumed (R23).
    pub usage: Usage,
    /// Things dropped or ignored on the way (e.g. oversized metadata).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Captured guest stdout/stderr (R25).
    pub logs: Logs,
}

/// What an after-hook sees besides the outcome.
#[derive(Debug)]
pub struct HookCall<'a> {
    /// The call's identity.
    pub context: &'a CallContext,
    /// The effective tool name.
    pub tool: &'a str,
}

/// Runs after settlement on the bounded outcome (R18). A hook may change
/// it; changed content is normalized and bounded again.
pub trait AfterHook: Send + Sync {
    /// Inspects or changes `outcome`.
    fn after(&self, call: &HookCall<'_>, outcome: &mut Outcome);
}

/// Host-wide settings settlement uses.
pub(crate) struct Settler {
    pub(crate) budget: Budget,
    pub(crate) bounds: Bounds,
    pub(crate) outputs: Result<OutputStore, String>,
    pub(crate) sink: Option<Arc<dyn EventSink>>,
    pub(crate) hooks: Vec<Arc<dyn AfterHook>>,
    pub(crate) policy: Policy,
}

impl fmt::Debug for Settler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settler")
            .field("budget", &self.budget)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

/// One model request's captured tools (R8). Calls settle against it even if
/// the registry changes or plugins unload afterwards (R9).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) captured: Arc<Captured>,
    pub(crate) settler: Arc<Settler>,
}

impl Snapshot {
    /// The advertised definitions, sorted by name.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.captured.definitions
    }

    /// The captured tool for `name`, if any.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.captured.tools.get(name)
    }

    /// Whether this is a final-step snapshot (R11).
    pub fn is_final_step(&self) -> bool {
        self.captured.final_step
    }

    /// Settles one call; never fails as a whole: every way a call can end is
    /// an [`Outcome`]. The outcome also goes to the event sink.
    pub async fn settle(&self, call: Call) -> Settlement {
        let settlement = self.settle_inner(call).await;
        if let Some(sink) = &self.settler.sink {
            sink.outcome(&settlement);
        }
        settlement
    }

    async fn settle_inner(&self, call: Call) -> Settlement {
        // A call rejected before execution: nothing ran, nothing was used.
        let rejected = |kind, message: String| Settlement {
            context: call.context.clone(),
            tool: call.tool.clone(),
            outcome: Outcome::Error {
                message,
                kind,
                partial: None,
            },
            usage: Usage::default(),
            warnings: Vec::new(),
            logs: Logs::default(),
        };
        // Each rejection is per call: it never affects another (R10).
        if self.captured.final_step {
            return rejected(ErrorKind::Disabled, FINAL_STEP_MESSAGE.into());
        }
        let Some(tool) = self.captured.tools.get(&call.tool) else {
            return rejected(
                ErrorKind::UnknownTool,
                format!("Unknown tool: {}", call.tool),
            );
        };
        let input = match decode_input(tool, &call) {
            Ok(v) => v,
            Err((kind, message)) => return rejected(kind, message),
        };
        let settler = &self.settler;
        let budget = tool.budget().unwrap_or(settler.budget).with(&call.limits);
        let bounds = tool.bounds().unwrap_or(settler.bounds);
        let progress = Progress::new(
            call.context.clone(),
            call.tool.clone(),
            settler.sink.clone(),
        );
        let execution = execute::execute(
            tool,
            Invocation {
                tool_name: &call.tool,
                input,
                input_text: &call.input,
                context: &call.context,
                progress: progress.clone(),
                budget,
                cancel: &call.cancel,
            },
        )
        .await;
        let mut warnings = execution.warnings;
        let (last_progress, progress_warnings) = progress.finish();
        warnings.extend(progress_warnings);
        let defect = |kind| {
            let d = execute::defect(tool, &call.tool, kind);
            Outcome::Defect {
                message: d.to_string(),
                defect: Some(d),
            }
        };
        let outcome = match execution.result {
            Executed::Interrupted(reason) => Outcome::Interrupted { reason },
            Executed::Defect(kind) => defect(kind),
            Executed::Failed(message) => Outcome::Defect {
                message,
                defect: None,
            },
            Executed::Failure(failure) => Outcome::Error {
                message: failure.message,
                kind: ErrorKind::ToolFailure,
                partial: bound_partial(last_progress, &mut warnings),
            },
            Executed::Response(response) => {
                match self.complete(tool, &call.tool, response, &bounds, &mut warnings) {
                    Ok(outcome) => outcome,
                    Err(Settle::Defect(kind)) => defect(kind),
                    Err(Settle::Operational(message)) => Outcome::Defect {
                        message,
                        defect: None,
                    },
                }
            }
        };
        let mut settlement = Settlement {
            context: call.context.clone(),
            tool: call.tool.clone(),
            outcome,
            usage: execution.usage,
            warnings,
            logs: execution.logs,
        };
        if !settler.hooks.is_empty() {
            let hook_call = HookCall {
                context: &call.context,
                tool: &call.tool,
            };
            for hook in &settler.hooks {
                hook.after(&hook_call, &mut settlement.outcome);
            }
            // Hooks may change content and metadata: normalize, bound and
            // check them again (R18).
            if let Outcome::Completed(c) = &mut settlement.outcome {
                let metadata = c.metadata.take().map(Value::Object);
                c.metadata = check_metadata(metadata, &mut settlement.warnings);
            }
            if let Outcome::Completed(c) = &mut settlement.outcome
                && let Err(e) = self.normalize_and_bound(c, &bounds)
            {
                settlement.outcome = match e {
                    Settle::Defect(kind) => Outcome::Defect {
                        message: format!(
                            "after-hook for tool `{}` produced invalid content: {kind}",
                            call.tool
                        ),
                        defect: None,
                    },
                    Settle::Operational(message) => Outcome::Defect {
                        message,
                        defect: None,
                    },
                };
            }
        }
        settlement
    }

    /// Steps 4-6: output validation, content normalization, bounding,
    /// metadata.
    fn complete(
        &self,
        tool: &Tool,
        name: &str,
        response: ToolResponse,
        bounds: &Bounds,
        warnings: &mut Vec<String>,
    ) -> Result<Outcome, Settle> {
        let ToolResponse {
            output,
            content,
            metadata,
        } = response;
        // Invalid output never yields success (R14).
        if let Some(schema) = tool.output_schema() {
            let Some(value) = &output else {
                return Ok(Outcome::Error {
                    message: format!(
                        "Tool `{name}` returned no output, but it declares an output schema. The tool is at fault; do not retry with the same arguments."
                    ),
                    kind: ErrorKind::InvalidOutput,
                    partial: None,
                });
            };
            let violations = schema.violations(value);
            if !violations.is_empty() {
                return Ok(Outcome::Error {
                    message: format!(
                        "Tool `{name}` returned output that does not match its output schema:\n{}\nThe tool is at fault; do not retry with the same arguments.",
                        list(&violations)
                    ),
                    kind: ErrorKind::InvalidOutput,
                    partial: None,
                });
            }
        }
        let content = match content {
            Some(parts) => parts,
            // Derived from output when omitted (R15).
            None => match &output {
                Some(Value::String(s)) => vec![ContentPart::text(s.clone())],
                Some(other) => vec![ContentPart::text(other.to_string())],
                None => {
                    return Err(Settle::Defect(DefectKind::Contract(
                        "returned neither content nor output".into(),
                    )));
                }
            },
        };
        let mut completed = Completed {
            content,
            metadata: check_metadata(metadata, warnings),
            output,
            retained: Vec::new(),
        };
        self.normalize_and_bound(&mut completed, bounds)?;
        Ok(Outcome::Completed(completed))
    }

    /// Content must be non-empty (R15); media is untouched but limited, text
    /// over the bounds is retained and replaced by a preview (R16).
    fn normalize_and_bound(&self, c: &mut Completed, bounds: &Bounds) -> Result<(), Settle> {
        if c.content.is_empty() {
            return Err(Settle::Defect(DefectKind::Contract(
                "returned empty content".into(),
            )));
        }
        for part in &mut c.content {
            match part {
                ContentPart::Media { data, .. } if data.len() > MAX_MEDIA_BYTES => {
                    return Err(Settle::Defect(DefectKind::Contract(format!(
                        "returned a media part of {} bytes; the limit is {MAX_MEDIA_BYTES}",
                        data.len()
                    ))));
                }
                ContentPart::Media { .. } => {}
                ContentPart::Text { text } => {
                    if bound::within(text, bounds) {
                        continue;
                    }
                    // Retain first: never a lossy success (R16).
                    let store = self.settler.outputs.as_ref().map_err(|e| {
                        Settle::Operational(format!("cannot retain oversized output: {e}"))
                    })?;
                    let retained = store.retain(text).map_err(|e| {
                        Settle::Operational(format!(
                            "cannot retain oversized output in {}: {e}; check that the output directory is writable",
                            store.path().display()
                        ))
                    })?;
                    *text = bound::preview(text, bounds, &retained.reference);
                    c.retained.push(retained);
                }
            }
        }
        Ok(())
    }
}

enum Settle {
    Defect(DefectKind),
    Operational(String),
}

/// Decodes and validates the raw arguments (R13).
fn decode_input(tool: &Tool, call: &Call) -> Result<Value, (ErrorKind, String)> {
    let quoted = quote(&call.input);
    let input: Value = serde_json::from_str(&call.input).map_err(|e| {
        (
            ErrorKind::MalformedInput,
            format!(
                "The arguments for tool `{}` are not valid JSON: {e}.\nArguments given: {quoted}\nSend the arguments as one JSON object and call the tool again.",
                call.tool
            ),
        )
    })?;
    let violations = tool.input_schema().violations(&input);
    if violations.is_empty() {
        Ok(input)
    } else {
        Err((
            ErrorKind::InvalidInput,
            format!(
                "The arguments for tool `{}` do not match its input schema:\n{}\nArguments given: {quoted}\nCorrect the arguments and call the tool again.",
                call.tool,
                list(&violations)
            ),
        ))
    }
}

fn list(violations: &[crate::schema::Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("- {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn quote(input: &str) -> String {
    if input.len() <= MAX_QUOTED_ARGUMENTS {
        return input.to_owned();
    }
    let mut end = MAX_QUOTED_ARGUMENTS;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &input[..end], input.len())
}

/// Metadata must be a JSON object of at most 16 KiB; otherwise it is
/// dropped with a warning and the call still succeeds (R17).
fn check_metadata(
    metadata: Option<Value>,
    warnings: &mut Vec<String>,
) -> Option<Map<String, Value>> {
    match metadata? {
        Value::Object(map) => {
            let size = serde_json::to_vec(&map).map_or(usize::MAX, |v| v.len());
            if size <= MAX_METADATA_BYTES {
                Some(map)
            } else {
                warnings.push(format!(
                    "metadata dropped: {size} bytes exceeds the {MAX_METADATA_BYTES}-byte limit"
                ));
                None
            }
        }
        other => {
            warnings.push(format!(
                "metadata dropped: it must be a JSON object, not {}",
                json_kind(&other)
            ));
            None
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn bound_partial(partial: Option<Value>, warnings: &mut Vec<String>) -> Option<Value> {
    let partial = partial?;
    let size = serde_json::to_vec(&partial).map_or(usize::MAX, |v| v.len());
    if size <= MAX_PARTIAL_BYTES {
        Some(partial)
    } else {
        warnings.push(format!(
            "partial progress dropped: {size} bytes exceeds the {MAX_PARTIAL_BYTES}-byte limit"
        ));
        None
    }
}
