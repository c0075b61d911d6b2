//! Running one call: a fresh instance per wasm call (R21), fuel that yields
//! so cancellation and deadlines stop even a spinning guest (R22), budgets
//! and usage (R23), and the three kinds of failure kept apart (R20).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures_util::FutureExt as _;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wasmtime::{Store, Trap};

use crate::bindings::toolhost::plugin::types as wit;
use crate::budget::{Budget, Limit, Usage};
use crate::error::{Defect, DefectKind};
use crate::events::Progress;
use crate::imports::call::CallState;
use crate::plugin::WasmTool;
use crate::store::{Role, StoreState, new_store};
use crate::tool::{
    CallContext, ContentPart, Executor, Tool, ToolContext, ToolFailure, ToolResponse,
};

/// Why a call stopped without a result. Not a tool result (R20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interruption {
    /// The embedder cancelled it.
    Cancelled,
    /// Its wall-clock deadline passed.
    Deadline,
    /// Its fuel budget ran out.
    Fuel,
}

impl std::fmt::Display for Interruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Interruption::Cancelled => "cancelled",
            Interruption::Deadline => "deadline exceeded",
            Interruption::Fuel => "fuel budget exhausted",
        })
    }
}

/// Guest output captured during a call (R25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Logs {
    /// Captured stdout (bounded).
    pub stdout: String,
    /// Captured stderr (bounded).
    pub stderr: String,
    /// Bytes of stdout and stderr dropped beyond the bound.
    pub dropped_bytes: u64,
}

/// How execution ended, before settlement.
pub(crate) enum Executed {
    Response(ToolResponse),
    Failure(ToolFailure),
    Interrupted(Interruption),
    Defect(DefectKind),
    /// The host could not run the call (not the guest's doing).
    Failed(String),
}

pub(crate) struct Execution {
    pub(crate) result: Executed,
    pub(crate) usage: Usage,
    pub(crate) logs: Logs,
    pub(crate) warnings: Vec<String>,
}

/// What the call needs besides the tool and its input.
pub(crate) struct Invocation<'a> {
    pub(crate) tool_name: &'a str,
    pub(crate) input: Value,
    pub(crate) input_text: &'a str,
    pub(crate) context: &'a CallContext,
    pub(crate) progress: Progress,
    pub(crate) budget: Budget,
    pub(crate) cancel: &'a CancellationToken,
}

pub(crate) async fn execute(tool: &Tool, inv: Invocation<'_>) -> Execution {
    match tool.executor() {
        Executor::Wasm(wasm) => execute_wasm(wasm, inv).await,
        Executor::Native(f) => {
            let start = Instant::now();
            let cx = ToolContext {
                call: inv.context.clone(),
                progress: inv.progress.clone(),
            };
            // A panicking native tool becomes a defect, not a crashed host;
            // cancellation and the deadline drop its future.
            let run = AssertUnwindSafe(f(inv.input, cx)).catch_unwind();
            let result = tokio::select! {
                biased;
                () = inv.cancel.cancelled() => Executed::Interrupted(Interruption::Cancelled),
                () = tokio::time::sleep(inv.budget.timeout) => Executed::Interrupted(Interruption::Deadline),
                finished = run => match finished {
                    Ok(Ok(r)) => Executed::Response(r),
                    Ok(Err(f)) => Executed::Failure(f),
                    Err(panic) => Executed::Defect(DefectKind::Panic(panic_text(panic.as_ref()))),
                },
            };
            let tripped = matches!(result, Executed::Interrupted(Interruption::Deadline))
                .then_some(Limit::Deadline);
            Execution {
                result,
                usage: Usage {
                    wall_time: start.elapsed(),
                    tripped,
                    ..Usage::default()
                },
                logs: Logs::default(),
                warnings: Vec::new(),
            }
        }
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "native tool panicked".into())
}

