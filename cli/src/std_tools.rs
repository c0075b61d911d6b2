//! `--std DIR` and `--std-readonly DIR` (of `serve`, `call` and `list`):
//! the standard toolset this binary embeds (opencode's file and web tools,
//! built from `std-tools/`), loaded over DIR with a careful user's
//! permissions.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use toolhost::PluginSource;
use toolhost::config::{DirGrant, PluginOptions};
use toolhost::permission::{Effect, Rule, Rules};

use crate::common::{Common, Spec, Specs};
use crate::{Failure, usage};

/// Where the granted directory appears to the tools: the root their paths
/// are relative to (the plugins' default root, too).
pub(crate) const GUEST_ROOT: &str = "/workspace";

/// The actions allowed without asking: the tools that only look at files.
/// Everything else (`edit`, `webfetch`) asks, unless `--allow` or `--yes`
/// says otherwise.
pub(crate) const ALLOWED_ACTIONS: &[&str] = &["read", "glob", "grep", "list"];

/// The standard toolset's flags.
#[derive(Args, Clone, Default)]
pub(crate) struct StdArgs {
    /// Also load the standard tools (read, write, edit, apply_patch, glob,
    /// grep, list, webfetch) over DIR, granted read-write at /workspace:
    /// reads are allowed, edits and fetches ask (see docs/std-tools.md).
    #[arg(long = "std", value_name = "DIR", conflicts_with = "std_readonly")]
    std: Option<PathBuf>,
    /// Also load the standard tools that only look (read, glob, grep,
    /// list, webfetch) over DIR, granted read-only at /workspace.
    #[arg(long = "std-readonly", value_name = "DIR")]
    std_readonly: Option<PathBuf>,
}

impl StdArgs {
    /// Puts the standard tools before the named plugins in `specs` (so a
    /// plugin's tool of the same name wins), with `common`'s limits and
    /// grants, loaded from the bytes this binary embeds; nothing if no flag
    /// asks for them.
    pub(crate) fn add(&self, specs: &mut Specs, common: &Common) -> Result<(), Failure> {
        let (dir, writable) = match (&self.std, &self.std_readonly) {
            (Some(dir), _) => (dir, true),
            (None, Some(dir)) => (dir, false),
            (None, None) => return Ok(()),
        };
        let host = granted(dir)?;
        let [read, edit] = components()?;
        let mut components = vec![("std", read)];
        if writable {
            components.push(("std-edit", edit));
        }
        let mut loaded = Vec::new();
        for (name, wasm) in components {
            let mut options = PluginOptions::default();
            common.apply(&mut options);
            // Whatever --config says is for the named plugins.
            options.name = Some(name.to_owned());
            options.config = serde_json::json!({ "root": GUEST_ROOT });
            options.grants.dirs.push(DirGrant {
                host: host.clone(),
                guest: Some(GUEST_ROOT.to_owned()),
                writable,
            });
            options.rules = Rules(
                ALLOWED_ACTIONS
                    .iter()
                    .map(|action| Rule::new(*action, "*", Effect::Allow))
                    .collect(),
            );
            loaded.push(Spec {
                source: PluginSource::bytes(name, wasm),
                samples: None,
                options,
            });
        }
        specs.plugins.splice(0..0, loaded);
        Ok(())
    }
}

/// DIR, which must be a directory, as an absolute path.
fn granted(dir: &Path) -> Result<PathBuf, Failure> {
    let absolute = std::fs::canonicalize(dir)
        .with_context(|| format!("--std {}: cannot find the directory", dir.display()))
        .map_err(usage)?;
    if !absolute.is_dir() {
        return Err(usage(anyhow::anyhow!(
            "--std {}: not a directory; name the directory the tools may work in",
            dir.display()
        )));
    }
    Ok(absolute)
}

/// The components this binary embeds: the looking tools' and the
/// editing tools'.
#[cfg(feature = "std-tools")]
fn components() -> Result<[&'static [u8]; 2], Failure> {
    Ok([
        include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_std_read.wasm")),
        include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_std_edit.wasm")),
    ])
}

#[cfg(not(feature = "std-tools"))]
fn components() -> Result<[&'static [u8]; 2], Failure> {
    Err(usage(anyhow::anyhow!(
        "this toolhost was built without the standard toolset (the `std-tools` feature); rebuild it with default features to use --std"
    )))
}
