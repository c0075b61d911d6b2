//! Code Mode: the reserved tool `execute` runs a model-written JavaScript
//! program in the interpreter component, and the program calls the other
//! tools of the same snapshot and receives their machine outputs.
//!
//! The program is the body of an async function; `await tools.NAME(input)`
//! settles tool `NAME` as a child call — input validation, permissions,
//! budgets, bounding and events, exactly as if the model had called it —
//! and resolves to its validated `output` (its content as text when it has
//! no output schema), or rejects with its failure. `console.log` lines and
//! the returned value (as JSON) are `execute`'s content.

mod declarations;
mod descriptions;
mod tool;

// The interpreter's wasm side is the runtime's; these are Code Mode's
// names for its parts.
use toolhost_runtime::wasm::code::{compiling, imports, interpreter};

use std::sync::Arc;

use serde_json::json;

use crate::code::interpreter::Interpreter;
use crate::error::Error;
use crate::model::plugin::PluginInfo;
use crate::model::schema::Schema;
use crate::model::tool::{RESERVED_NAME, Tool};
use crate::registry::snapshot::CapturedTools;
use crate::settle::pipeline::Pipeline;
use crate::wasm::engine::Runtime;

use compiling::Compiling;
use declarations::declarations;
use descriptions::Descriptions;

/// What `execute` tells the model before the declarations.
const DESCRIPTION: &str = "Run a JavaScript program that calls the tools below and \
returns only what matters. The program is the body of an async function: \
`await tools.NAME(input)` calls a tool and gives its output (a tool without \
an output type gives its text); a failed call throws an Error with the \
tool's message, which the program may catch. Independent calls can run \
together with `Promise.all`. `console.log(...)` lines and the value the \
program returns (as JSON) are the result. The program has no files, \
network, timers or wall clock: only the tools.";

/// Code Mode of one host: the interpreter (compiling, then compiled),
/// `execute`'s input schema and its descriptions of recent tool sets, shared
/// by every snapshot.
pub(crate) struct CodeMode {
    interpreter: Compiling,
    /// How defects and events name the interpreter.
    info: PluginInfo,
    input_schema: Schema,
    descriptions: Descriptions,
}

impl CodeMode {
    /// Starts compiling `interpreter` (or loading it from the compile
    /// cache) in the background.
    pub(crate) fn new(runtime: &Arc<Runtime>, interpreter: &[u8]) -> Result<CodeMode, Error> {
        let input_schema = Schema::compile(json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The body of an async JavaScript function."
                }
            },
            "required": ["code"],
            "additionalProperties": false
        }))
        .map_err(|e| Error::Interpreter {
            reason: e.to_string(),
        })?;
        Ok(CodeMode {
            interpreter: Compiling::start(runtime.clone(), interpreter.to_vec())?,
            info: Interpreter::info(interpreter),
            input_schema,
            descriptions: Descriptions::default(),
        })
    }
}

impl CodeMode {
    /// Whether the interpreter's compile has ended.
    pub(crate) fn is_compiled(&self) -> bool {
        self.interpreter.is_done()
    }

    /// Waits for the interpreter's compile to end.
    pub(crate) async fn compiled(&self) {
        let _ = self.interpreter.get().await;
    }
}

/// `captured` plus `execute`, whose programs call the other captured tools.
pub(crate) fn with_execute(
    mut captured: CapturedTools,
    code: &Arc<CodeMode>,
    pipeline: &Arc<Pipeline>,
) -> CapturedTools {
    let description = code.descriptions.get(&captured, || {
        format!("{DESCRIPTION}\n\n{}", declarations(captured.definitions()))
    });
    // Programs only resolve and settle tools, so their copy of the snapshot
    // needs no definitions: cloning the map shares every tool.
    let callable = CapturedTools::new(captured.tools.clone(), Vec::new(), captured.final_step);
    let executor = tool::CodeTool {
        code: code.clone(),
        tools: Arc::new(callable),
        pipeline: pipeline.clone(),
    };
    let execute = Tool::from_parts(
        description,
        code.input_schema.clone(),
        None,
        Arc::new(executor),
    );
    captured.advertise(RESERVED_NAME, execute);
    captured
}
