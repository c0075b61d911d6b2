//! `cargo xtask layers`: the library's modules import only from their own
//! layer or below, and no two modules import each other, even indirectly.
//! The layers, bottom to top, are listed in host/src/lib.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// Top-level modules of host/src by layer, bottom (0) to top.
const LAYERS: &[(&str, u8)] = &[
    ("model", 0),
    ("error", 1),
    ("output", 1),
    ("permission", 1),
    ("registry", 1),
    ("sink", 1),
    ("runtime", 2),
    ("settle", 3),
    ("code", 4),
    ("facade", 4),
    ("manifest", 4),
    ("mcp", 5),
    ("bridge", 5),
    ("bench_support", 5),
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

/// The modules each module names through `crate::` paths, test code aside.
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (name, text) in modules {
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
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
                .find(|m| modules.contains_key(m));
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

fn layer(module: &str) -> Option<u8> {
    let top = module.split("::").next()?;
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, l)| *l)
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
    let modules = modules(&root.join("host/src"))?;
    let edges = imports(&modules);
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
