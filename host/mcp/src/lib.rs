//! `toolhost serve`: a location's tools over the Model Context Protocol
//! (R32), on the official Rust SDK `rmcp`, over stdio or streamable HTTP.
//! A crate of its own on top of `toolhost`: it uses the facade
//! ([`Location`](toolhost::Location), snapshots, settlement), the model
//! types, the store trait and the few seams `toolhost` publishes for it
//! (`toolhost::execution` for bridged tools, `toolhost::slots` for fair
//! admission); nothing below can depend on it.
//!
//! Each `tools/call` settles through the same pipeline as
//! [`Snapshot::settle`](toolhost::Snapshot::settle): input checked, the tool
//! isolated and bounded, outcomes durable. Progress becomes
//! `notifications/progress`; `notifications/cancelled` (or, for 2026-07-28
//! HTTP clients, a dropped response stream) cancels the call; a permission
//! the rules leave to "ask" is asked of the client (an elicitation, or an
//! input-required result for 2026-07-28 clients); retained output is an MCP
//! resource and the built-in `read_output` tool.
//!
//! [`McpServer`] serves a [`Location`](toolhost::Location): `load` and
//! `connect_mcp` fill it, then `serve_stdio`, or `http` and
//! [`HttpServer::run`]. [`McpConnection`] is the other direction: an MCP
//! server bridged in as a tool source ([`McpConnection::connect`]).

#![deny(missing_docs)]

pub(crate) mod admission;
mod ask;
pub(crate) mod bindings;
mod bridge;
mod call;
pub(crate) mod handler;
pub(crate) mod http;
pub(crate) mod metrics;
mod output;
mod progress;
pub(crate) mod results;
pub(crate) mod sealed;
pub(crate) mod server;
mod sessions;
pub(crate) mod stdio;
pub(crate) mod watch;

pub mod limits;

pub use bridge::McpConnection;
pub use handler::{MESSAGE_ID_KEY, SESSION_ID_KEY};
pub use http::{AuthError, AuthOptions, HttpOptions, HttpServer, TOOLS_SCOPE};
pub use metrics::{MeteredStore, Metrics};
pub use results::{BUSY_ERROR_CODE, DEFECT_ERROR_CODE, INTERRUPTED_ERROR_CODE, TOOL_METADATA_KEY};
pub use sealed::{StateKeyError, StateKeys};
pub use server::{Loading, McpServer, ServeError};
pub use watch::Watcher;
