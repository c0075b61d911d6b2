//! Manifests (TOML): where a plugin's component is and how to run it, and
//! which MCP servers to bridge in (`[[mcp]]`, see [`crate::config::McpServerConfig`]).
//!
//! The manifest format lives in the library, parsing included, so every
//! front end (the CLI's `list`/`call`/`check`, `toolhost serve`, an
//! embedder) reads `toolhost.toml` the same way. A manifest describes one
//! plugin; a host config lists several under `[[plugin]]`, and MCP servers
//! under `[[mcp]]`. Paths are
//! relative to the manifest's directory. Unknown keys are errors, reported
//! with their line.
//!
//! ```toml
//! path = "text_tools.wasm"      # the component (required)
//! name = "text-tools"           # default: the file stem
//! version = "0.1.0"             # default: a short content hash
//! samples = "samples.toml"      # sample calls for `toolhost check`
//!
//! [config]                      # JSON object passed to activate
//! greeting = "hi"
//!
//! [limits]
//! fuel = 1_000_000_000
//! timeout = "5s"                # ms, s, m
//! memory = "64MiB"              # B, KiB, MiB, GiB
//! concurrency = 4
//! compile_timeout = "2m"        # compiling it (default 120 s)
//! compile_memory = "2GiB"       # compiling it, in a compile worker
//!
//! [grants]
//! dirs = [{ host = "data", guest = "/data", writable = false }]
//! env = ["LANG", { name = "MODE", value = "test" }]
//!
//! [[rules]]                     # permission rules; the last match wins
//! action = "edit"
//! resource = "/data/*"
//! effect = "allow"              # allow | deny | ask
//! ```

pub mod mcp;

pub mod units;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::config::compile::CompileLimits;
use crate::config::grants::{DirGrant, EnvGrant, Grants};
use crate::config::http::HttpGrant;
use crate::config::plugin::PluginOptions;
use crate::error::LoadError;
use crate::files::read_regular_file;
use crate::model::budget::{BudgetOverrides, HttpLimits, OutputBounds};
use crate::model::source::PluginSource;
use crate::permission::{Rule, Rules};

use crate::config::mcp::McpServerConfig;
use mcp::McpEntry;
pub(crate) use units::{parse_duration, parse_size};

/// The largest manifest read: manifests are a few lines of TOML.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// One plugin as a manifest describes it, paths resolved.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The component: a file (relative paths resolved against the
    /// manifest's directory) or an `oci://` reference; see
    /// [`Manifest::source`].
    pub path: PathBuf,
    /// The sample calls file, if any.
    pub samples: Option<PathBuf>,
    /// How to load it.
    pub options: PluginOptions,
}

/// One tool source a manifest names.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Source {
    /// A wasm plugin.
    Plugin(Manifest),
    /// An MCP server to bridge in.
    Mcp(McpServerConfig),
}

