//! Toolhost runs agent tools written as WebAssembly components.
//!
//! Plugins are components of the `toolhost:plugin@0.1.0` world (see `wit/`).
//! An embedder builds a [`Host`], opens a [`Location`] per workspace, loads
//! and activates plugins (each activation registers its tools in a scope of
//! its own), takes a [`Snapshot`] per model request and settles the model's
//! calls against it. Settlement validates input and output against the
//! tools' JSON Schemas, runs each wasm call in a fresh instance under fuel,
//! deadline and memory budgets, bounds what reaches the model (retaining the
//! full output), and reports progress and outcomes to an [`EventSink`].
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
//! let outputs = tempfile::tempdir()?;
//! let host = Host::builder().output_dir(outputs.path()).build()?;
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
//! let context = CallContext {
//!     session_id: "ses_1".into(),
//!     agent: "build".into(),
//!     message_id: "msg_1".into(),
//!     call_id: "call_1".into(),
//! };
//! let settlement = snapshot
//!     .settle(Call::new("echo", r#"{"message":"hi"}"#, context.clone()))
//!     .await;
//! assert!(matches!(settlement.outcome, Outcome::Completed(_)));
//!
//! // Invalid input never runs the tool; the model gets an actionable error.
//! let settlement = snapshot.settle(Call::new("echo", "{}", context)).await;
//! assert_eq!(settlement.outcome.status(), "error");
//! # Ok(())
//! # }
//! ```
//!
//! Loading a plugin is one more call; its tools then appear in snapshots:
//!
//! ```no_run
//! # async fn run(location: toolhost::Location) -> Result<(), toolhost::Error> {
//! use toolhost::PluginOptions;
//!
//! let activation = location.load("text_tools.wasm", &PluginOptions::default()).await?;
//! // ... snapshots now include echo, word_count, regex_search ...
//! activation.unload(); // closes every registration it made
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

// Layers, bottom to top; a module never imports from a layer above it:
// model → permission, output, registry, sink → runtime → settle → code
// (Code Mode) → facade (and manifest, which describes how the facade loads
// plugins).
#[cfg(feature = "mcp")]
mod bridge;
mod code;
mod error;
mod facade;
mod manifest;
#[cfg(feature = "mcp")]
mod mcp;
mod model;
mod output;
mod permission;
mod registry;
mod runtime;
mod settle;
mod sink;

#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench_support;

