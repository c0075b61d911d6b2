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

#[doc(hidden)]
pub mod bench_support;
mod bindings;
pub mod bound;
pub mod budget;
mod engine;
mod error;
mod events;
mod execute;
pub mod grants;
mod host;
mod imports;
pub mod manifest;
pub mod permission;
mod plugin;
mod registry;
mod schema;
mod settle;
mod stdio;
mod store;
mod tool;

pub use bindings::{WIT_PACKAGE, WIT_VERSION};
pub use budget::{Budget, Limit, Limits, Usage};
pub use engine::{POOL_INSTANCES, default_cache_dir};
pub use error::{Defect, DefectKind, Error, LoadError};
pub use events::{EventSink, JsonLinesSink, ProgressEvent};
pub use execute::{Interruption, Logs};
pub use host::{Host, HostBuilder, Location};
pub use plugin::{Activation, Plugin, PluginInfo, PluginOptions};
pub use registry::{CatalogEntry, Level, Registration, RegistrationError, Scope, SnapshotOptions};
pub use schema::{Schema, SchemaError, Violation};
pub use settle::{
    AfterHook, Call, Completed, ErrorKind, FINAL_STEP_MESSAGE, HookCall, MAX_METADATA_BYTES,
    MAX_PARTIAL_BYTES, Outcome, Settlement, Snapshot,
};
pub use stdio::MAX_CAPTURED_BYTES;
pub use tokio_util::sync::CancellationToken;
pub use tool::{
    CallContext, ContentPart, MAX_NAME_LEN, NameError, RESERVED_NAME, Tool, ToolContext,
    ToolDefinition, ToolFailure, ToolResponse, normalize_name,
};
