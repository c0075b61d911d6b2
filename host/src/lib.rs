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
//! ```no_run
//! use toolhost::{Call, CallContext, Host, PluginOptions};
//!
//! # async fn run() -> Result<(), toolhost::Error> {
//! let host = Host::builder().build()?;
//! let location = host.location("/work/project");
//! let _activation = location
//!     .load("text_tools.wasm", &PluginOptions::default())
//!     .await?;
//!
//! // One snapshot per model request: advertise its definitions...
//! let snapshot = location.snapshot();
//! for definition in snapshot.definitions() {
//!     println!("{}: {}", definition.name, definition.description);
//! }
//!
//! // ...and settle the model's calls against it.
//! let context = CallContext {
//!     session_id: "ses_1".into(),
//!     agent: "build".into(),
//!     message_id: "msg_1".into(),
//!     call_id: "call_1".into(),
//! };
//! let settlement = snapshot
//!     .settle(Call::new("echo", r#"{"message":"hi"}"#, context))
//!     .await;
//! println!("{}", settlement.outcome.status());
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
    AfterHook, Call, Completed, ErrorKind, FINAL_STEP_MESSAGE, HookCall, Outcome, Settlement,
    Snapshot,
};
pub use stdio::MAX_CAPTURED_BYTES;
pub use tokio_util::sync::CancellationToken;
pub use tool::{
    CallContext, ContentPart, NameError, Tool, ToolContext, ToolDefinition, ToolFailure,
    ToolResponse, normalize_name,
};
