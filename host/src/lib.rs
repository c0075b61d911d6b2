//! Toolhost runs agent tools written as WebAssembly components.
//!
//! Plugins are components of the `toolhost:plugin@0.1.0` world (see `wit/`).
//! An embedder builds a [`Host`], opens a [`Location`] per workspace, loads
//! and activates plugins (each activation registers its tools in a scope of
//! its own), takes a [`Snapshot`] per model request and settles the model's
//! calls against it. Settlement validates input and output against the
//! tools' JSON Schemas, runs each wasm call in a fresh instance under fuel,
//! deadline and memory budgets, bounds what reaches the model (retaining the
//! full output), and reports progress and outcomes to an
//! [`EventSink`](events::EventSink).
//! With Code Mode on ([`HostBuilder::code_mode`]), snapshots also advertise
//! `execute`, which runs a model's JavaScript program in a sandboxed
//! interpreter component; the program's tool calls settle as child calls.
//!
//! # Example
//!
//! A native Rust tool and a wasm tool are the same [`Tool`] value; this
//! example registers a native one so it runs anywhere:
//!
//! ```
//! use serde_json::json;
//! use toolhost::{Call, CallContext, Host, Outcome, Tool, ToolResponse};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = tempfile::tempdir()?;
//! let host = Host::builder().state_dir(state.path()).build()?;
//! let location = host.location("/work/project");
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"message": {"type": "string"}},
//!     "required": ["message"]
//! });
//! let echo = Tool::native("Echo the message", schema, None, |input, _cx| async move {
//!     Ok(ToolResponse { output: Some(input["message"].clone()), ..Default::default() })
//! })?;
//! let _registration = location.register([("echo", echo)])?;
//!
//! // One snapshot per model request: advertise its definitions...
//! let snapshot = location.snapshot();
//! assert_eq!(snapshot.definitions()[0].name, "echo");
//!
//! // ...and settle the model's calls against it.
//! let context = CallContext::new("ses_1", "build", "msg_1", "call_1");
//! let settlement = snapshot
//!     .settle(Call::new("echo", r#"{"message":"hi"}"#, context.clone()))
//!     .await;
//! assert!(matches!(settlement.outcome, Outcome::Completed(_)));
//!
//! // The same ids again (a runner replaying its step): the recorded
//! // outcome comes back from the store, and nothing runs.
//! let again = snapshot
//!     .settle(Call::new("echo", r#"{"message":"hi"}"#, context.clone()))
//!     .await;
//! assert!(again.replayed);
//!
//! // Invalid input never runs the tool; the model gets an actionable error.
//! let mut next = context.clone();
//! next.call_id = "call_2".into();
//! let settlement = snapshot.settle(Call::new("echo", "{}", next)).await;
//! assert_eq!(settlement.outcome.status(), "error");
//! # Ok(())
//! # }
//! ```
//!
//! Loading a plugin is one more call; its tools then appear in snapshots:
//!
//! ```no_run
//! # async fn run(location: toolhost::Location) -> Result<(), toolhost::Error> {
//! use toolhost::config::PluginOptions;
//!
//! let activation = location.load("text_tools.wasm", &PluginOptions::default()).await?;
//! // ... snapshots now include echo, word_count, regex_search ...
//! activation.unload(); // closes every registration it made
//! # Ok(())
//! # }
//! ```

//!
//! # The API
//!
//! The crate root holds the types of every embedding: the [`Host`] and its
//! builder, [`Location`], [`Snapshot`], [`Call`], [`Settlement`] and
//! [`Outcome`], [`Tool`] and what a tool returns, budgets and errors.
//! Public modules hold the rest:
//! [`config`] (plugin options, grants, MCP servers), [`files`] (reading a
//! file the host is given: regular files only, with a bound), [`limits`]
//! (every limit and default, each with its reason), [`manifest`] (and its
//! [`units`](manifest::units), durations and sizes as manifests write
//! them), `oci` (feature `oci`:
//! plugins from OCI registries, pulled by digest and signature-checked
//! before compiling), [`outcome`], [`events`],
//! [`schema`], [`hooks`], [`permission`] (rules and the approver) and
//! [`registry`]. [`execution`], [`slots`] and [`text`] are the seams the
//! crates above this one build on (a tool source's executor, fair slots,
//! guest text cut to a bound).
//!
//! The MCP server (`toolhost serve`) and the bridge (MCP servers as tool
//! sources) are the crate `toolhost-mcp`, on top of this one.
//! [`CancellationToken`] is tokio-util's, re-exported because
//! [`Call::with_cancel`] takes one: embedders need not depend on
//! tokio-util to cancel a call.
//!
//! # Layers
//!
//! This crate is the top of the library's layers, each a crate that
//! depends only on those below it (`cargo xtask layers` prints them):
//! `toolhost-model` (model types, errors, native tools), `toolhost-store`
//! (the store), `toolhost-core` (configuration, manifests, permission, the
//! registry, output bounding, the event log), `toolhost-oci` (registries),
//! `toolhost-runtime` (the wasm runtime, outbound HTTP, Code Mode's
//! interpreter), then this one: settlement, Code Mode's `execute` tool and
//! the facade. Embedders depend on this crate alone; it re-exports what
//! they use. The MCP server and bridge are `toolhost-mcp`, above it.

