//! Grants that come from a manifest are the user's call: a manifest can
//! arrive with a third-party plugin. Each is shown on stderr when loading;
//! the risky ones (outside the manifest's directory, read-write, the host's
//! own environment values, or any HTTP origin) need `--yes` or a "y" on a
//! terminal.
//! Grants from the user's own flags need nothing. An MCP server a manifest
//! bridges in is shown too; one it starts as a command runs outside the
//! sandbox, so it needs the same confirmation.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use toolhost::config::{DirGrant, EnvGrant, HttpGrant, McpServerConfig, McpTransport};
use toolhost::manifest::Manifest;

use crate::{Failure, stdio, terminal, usage};

/// One grant as the user reads it.
struct Shown {
    text: String,
    /// Whether it needs the user's confirmation.
    risky: bool,
}

/// Shows the grants `entry` (from the manifest at `manifest`) gives its
/// plugin, and has the user confirm the risky ones unless `yes`.
pub(crate) fn review(manifest: &Path, entry: &Manifest, yes: bool) -> Result<(), Failure> {
    let grants = &entry.options.grants;
    let base = own_dir(manifest);
    let shown: Vec<Shown> = grants
        .dirs
        .iter()
        .map(|d| dir(d, base.as_deref()))
        .chain(grants.env.iter().map(env))
        .chain(grants.http.iter().map(http))
        .collect();
    let who = format!(
        "manifest {} grants plugin {}",
        terminal::line(&manifest.display().to_string()),
        terminal::line(&plugin_name(entry))
    );
    for s in &shown {
        stdio::note(&format!("{who}: {}", s.text));
    }
    confirm(&who, &shown, yes)
}

/// Shows the MCP server a manifest bridges in; one it starts as a command
/// needs the user's confirmation unless `yes`.
pub(crate) fn review_mcp(
    manifest: &Path,
    server: &McpServerConfig,
    yes: bool,
) -> Result<(), Failure> {
    let who = format!(
        "manifest {} bridges MCP server {}",
        terminal::line(&manifest.display().to_string()),
        terminal::line(&server.name)
    );
    let shown = match &server.transport {
        McpTransport::Stdio { command, args, .. } => Shown {
            text: format!(
                "it runs `{}` outside the sandbox",
                terminal::line(
                    &std::iter::once(command)
                        .chain(args)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            ),
            risky: true,
        },
        McpTransport::Http { url, .. } => Shown {
            text: format!("it connects to {}", terminal::line(url)),
            risky: false,
        },
        _ => Shown {
            text: "it uses a transport this CLI does not know".into(),
            risky: true,
        },
    };
    stdio::note(&format!("{who}: {}", shown.text));
    confirm(&who, &[shown], yes)
}

/// Has the user confirm the risky items of `shown` unless `yes`.
fn confirm(who: &str, shown: &[Shown], yes: bool) -> Result<(), Failure> {
    let risky: Vec<&str> = shown
        .iter()
        .filter(|s| s.risky)
        .map(|s| s.text.as_str())
        .collect();
    if risky.is_empty() || yes {
        return Ok(());
    }
    let refuse = |why: &str| usage(anyhow::anyhow!("{who}: {}; {why}", risky.join("; ")));
    if !interactive() {
        return Err(refuse(
            "these need your confirmation: rerun with --yes to allow them, or on a terminal to be asked",
        ));
    }
    if confirmed() {
        Ok(())
    } else {
        Err(refuse("you did not allow these"))
    }
}

/// The manifest's own directory, canonical; `None` if it cannot be resolved
/// (then every directory grant counts as outside it).
fn own_dir(manifest: &Path) -> Option<PathBuf> {
    let dir = manifest.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::canonicalize(dir.unwrap_or(Path::new("."))).ok()
}

fn dir(grant: &DirGrant, base: Option<&Path>) -> Shown {
    // Canonical paths, so `..`, `/` and symlinks cannot pass for inside.
    let canonical = std::fs::canonicalize(&grant.host).ok();
    let outside = !matches!((&canonical, base), (Some(c), Some(b)) if c.starts_with(b));
    let host = canonical.as_deref().unwrap_or(&grant.host);
    let guest = grant
        .guest
        .clone()
        .unwrap_or_else(|| grant.host.display().to_string());
    let access = if grant.writable {
        "read-write"
    } else {
        "read-only"
    };
    let where_ = if outside {
        " (outside the manifest's directory)"
    } else {
        ""
    };
    Shown {
        text: format!(
            "{access} access to {} as {}{where_}",
            terminal::line(&host.display().to_string()),
            terminal::line(&guest)
        ),
        risky: outside || grant.writable,
    }
}

fn env(grant: &EnvGrant) -> Shown {
    let name = terminal::line(&grant.name);
    match grant.value {
        Some(_) => Shown {
            text: format!("environment variable {name} (value set by the manifest)"),
            risky: false,
        },
        None => Shown {
            text: format!("environment variable {name} with this machine's value"),
            risky: true,
        },
    }
}

/// Network access is always the user's call.
fn http(grant: &HttpGrant) -> Shown {
    Shown {
        text: format!("HTTP requests to {}", terminal::line(grant.pattern())),
        risky: true,
    }
}

fn plugin_name(entry: &Manifest) -> String {
    entry.options.name.clone().unwrap_or_else(|| {
        entry.path.file_stem().map_or_else(
            || entry.path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    })
}

/// Someone at a terminal can answer.
fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks "Allow these grants? [y/N]"; only "y" or "yes" allows.
fn confirmed() -> bool {
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "Allow these? [y/N] ");
    let _ = stderr.flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok()
        && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
