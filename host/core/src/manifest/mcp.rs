//! A manifest's `[[mcp]]` tables: MCP servers as tool sources
//! ([`McpServerConfig`]), read from TOML.
//!
//! ```toml
//! [[mcp]]
//! name = "everything"                # names the server in errors and rules
//! command = "npx"                    # a child process speaking MCP on stdio
//! args = ["--no-install", "@modelcontextprotocol/server-everything"]
//! env = { LOG_LEVEL = "warn" }       # added to PATH and HOME, the only ones passed
//! # url = "https://mcp.example.com/mcp"   # or streamable HTTP
//! # headers = { "X-Team" = "tools" }
//! # bearer_token_env = "EXAMPLE_TOKEN"    # `Authorization: Bearer $EXAMPLE_TOKEN`
//! prefix = "everything_"             # default: "<name>_"
//! per_session = false                # serve: one for each MCP session
//!
//! [mcp.limits]
//! timeout = "30s"                    # each call's deadline
//!
//! [[mcp.rules]]                      # each call asks `mcp` on `<name>/<tool>`
//! action = "mcp"
//! resource = "everything/*"
//! effect = "allow"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::mcp::{McpServerConfig, McpTransport};
use crate::manifest::parse_duration;
use crate::model::tool::normalize_name;
use crate::permission::{Rule, Rules};

/// One `[[mcp]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpEntry {
    name: String,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    prefix: Option<String>,
    #[serde(default)]
    per_session: bool,
    #[serde(default)]
    limits: McpLimits,
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct McpLimits {
    timeout: Option<String>,
}

impl McpEntry {
    /// The server this table describes; relative paths are from `base`.
    pub(super) fn resolve(self, base: &Path) -> Result<McpServerConfig, String> {
        let what = format!("MCP server `{}`", self.name);
        if normalize_name(&self.name).as_deref() != Ok(self.name.as_str()) {
            return Err(format!(
                "{what}: a server name is 1 to 64 letters, digits, `_` or `-` (it names the server in permission rules)"
            ));
        }
        let transport = match (self.command, self.url) {
            (Some(command), None) => McpTransport::Stdio {
                command,
                args: self.args,
                env: self.env,
                cwd: self.cwd.map(|c| base.join(c)),
            },
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                McpTransport::Http {
                    url,
                    headers: self.headers,
                    bearer_token_env: self.bearer_token_env,
                }
            }
            (None, Some(url)) => {
                return Err(format!("{what}: url `{url}` is not http:// or https://"));
            }
            _ => {
                return Err(format!(
                    "{what}: give exactly one of `command` (a child process on stdio) or `url` (streamable HTTP)"
                ));
            }
        };
        Ok(McpServerConfig {
            name: self.name,
            transport,
            prefix: self.prefix,
            timeout: self
                .limits
                .timeout
                .as_deref()
                .map(parse_duration)
                .transpose()?,
            rules: Rules(self.rules),
            per_session: self.per_session,
        })
    }
}
