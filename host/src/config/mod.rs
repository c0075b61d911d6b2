//! Configuration as data, checked but not acted on: what a plugin is
//! given (options, grants, outbound HTTP grants and the networks they never
//! reach unless named), how it is compiled, and how an MCP server is
//! reached. No I/O: the layers above read manifests into these and act on
//! them.

pub mod authority;
pub(crate) mod compile;
pub(crate) mod grants;
pub(crate) mod http;
pub(crate) mod mcp;
pub(crate) mod networks;
pub(crate) mod plugin;

pub use crate::model::budget::{HttpLimits, OutputBounds};
pub use compile::{CompileLimits, CompileWorker};
pub use grants::{DirGrant, EnvGrant, Grants};
pub use http::{HttpGrant, HttpGrantError};
pub use mcp::{McpServerConfig, McpTransport};
pub use plugin::PluginOptions;