#[cfg(feature = "mcp")]
pub use bridge::{MCP_CONNECT_TIMEOUT, MCP_RECONNECT_MAX, MCP_RECONNECT_MIN, McpConnection};
pub use error::{CompileLimit, Error, GrantError, LoadError, Unsupported};
pub use facade::host::{Host, HostBuilder};
pub use facade::location::Location;
pub use facade::snapshot::Snapshot;
pub use manifest::mcp::{McpServerConfig, McpTransport};
pub use manifest::{MAX_MANIFEST_BYTES, Manifest, Source, parse_duration, parse_size};
#[cfg(feature = "mcp")]
pub use mcp::admission::{
    MAX_CALLS_IN_FLIGHT, MAX_CALLS_PER_SESSION, MAX_CALLS_WAITING, MAX_SLOT_WAIT,
    OUTCOME_FLUSH_LIMIT,
};
#[cfg(feature = "mcp")]
pub use mcp::bindings::{MAX_SESSIONS, SESSION_IDLE_EXPIRY};
#[cfg(feature = "mcp")]
pub use mcp::handler::{MESSAGE_ID_KEY, SESSION_ID_KEY};
#[cfg(feature = "mcp")]
pub use mcp::http::{
    BODY_IDLE_TIMEOUT, BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, HttpOptions, HttpServer,
    MAX_BUFFERED_REQUEST_BYTES, MAX_CONNECTIONS, MAX_INITIALIZE_BYTES, MAX_REQUEST_BODY_BYTES,
    REPLY_FLUSH_LIMIT,
};
#[cfg(feature = "mcp")]
pub use mcp::results::{BUSY, DEFECT, INTERRUPTED, TOOL_METADATA_KEY};
#[cfg(feature = "mcp")]
pub use mcp::server::{
    Loading, MAX_LOADING_WAIT, McpServer, PERMISSION_ANSWER_TIMEOUT, ServeError,
};
#[cfg(feature = "mcp")]
pub use mcp::stdio::MAX_STDIO_MESSAGE_BYTES;
#[cfg(feature = "mcp")]
pub use mcp::watch::Watcher;
pub use model::approval::{Approver, PermissionDenied, PermissionRequest, Reply};
pub use model::budget::{
    Budget, BudgetOverrides, DEFAULT_CONCURRENCY, DEFAULT_FUEL, DEFAULT_HTTP_CONCURRENCY,
    DEFAULT_HTTP_REQUEST_BYTES, DEFAULT_HTTP_REQUESTS, DEFAULT_HTTP_RESPONSE_BYTES,
    DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, DEFAULT_MAX_MACHINE_OUTPUT, DEFAULT_MEMORY,
    DEFAULT_TIMEOUT, FUEL_YIELD_INTERVAL, HttpLimits, Limit, MAX_MEMORY, OutputBounds, Usage,
};
pub use model::call::Call;
pub use model::content::{ContentPart, ToolFailure, ToolResponse};
pub use model::context::CallContext;
pub use model::event::{EventSink, ProgressEvent, RequestEvent, SinkError, SinkFuture};
pub use model::execution::ToolContext;
pub use model::hook::{AfterHook, HookCall};
pub use model::outcome::{
    Completed, Culprit, Defect, DefectKind, ErrorKind, FINAL_STEP_MESSAGE, FaultKind, HostFault,
    Interruption, Logs, Outcome, RetainedOutput, Settlement,
};
pub use model::plugin::PluginInfo;
pub use model::schema::{
    MAX_COUNTED_VIOLATIONS, MAX_LISTED_VIOLATIONS, Schema, SchemaError, Violation, Violations,
};
pub use model::text::MAX_MESSAGE_BYTES;
pub use model::tool::{
    MAX_NAME_LEN, NameError, RESERVED_NAME, Tool, ToolDefinition, normalize_name,
};
pub use output::retain::{DEFAULT_RETENTION, DEFAULT_RETENTION_QUOTA};
pub use permission::{Effect, Rule, Rules};
pub use registry::placement::{Level, Registration, RegistrationError};
pub use registry::scope::Scope;
pub use registry::snapshot::{CatalogEntry, SnapshotOptions};
pub use runtime::activation::Activation;
pub use runtime::bindings::{WIT_PACKAGE, WIT_VERSION};
pub use runtime::cache::{DEFAULT_CACHE_LIMIT, default_cache_dir};
pub use runtime::compile_settings::{
    CompileLimits, CompileWorker, DEFAULT_COMPILE_MEMORY, DEFAULT_COMPILE_TIMEOUT,
};
pub use runtime::engine::DEFAULT_MAX_INSTANCES;
pub use runtime::grants::{DirGrant, EnvGrant, Grants};
pub use runtime::http::grant::{HttpGrant, HttpGrantError};
pub use runtime::imports::call::{MAX_PERMISSION_ITEMS, MAX_PERMISSION_TEXT, MAX_PROGRESS_BYTES};
pub use runtime::imports::program::{
    MAX_CONSOLE_BYTES, MAX_PROGRAM_CALLS, MAX_PROGRAM_CALLS_IN_FLIGHT,
};
pub use runtime::imports::registry::{
    MAX_DESCRIPTION_BYTES, MAX_REGISTERED_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_ACTIVATION,
};
pub use runtime::load::{MAX_PLUGIN_BYTES, Plugin, PluginOptions};
pub use runtime::stdio::MAX_CAPTURED_BYTES;
pub use runtime::store::{MAX_HANDLES_PER_CALL, MAX_HOST_COPY_BYTES};
pub use runtime::worker::compile_worker;
pub use settle::content::{MAX_MEDIA_BYTES, MAX_RESULT_MEDIA_BYTES};
pub use settle::metadata::MAX_METADATA_BYTES;
pub use settle::pipeline::MAX_PARTIAL_BYTES;
pub use sink::{EVENT_LOG_ROTATE_BYTES, EVENT_LOG_SEGMENTS, JsonLinesBuilder, JsonLinesSink};
pub use tokio_util::sync::CancellationToken;
