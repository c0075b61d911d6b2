//! The host side of the Code Mode world's `host` import: a program's
//! nested tool calls, each settled in a task of its own by a callback the
//! caller gives, and its console. Also the world's bindings.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasData, Linker};

use crate::model::content::ContentPart;
use crate::model::outcome::{Outcome, Settlement};
use crate::wasm::bindings::ImportMisuse;

/// The `toolhost:code` world's bindings, generated from `wit/code`.
#[allow(missing_docs)] // generated from the WIT, documented there
pub(crate) mod wit {
    wasmtime::component::bindgen!({
        path: "wit/code",
        world: "interpreter",
        imports: {
            // Waits for a nested call, which may wait on a person.
            "toolhost:code/host.next": async | trappable,
            default: trappable,
        },
        // Calls into the guest are async so fuel can yield to cancellation.
        exports: { default: async },
    });
}

use wit::toolhost::code::host::{self as host_import, Outcome as CallOutcome};

/// Tool calls one program may make in all: far more than a program a
/// model writes needs, few enough that a loop of calls ends.
pub const MAX_PROGRAM_CALLS: u32 = 1000;

/// Tool calls one program may have in flight at once; each plugin's own
/// concurrency limit applies below this.
pub const MAX_PROGRAM_CALLS_IN_FLIGHT: usize = 64;

/// Bytes of `console.log` output one program keeps in memory; the result is
/// then bounded and retained like any tool's content. Lines past it are
/// counted and dropped.
pub const MAX_CONSOLE_BYTES: usize = 64 << 20;

/// Settles one nested call and gives back its settlement.
pub type Settler =
    Arc<dyn Fn(NestedCall) -> Pin<Box<dyn Future<Output = Settlement> + Send>> + Send + Sync>;

/// One call a program makes: which tool, with what input, and its number
/// within the program (from 0).
#[derive(Debug)]
pub struct NestedCall {
    /// The tool's name.
    pub tool: String,
    /// Its input, JSON text.
    pub input: String,
    /// Its number within the program.
    pub index: u32,
}

/// The interpreter's side of one program: its nested calls and console.
pub(crate) struct ProgramState {
    settler: Settler,
    cancel: CancellationToken,
    calls: JoinSet<Settlement>,
    /// Call number by task, to route each ended task to its promise.
    numbers: HashMap<tokio::task::Id, u32>,
    started: u32,
    console: Console,
}

impl ProgramState {
    pub(crate) fn new(settler: Settler, cancel: CancellationToken) -> ProgramState {
        ProgramState {
            settler,
            cancel,
            calls: JoinSet::new(),
            numbers: HashMap::new(),
            started: 0,
            console: Console::default(),
        }
    }

    /// Cancels the calls still in flight (the program returned without
    /// awaiting them, or was stopped) and waits for them, so each records
    /// its own outcome before the program's; returns the console.
    pub(crate) async fn finish(mut self) -> String {
        self.cancel.cancel();
        while self.calls.join_next().await.is_some() {}
        self.console.finish()
    }

    fn start(&mut self, tool: String, input: String) -> Result<u32, String> {
        if self.started >= MAX_PROGRAM_CALLS {
            return Err(format!(
                "a program may make at most {MAX_PROGRAM_CALLS} tool calls"
            ));
        }
        if self.calls.len() >= MAX_PROGRAM_CALLS_IN_FLIGHT {
            return Err(format!(
                "a program may have at most {MAX_PROGRAM_CALLS_IN_FLIGHT} tool calls in flight; await some before starting more"
            ));
        }
        let index = self.started;
        self.started += 1;
        let settle = (self.settler)(NestedCall { tool, input, index });
        let task = self.calls.spawn(settle);
        self.numbers.insert(task.id(), index);
        Ok(index)
    }

    async fn next(&mut self) -> Option<(u32, CallOutcome)> {
        let joined = self.calls.join_next_with_id().await?;
        let (id, outcome) = match joined {
            Ok((id, settlement)) => (id, outcome(settlement)),
            // Settlement never panics; if it did, the host is at fault.
            Err(e) => (
                e.id(),
                CallOutcome::Error(format!("the host failed this call: {e}")),
            ),
        };
        let number = self.numbers.remove(&id).unwrap_or(u32::MAX);
        Some((number, outcome))
    }
}

/// What a program's promise receives from a settled call: the validated
/// output, else the content as text; or a message saying how it ended.
fn outcome(settlement: Settlement) -> CallOutcome {
    let tool = settlement.tool;
    match settlement.outcome {
        Outcome::Completed(completed) => {
            let value = completed
                .output
                .unwrap_or_else(|| serde_json::Value::String(content_text(&completed.content)));
            CallOutcome::Value(value.to_string())
        }
        Outcome::Error { message, .. } => CallOutcome::Error(message),
        Outcome::Interrupted { reason } => {
            CallOutcome::Error(format!("the call of `{tool}` was interrupted: {reason}"))
        }
        Outcome::Defect { message, .. } => {
            CallOutcome::Error(format!("the call of `{tool}` failed: {message}"))
        }
        other => CallOutcome::Error(format!("the call of `{tool}` ended as {}", other.status())),
    }
}

/// Content as one text: text parts joined by newlines, media named.
fn content_text(content: &[ContentPart]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => text.clone(),
            ContentPart::Media {
                mime_type, data, ..
            } => format!("[{mime_type}, {} bytes]", data.len()),
        })
        .collect();
    parts.join("\n")
}

/// A program's `console.log` lines, bounded by [`MAX_CONSOLE_BYTES`].
#[derive(Default)]
struct Console {
    text: String,
    dropped: usize,
}

impl Console {
    fn push(&mut self, line: &str) {
        if self.text.len() + line.len() + 1 > MAX_CONSOLE_BYTES {
            self.dropped += line.len() + 1;
            return;
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn finish(mut self) -> String {
        if self.dropped > 0 {
            self.text.push_str(&format!(
                "[{} bytes of console output dropped: over the {MAX_CONSOLE_BYTES}-byte limit]\n",
                self.dropped
            ));
        }
        self.text
    }
}

/// What the `host` import sees of a store: its program, if it runs one.
pub(crate) struct ProgramImport<'a> {
    pub(crate) program: Option<&'a mut ProgramState>,
}

impl ProgramImport<'_> {
    fn program(&mut self) -> wasmtime::Result<&mut ProgramState> {
        self.program.as_deref_mut().ok_or_else(|| {
            ImportMisuse("Code Mode imports are live only in a program".into()).into()
        })
    }
}

impl host_import::Host for ProgramImport<'_> {
    fn start(&mut self, name: String, input: String) -> wasmtime::Result<Result<u32, String>> {
        Ok(self.program()?.start(name, input))
    }

    async fn next(&mut self) -> wasmtime::Result<(u32, CallOutcome)> {
        match self.program()?.next().await {
            Some(ended) => Ok(ended),
            None => {
                Err(ImportMisuse("`next` was called with no tool call in flight".into()).into())
            }
        }
    }

    fn log(&mut self, line: String) -> wasmtime::Result<()> {
        self.program()?.console.push(&line);
        Ok(())
    }
}

struct ProgramData;
impl HasData for ProgramData {
    type Data<'a> = ProgramImport<'a>;
}

/// Adds the `host` import to `linker`, on `program` of each store's data.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    program: fn(&mut T) -> ProgramImport<'_>,
) -> wasmtime::Result<()> {
    host_import::add_to_linker::<T, ProgramData>(linker, program)
}
