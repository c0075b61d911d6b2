//! Configuration as data, checked but not acted on: what a plugin is
//! given (options, grants, outbound HTTP grants and the networks they never
//! reach unless named), how it is compiled, and how an MCP server is
//! reached. No I/O: the layers above read manifests into these and act on
//! them.

pub mod authority;
pub mod compile;
pub mod grants;
pub mod http;
pub mod mcp;
pub mod networks;
pub mod plugin;

pub use crate::model::budget::{HttpLimits, OutputBounds};
pub use compile::{CompileLimits, CompileWorker};
pub use grants::{DirGrant, EnvGrant, Grants};
pub use http::{HttpGrant, HttpGrantError};
pub use mcp::{McpServerConfig, McpTransport};
pub use plugin::PluginOptions;