/// A host config: several plugins and MCP servers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    plugin: Vec<Entry>,
    #[serde(default)]
    mcp: Vec<McpEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    path: PathBuf,
    name: Option<String>,
    version: Option<String>,
    samples: Option<PathBuf>,
    #[serde(default)]
    config: Option<toml::Table>,
    #[serde(default)]
    limits: LimitsEntry,
    #[serde(default)]
    grants: GrantsEntry,
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    fuel: Option<u64>,
    timeout: Option<String>,
    memory: Option<Size>,
    concurrency: Option<usize>,
    max_output_lines: Option<usize>,
    max_output_bytes: Option<usize>,
    max_machine_output: Option<Size>,
    http_requests: Option<u32>,
    http_concurrency: Option<usize>,
    http_request_bytes: Option<Size>,
    http_response_bytes: Option<Size>,
    compile_timeout: Option<String>,
    compile_memory: Option<Size>,
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GrantsEntry {
    #[serde(default)]
    dirs: Vec<DirGrant>,
    #[serde(default)]
    env: Vec<EnvEntry>,
    #[serde(default)]
    http: Vec<HttpGrant>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum EnvEntry {
    Name(String),
    Value { name: String, value: Option<String> },
}

impl Manifest {
    /// Where the component comes from.
    pub fn source(&self) -> PluginSource {
        PluginSource::from_path(&self.path)
    }
}

impl Source {
    /// Reads a manifest or host config: one plugin, or several plugins
    /// under `[[plugin]]` and MCP servers under `[[mcp]]`, in that order.
    pub fn load(path: &Path) -> Result<Vec<Source>, LoadError> {
        let bytes = read_regular_file(path, MAX_MANIFEST_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| LoadError::Manifest {
            path: path.to_owned(),
            message: "it is not UTF-8 text".into(),
        })?;
        let err = |message: String| LoadError::Manifest {
            path: path.to_owned(),
            message,
        };
        let parse_err = |e: toml::de::Error| err(e.to_string().trim_end().to_owned());
        let table: toml::Table = toml::from_str(&text).map_err(parse_err)?;
        // Parse the text again (not the table) so errors keep their lines.
        let config = if table.contains_key("plugin") || table.contains_key("mcp") {
            toml::from_str::<Config>(&text).map_err(parse_err)?
        } else {
            Config {
                plugin: vec![toml::from_str::<Entry>(&text).map_err(parse_err)?],
                mcp: Vec::new(),
            }
        };
        let base = path.parent().unwrap_or(Path::new("."));
        if config.plugin.is_empty() && config.mcp.is_empty() {
            return Err(err(
                "it names no tool source; add `path = \"plugin.wasm\"`, a [[plugin]] table or an [[mcp]] table".into(),
            ));
        }
        let plugins = config
            .plugin
            .into_iter()
            .map(|e| e.resolve(base).map(Source::Plugin));
        let servers = config
            .mcp
            .into_iter()
            .map(|e| e.resolve(base).map(Source::Mcp));
        plugins.chain(servers).map(|s| s.map_err(err)).collect()
    }
}

impl Entry {
    fn resolve(self, base: &Path) -> Result<Manifest, String> {
        let config = match self.config {
            Some(table) => serde_json::to_value(table).map_err(|e| format!("config: {e}"))?,
            None => Value::Object(Default::default()),
        };
        Ok(Manifest {
            // Registry references are not relative to the manifest.
            path: match PluginSource::from_path(&self.path) {
                PluginSource::File(path) => base.join(path),
                _ => self.path,
            },
            samples: self.samples.map(|s| base.join(s)),
            options: PluginOptions {
                name: self.name,
                version: self.version,
                config,
                overrides: self.limits.overrides()?,
                concurrency: self.limits.concurrency()?,
                bounds: self.limits.bounds()?,
                http_limits: self.limits.http()?,
                compile: self.limits.compile()?,
                grants: self.grants.resolve(base),
                rules: Rules(self.rules),
            },
        })
    }
}

impl Size {
    fn bytes(self) -> Result<u64, String> {
        match self {
            Size::Bytes(b) => Ok(b),
            Size::Text(t) => parse_size(&t),
        }
    }
}

impl LimitsEntry {
    fn overrides(&self) -> Result<BudgetOverrides, String> {
        Ok(BudgetOverrides {
            fuel: self.fuel,
            timeout: self.timeout.as_deref().map(parse_duration).transpose()?,
            memory: self.memory.clone().map(Size::bytes).transpose()?,
        })
    }

    /// Bounds on compiling the plugin; unset ones take the defaults.
    fn compile(&self) -> Result<CompileLimits, String> {
        let defaults = CompileLimits::default();
        Ok(CompileLimits {
            timeout: self
                .compile_timeout
                .as_deref()
                .map(parse_duration)
                .transpose()?
                .unwrap_or(defaults.timeout),
            memory: self
                .compile_memory
                .clone()
                .map(Size::bytes)
                .transpose()?
                .unwrap_or(defaults.memory),
        })
    }

    /// The plugin's own bounds, when it sets any; unset ones take the
    /// defaults.
    fn bounds(&self) -> Result<Option<OutputBounds>, String> {
        if self.max_output_lines.is_none()
            && self.max_output_bytes.is_none()
            && self.max_machine_output.is_none()
        {
            return Ok(None);
        }
        let defaults = OutputBounds::default();
        let machine = self
            .max_machine_output
            .clone()
            .map(Size::bytes)
            .transpose()?;
        Ok(Some(OutputBounds {
            max_lines: self.max_output_lines.unwrap_or(defaults.max_lines),
            max_bytes: self.max_output_bytes.unwrap_or(defaults.max_bytes),
            max_machine_output: machine.map_or(defaults.max_machine_output, |m| {
                usize::try_from(m).unwrap_or(usize::MAX)
            }),
        }))
    }
}

impl LimitsEntry {
    /// The plugin's own outbound HTTP limits, when it sets any; unset ones
    /// take the defaults.
    fn concurrency(&self) -> Result<Option<usize>, String> {
        match self.concurrency {
            Some(0) => Err("limits.concurrency is 0: a plugin needs at least 1 call slot".into()),
            n => Ok(n),
        }
    }

    fn http(&self) -> Result<Option<HttpLimits>, String> {
        if self.http_requests.is_none()
            && self.http_concurrency.is_none()
            && self.http_request_bytes.is_none()
            && self.http_response_bytes.is_none()
        {
            return Ok(None);
        }
        let defaults = HttpLimits::default();
        let bytes = |size: &Option<Size>, default| size.clone().map_or(Ok(default), Size::bytes);
        Ok(Some(HttpLimits {
            max_requests: self.http_requests.unwrap_or(defaults.max_requests),
            max_concurrent: self.http_concurrency.unwrap_or(defaults.max_concurrent),
            max_request_bytes: bytes(&self.http_request_bytes, defaults.max_request_bytes)?,
            max_response_bytes: bytes(&self.http_response_bytes, defaults.max_response_bytes)?,
        }))
    }
}

impl GrantsEntry {
    /// Directories relative to the manifest's own directory.
    fn resolve(self, base: &Path) -> Grants {
        let dirs = self.dirs.into_iter().map(|d| DirGrant {
            host: base.join(d.host),
            ..d
        });
        let env = self.env.into_iter().map(|e| match e {
            EnvEntry::Name(name) => EnvGrant { name, value: None },
            EnvEntry::Value { name, value } => EnvGrant { name, value },
        });
        Grants {
            dirs: dirs.collect(),
            env: env.collect(),
            http: self.http,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::mcp::McpTransport;

    /// The plugins of a manifest that names only plugins.
    fn plugins(path: &Path) -> Result<Vec<Manifest>, LoadError> {
        Ok(Source::load(path)?
            .into_iter()
            .map(|s| match s {
                Source::Plugin(m) => m,
                Source::Mcp(c) => panic!("an MCP server: {c:?}"),
            })
            .collect())
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn unknown_keys_are_errors_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "path = \"a.wasm\"\n\n[limits]\nfule = 3\n").unwrap();
        let err = plugins(&path).unwrap_err().to_string();
        assert!(err.contains("fule"), "{err}");
        assert!(err.contains("line 4"), "{err}");
    }

    #[test]
    fn a_concurrency_of_zero_is_refused_not_raised_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "path = \"a.wasm\"\n[limits]\nconcurrency = 0\n").unwrap();
        let err = plugins(&path).unwrap_err().to_string();
        assert!(err.contains("limits.concurrency is 0"), "{err}");
    }

    #[test]
    fn manifest_resolves_paths_relative_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "path = \"a.wasm\"\nsamples = \"s.toml\"\n[limits]\nmemory = \"16MiB\"\ntimeout = \"200ms\"\nmax_output_lines = 10\n[grants]\ndirs = [{ host = \"data\", guest = \"/data\" }]\nenv = [\"LANG\"]\n[[rules]]\naction = \"edit\"\nresource = \"*\"\neffect = \"deny\"\n",
        )
        .unwrap();
        let m = plugins(&path).unwrap().remove(0);
        assert_eq!(m.path, dir.path().join("a.wasm"));
        assert_eq!(m.samples, Some(dir.path().join("s.toml")));
        assert_eq!(m.options.overrides.memory, Some(16 << 20));
        assert_eq!(
            m.options.bounds,
            Some(OutputBounds {
                max_lines: 10,
                ..OutputBounds::default()
            })
        );
        assert_eq!(m.options.grants.dirs[0].host, dir.path().join("data"));
        assert_eq!(m.options.rules.0.len(), 1);
    }

    #[test]
    fn http_grants_and_limits_parse_and_bad_patterns_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "path = \"a.wasm\"\n[limits]\nhttp_requests = 3\nhttp_response_bytes = \"1MiB\"\n[grants]\nhttp = [\"https://api.example.com/*\", \"GET http://127.0.0.1:8080/*\"]\n",
        )
        .unwrap();
        let m = plugins(&path).unwrap().remove(0);
        assert_eq!(m.options.grants.http.len(), 2);
        assert_eq!(
            m.options.grants.http[1].pattern(),
            "GET http://127.0.0.1:8080/*"
        );
        let limits = m.options.http_limits.unwrap();
        assert_eq!(
            (limits.max_requests, limits.max_response_bytes),
            (3, 1 << 20)
        );
        std::fs::write(
            &path,
            "path = \"a.wasm\"\n[grants]\nhttp = [\"api.example.com\"]\n",
        )
        .unwrap();
        let err = plugins(&path).unwrap_err().to_string();
        assert!(
            err.contains("not an HTTP grant") && err.contains("line 3"),
            "{err}"
        );
    }

    #[test]
    fn a_host_config_lists_several_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.toml");
        std::fs::write(
            &path,
            "[[plugin]]\npath = \"a.wasm\"\n[plugin.config]\nmode = \"fast\"\n\n[[plugin]]\npath = \"b.wasm\"\nname = \"bee\"\n[plugin.grants]\nenv = [{ name = \"MODE\", value = \"x\" }]\n",
        )
        .unwrap();
        let all = plugins(&path).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].options.config, serde_json::json!({"mode": "fast"}));
        assert_eq!(all[1].options.name.as_deref(), Some("bee"));
        assert_eq!(all[1].options.grants.env[0].value.as_deref(), Some("x"));
        std::fs::write(&path, "[[plugin]]\npath = \"a.wasm\"\nbogus = 1\n").unwrap();
        let err = plugins(&path).unwrap_err().to_string();
        assert!(err.contains("bogus") && err.contains("line 3"), "{err}");
    }

    #[test]
    fn mcp_servers_parse_beside_plugins_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.toml");
        std::fs::write(
            &path,
            "[[plugin]]\npath = \"a.wasm\"\n\n[[mcp]]\nname = \"files\"\ncommand = \"npx\"\nargs = [\"server\"]\nenv = { A = \"1\" }\ncwd = \"srv\"\n[mcp.limits]\ntimeout = \"2s\"\n\n[[mcp]]\nname = \"remote\"\nurl = \"https://mcp.example.com/mcp\"\nbearer_token_env = \"TOKEN\"\nprefix = \"\"\n",
        )
        .unwrap();
        let sources = Source::load(&path).unwrap();
        assert!(matches!(&sources[0], Source::Plugin(m) if m.path == dir.path().join("a.wasm")));
        let Source::Mcp(files) = &sources[1] else {
            panic!("{:?}", sources[1]);
        };
        assert_eq!(files.timeout, Some(Duration::from_secs(2)));
        assert_eq!(files.tool_name("read"), "files_read");
        let McpTransport::Stdio {
            command, cwd, env, ..
        } = &files.transport
        else {
            panic!("{files:?}");
        };
        assert_eq!((command.as_str(), env["A"].as_str()), ("npx", "1"));
        assert_eq!(cwd.as_deref(), Some(dir.path().join("srv").as_path()));
        let Source::Mcp(remote) = &sources[2] else {
            panic!("{:?}", sources[2]);
        };
        assert_eq!(
            remote.tool_name("read"),
            "read",
            "an empty prefix keeps the names"
        );
        assert!(
            matches!(&remote.transport, McpTransport::Http { bearer_token_env: Some(v), .. } if v == "TOKEN")
        );

        for (bad, says) in [
            ("[[mcp]]\nname = \"x\"\n", "exactly one of `command`"),
            (
                "[[mcp]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://b\"\n",
                "exactly one of",
            ),
            (
                "[[mcp]]\nname = \"x\"\nurl = \"ftp://b\"\n",
                "not http:// or https://",
            ),
            (
                "[[mcp]]\nname = \"a b\"\ncommand = \"a\"\n",
                "letters, digits",
            ),
            (
                "[[mcp]]\nname = \"x\"\ncommand = \"a\"\nbogus = 1\n",
                "bogus",
            ),
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = Source::load(&path).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
