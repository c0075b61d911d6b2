//! MCP servers as tool sources: how to reach one (a child process over
//! stdio, or streamable HTTP), what to call its tools, its deadline and its
//! permission rules. A manifest's `[[mcp]]` tables describe them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::permission::Rules;

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout. It gets only
    /// `PATH`, `HOME` and `env` from the host's environment; its stderr is
    /// discarded.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables set for it.
        env: BTreeMap<String, String>,
        /// Its working directory (default: the host process's).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at `url`.
    Http {
        /// The MCP endpoint, `http://` or `https://`.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
        /// The environment variable holding a bearer token, read when
        /// connecting.
        bearer_token_env: Option<String>,
    },
}

/// An MCP server bridged in as a tool source.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The server's name: in errors, permission resources
    /// (`<name>/<tool>`) and the default tool-name prefix.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Put before each of its tool names (normalized with R1); default
    /// `<name>_`. Empty keeps the server's names.
    pub prefix: Option<String>,
    /// Each call's deadline; default: the host's budget timeout.
    pub timeout: Option<Duration>,
    /// Permission rules for its calls, over the host's (last match wins).
    pub rules: Rules,
    /// `toolhost serve` connects one for each MCP session, its tools
    /// visible only in that session (a session placement, R35), instead of
    /// one for all. Default: false.
    pub per_session: bool,
}

impl McpServerConfig {
    /// A server run as a child process: `command` with `args`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> McpServerConfig {
        let transport = McpTransport::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        };
        McpServerConfig::new(name.into(), transport)
    }

    /// A server reached over streamable HTTP at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> McpServerConfig {
        let transport = McpTransport::Http {
            url: url.into(),
            headers: BTreeMap::new(),
            bearer_token_env: None,
        };
        McpServerConfig::new(name.into(), transport)
    }

    fn new(name: String, transport: McpTransport) -> McpServerConfig {
        McpServerConfig {
            name,
            transport,
            prefix: None,
            timeout: None,
            rules: Rules::default(),
            per_session: false,
        }
    }

    /// The name the model sees for the server's tool `tool`: the prefix
    /// (default `<name>_`) and the tool's name, normalized as any tool
    /// name is (R1) when registered.
    pub fn tool_name(&self, tool: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}{tool}"),
            None => format!("{}_{tool}", self.name),
        }
    }
}