async fn execute_wasm(wasm: &WasmTool, inv: Invocation<'_>) -> Execution {
    let code = &wasm.plugin;
    let mut warnings = Vec::new();
    // Wait for a slot (a bounded queue), giving up on cancellation.
    let _permit = tokio::select! {
        biased;
        () = inv.cancel.cancelled() => return interrupted_early(Interruption::Cancelled),
        permit = code.slots.acquire() => match permit {
            Ok(p) => p,
            Err(_) => return interrupted_early(Interruption::Cancelled),
        },
    };
    let state = CallState {
        context: inv.context.clone(),
        tool: inv.tool_name.to_owned(),
        progress: inv.progress.clone(),
        // The plugin's policy: the host's rules plus the plugin's own.
        policy: code.policy.clone(),
        config: code.config.clone(),
    };
    let mut store = match new_store(code, &inv.budget, Role::Call(state)) {
        Ok(s) => s,
        Err(e) => {
            return Execution {
                result: Executed::Failed(format!("cannot set up the call: {e}")),
                usage: Usage::default(),
                logs: Logs::default(),
                warnings,
            };
        }
    };
    let context = wit::CallContext {
        session_id: inv.context.session_id.clone(),
        agent: inv.context.agent.clone(),
        message_id: inv.context.message_id.clone(),
        call_id: inv.context.call_id.clone(),
    };
    let start = Instant::now();
    let raced = {
        let run = async {
            let instance = code.pre.instantiate_async(&mut store).await?;
            instance
                .toolhost_plugin_plugin()
                .call_execute(&mut store, &wasm.name, inv.input_text, &context)
                .await
        };
        tokio::select! {
            biased;
            () = inv.cancel.cancelled() => Err(Interruption::Cancelled),
            () = tokio::time::sleep(inv.budget.timeout) => Err(Interruption::Deadline),
            r = run => Ok(r),
        }
    };
    let wall_time = start.elapsed();
    let result = match raced {
        Err(i) => Executed::Interrupted(i),
        Ok(Ok(Ok(response))) => match convert(response, &mut warnings) {
            Ok(r) => Executed::Response(r),
            Err(kind) => Executed::Defect(kind),
        },
        Ok(Ok(Err(failure))) => Executed::Failure(ToolFailure {
            message: failure.message,
            metadata: parse_metadata(failure.metadata, &mut warnings),
        }),
        Ok(Err(e)) => match classify(&e, &store) {
            Stop::Fuel => Executed::Interrupted(Interruption::Fuel),
            Stop::Defect(kind) => Executed::Defect(kind),
        },
    };
    let fuel_used = inv
        .budget
        .fuel
        .saturating_sub(store.get_fuel().unwrap_or(0));
    let state = store.data();
    let tripped = match &result {
        Executed::Interrupted(Interruption::Fuel) => Some(Limit::Fuel),
        Executed::Interrupted(Interruption::Deadline) => Some(Limit::Deadline),
        Executed::Defect(DefectKind::MemoryLimit(_)) => Some(Limit::Memory),
        _ => None,
    };
    let usage = Usage {
        fuel_used,
        wall_time,
        peak_memory: state.limiter.peak,
        tripped,
    };
    let logs = take_logs(state);
    // The store, trapped or not, is dropped here: never reused (R21).
    drop(store);
    Execution {
        result,
        usage,
        logs,
        warnings,
    }
}

fn interrupted_early(i: Interruption) -> Execution {
    Execution {
        result: Executed::Interrupted(i),
        usage: Usage::default(),
        logs: Logs::default(),
        warnings: Vec::new(),
    }
}

fn take_logs(state: &StoreState) -> Logs {
    let (stdout, d1) = state.stdout.take();
    let (stderr, d2) = state.stderr.take();
    Logs {
        stdout,
        stderr,
        dropped_bytes: d1 + d2,
    }
}

/// Metadata that is not JSON is dropped with a warning (R17); settlement
/// checks the rest.
fn parse_metadata(text: Option<String>, warnings: &mut Vec<String>) -> Option<Value> {
    let text = text?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            warnings.push(format!("metadata dropped: not valid JSON ({e})"));
            None
        }
    }
}

/// Turns the guest's response into host values. Output that is not JSON is
/// a contract violation: the guest promised JSON text.
fn convert(r: wit::ToolResponse, warnings: &mut Vec<String>) -> Result<ToolResponse, DefectKind> {
    let output = r
        .output
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| DefectKind::Contract(format!("output is not valid JSON text: {e}")))?;
    let content = r.content.map(|parts| {
        parts
            .into_iter()
            .map(|p| match p {
                wit::ContentPart::Text(text) => ContentPart::Text { text },
                wit::ContentPart::Media(m) => ContentPart::Media {
                    mime_type: m.mime_type,
                    data: m.data,
                    name: m.name,
                },
            })
            .collect()
    });
    Ok(ToolResponse {
        output,
        content,
        metadata: parse_metadata(r.metadata, warnings),
    })
}

/// How a guest error ends a call: out of fuel is an interruption; anything
/// else is a defect.
pub(crate) enum Stop {
    Fuel,
    Defect(DefectKind),
}

/// Classifies a failed guest call by its trap, never by its message.
pub(crate) fn classify(e: &wasmtime::Error, store: &Store<StoreState>) -> Stop {
    let state = store.data();
    let trap = e.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::OutOfFuel) {
        return Stop::Fuel;
    }
    let (stderr, _) = state.stderr.take();
    if state.limiter.tripped {
        return Stop::Defect(DefectKind::MemoryLimit(state.limiter.limit));
    }
    if trap == Some(Trap::StackOverflow) {
        return Stop::Defect(DefectKind::StackOverflow);
    }
    if let Some(message) = panic_message(&stderr) {
        return Stop::Defect(DefectKind::Panic(message));
    }
    Stop::Defect(DefectKind::Trap(match trap {
        Some(t) => t.to_string(),
        None => format!("{e:#}"),
    }))
}

/// Extracts the message of a Rust panic from captured stderr: the lines
/// between `panicked at ...:` and the `note:` line.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let after = &stderr[start..];
    let body = after.split_once('\n').map_or("", |(_, b)| b);
    let message: Vec<&str> = body
        .lines()
        .take_while(|l| !l.starts_with("note: "))
        .collect();
    let message = message.join("\n").trim().to_owned();
    Some(if message.is_empty() {
        "panic without a message".into()
    } else {
        message
    })
}

/// A defect with its plugin, version and tool named.
pub(crate) fn defect(tool: &Tool, name: &str, kind: DefectKind) -> Defect {
    let (plugin, version) = match tool.plugin() {
        Some(info) => (info.name.clone(), info.version.clone()),
        None => ("native".to_owned(), env!("CARGO_PKG_VERSION").to_owned()),
    };
    Defect {
        plugin,
        version,
        tool: name.to_owned(),
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_extracted_from_rust_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nchaos: deliberate panic\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("chaos: deliberate panic")
        );
        assert_eq!(panic_message("just logs"), None);
    }
}