#![deny(missing_docs)]

// The layers below this crate, under the names their modules had when they
// were modules of it.
pub use toolhost_core::{config, manifest, permission, registry};
use toolhost_core::{output, sink};
use toolhost_model as model;
use toolhost_model::error;
pub use toolhost_model::files;
use toolhost_runtime::wasm;
pub use toolhost_store as store;

mod code;
mod facade;
pub mod limits;
#[cfg(feature = "oci")]
pub use toolhost_oci as oci;
mod settle;

#[cfg(feature = "bench")]
#[doc(hidden)]
pub use toolhost_runtime::bench_support;

pub use error::{CompileLimit, Error, GrantError, LoadError, OciError, Unsupported};
pub use facade::host::{Host, HostBuilder};
pub use facade::location::Location;
pub use facade::snapshot::Snapshot;
pub use model::budget::{Budget, BudgetOverrides, Limit, Usage};
pub use model::call::Call;
pub use model::content::{ContentPart, ToolFailure, ToolResponse};
pub use model::context::{CallContext, Caller};
pub use model::execution::ToolContext;
pub use model::outcome::{Completed, Interruption, Outcome, Settlement};
pub use model::plugin::{CodeTier, PluginInfo};
pub use model::source::PluginSource;
pub use model::tool::{Tool, ToolDefinition};
pub use registry::{Registration, RegistrationError};
pub use tokio_util::sync::CancellationToken;
pub use wasm::activation::Activation;
pub use wasm::bindings::{WIT_PACKAGE, WIT_VERSION};
pub use wasm::load::Plugin;
pub use wasm::worker::compile_worker;

/// How calls end, in detail: who is at fault for a defect, what a
/// model-visible error was about, retained outputs, captured logs.
pub mod outcome {
    pub use crate::model::outcome::{
        Culprit, Defect, DefectKind, ErrorKind, FINAL_STEP_MESSAGE, FaultKind, HostFault, Logs,
        RetainedOutput, Status, UnknownStatus,
    };
}

/// Events: progress, audited requests and outcomes, the [`EventSink`]
/// that receives them and the JSON Lines event log.
///
/// [`EventSink`]: events::EventSink
pub mod events {
    pub use crate::model::event::{
        CallEvents, EventSink, ProgressEvent, RequestEvent, SinkError, SinkFuture,
    };
    pub use crate::sink::{JsonLinesBuilder, JsonLinesSink};
}

/// JSON Schemas as the host compiles and checks them.
pub mod schema {
    pub use crate::model::schema::{Schema, SchemaError, Violation, Violations};
}

/// After-hooks: the embedder's last word on a settled call (R18).
pub mod hooks {
    pub use crate::model::hook::{AfterHook, HookCall};
}

/// The seam between settlement and what runs a tool, for tool sources
/// built outside this crate (the MCP bridge in `toolhost-mcp`): settlement
/// hands an [`Executor`](execution::Executor) an
/// [`Invocation`](execution::Invocation) and gets back an
/// [`Execution`](execution::Execution).
pub mod execution {
    pub use crate::model::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation};
}

/// Slots shared fairly between keys (sessions), as the runtime and the MCP
/// server's admission both use them.
pub mod slots {
    pub use crate::wasm::slots::{FairSlots, SlotPermit};
}

/// Guest text cut to a bound, with a marker that says how much there was.
pub mod text {
    pub use crate::model::text::{MAX_MESSAGE_BYTES, truncate};
}
