//! `cargo xtask layers`: prints the library's layers, bottom to top, and
//! checks that its modules import only from their own layer or below (also
//! through the crate root's re-exports) and that no two modules import each
//! other, even indirectly. [`LAYERS`] is the one list of the layers; the
//! library's docs and the README show what this prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The top-level modules of host/src, layer by layer, bottom to top: what
/// each layer is for, and its modules.
const LAYERS: &[(&str, &[&str])] = &[
    ("model types", &["model"]),
    (
        "errors, bounded file reading, the store, permission rules",
        &["error", "files", "store", "permission"],
    ),
    (
        "configuration: plugin options, grants, HTTP grants and blocked networks, compile limits, MCP servers",
        &["config"],
    ),
    (
        "output bounding and retention, the registry, the event log",
        &["output", "registry", "sink"],
    ),
    ("manifests: TOML into configuration", &["manifest"]),
    (
        "the wasm runtime, outbound HTTP, native tools, plugins from OCI registries",
        &["wasm", "net", "native", "oci"],
    ),
    ("settlement", &["settle"]),
    ("Code Mode", &["code"]),
    ("the facade: Host, Location, Snapshot", &["facade"]),
    ("benchmark support", &["bench_support"]),
    ("the crate root: docs and re-exports", &["limits"]),
];

/// Module path (`settle::hooks`) → source text, for every file of `src`.
fn modules(src: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![src.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src)?.with_extension("");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            out.insert(parts.join("::"), std::fs::read_to_string(&path)?);
        }
    }
    Ok(out)
}

/// The modules each module names through `crate::` paths (a root
/// re-export standing for the module it comes from), test code aside.
fn imports(
    modules: &BTreeMap<String, String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (name, text) in modules {
        // Test code and comments (doc links name items, they import none)
        // aside.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let mut targets = BTreeSet::new();
        for (at, _) in code.match_indices("crate::") {
            let path: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // The longest prefix of the path that is a module.
            let segments: Vec<&str> = path.split("::").collect();
            let target = (1..=segments.len())
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|m| modules.contains_key(m))
                .or_else(|| reexports.get(segments[0]).cloned());
            if let Some(target) = target
                && &target != name
                && !name.starts_with(&format!("{target}::"))
            {
                targets.insert(target);
            }
        }
        edges.insert(name.clone(), targets);
    }
    edges
}

fn layer(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&top))
}

/// Names the crate root re-exports (`pub use a::b::{C, D}` makes `C` and
/// `D`), with the module each comes from, so `crate::C` counts as an import
/// of `a::b`.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(at) = statement.find("pub use ") else {
            continue;
        };
        let path = statement[at + "pub use ".len()..].trim();
        // The crates below are layers the compiler already enforces.
        if path.starts_with("toolhost_") {
            continue;
        }
        let (module, names) = match path.split_once("::{") {
            Some((module, names)) => (module.to_owned(), names.trim_end_matches('}').to_owned()),
            None => match path.rsplit_once("::") {
                Some((module, name)) => (module.to_owned(), name.to_owned()),
                None => continue,
            },
        };
        for name in names.split(',') {
            let name = name.trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                out.insert(name.to_owned(), module.clone());
            }
        }
    }
    out
}

/// Prints the layers, bottom to top.
fn print_layers() {
    eprintln!("layers, bottom to top (a module imports only from its layer or below):");
    for (i, (what, modules)) in LAYERS.iter().enumerate() {
        eprintln!("  {i}. {}: {what}", modules.join(", "));
    }
}

/// A chain of imports from `start` back to `start`, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_owned()]];
    let mut seen = BTreeSet::new();
    while let Some(chain) = stack.pop() {
        let last = chain.last()?;
        for next in edges.get(last).into_iter().flatten() {
            if next == start {
                let mut found = chain.clone();
                found.push(next.clone());
                return Some(found);
            }
            if seen.insert(next.clone()) {
                let mut longer = chain.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

pub(crate) fn check(root: &Path) -> Result<()> {
    print_layers();
    let modules = modules(&root.join("host/src"))?;
    let reexports = root_reexports(modules.get("").map_or("", String::as_str));
    let edges = imports(&modules, &reexports);
    let mut problems = Vec::new();
    for (from, targets) in &edges {
        let Some(own) = layer(from) else {
            if !from.is_empty() {
                problems.push(format!(
                    "module `{from}` has no layer in xtask/src/layers.rs"
                ));
            }
            continue;
        };
        for to in targets {
            match layer(to) {
                Some(theirs) if theirs > own => {
                    problems.push(format!("`{from}` imports `{to}` from a layer above it"))
                }
                None => problems.push(format!("module `{to}` has no layer")),
                _ => {}
            }
        }
        if let Some(chain) = cycle(&edges, from) {
            problems.push(format!("import circle: {}", chain.join(" -> ")));
        }
    }
    if problems.is_empty() {
        eprintln!(
            "layers: {} modules, no upward import, no circle",
            modules.len()
        );
        return Ok(());
    }
    problems.sort();
    problems.dedup();
    bail!("{}", problems.join("\n"))
}
