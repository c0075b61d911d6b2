//! Embeds `templates/` (the projects `toolhost new` writes) in the binary.
//!
//! Generates `$OUT_DIR/templates.rs`: one `(language, path, contents)` entry
//! per file of `templates/<language>/`, each contents an `include_bytes!`, so
//! editing a template rebuilds the CLI. Watching the directory makes cargo
//! rerun this script when a file is added or removed, which an embedding
//! macro alone cannot notice on stable Rust.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let templates = manifest_dir.join("templates");
    println!("cargo:rerun-if-changed={}", templates.display());

    let mut files = Vec::new();
    collect(&templates, &mut files);
    files.sort();

    let mut out = String::from(
        "/// Every template file: language, path inside the project, contents.\n\
         pub(crate) static FILES: &[(&str, &str, &[u8])] = &[\n",
    );
    for file in &files {
        let (lang, path) = split(&templates, file);
        let absolute = file.to_str().expect("template paths are UTF-8");
        writeln!(
            out,
            "    ({lang:?}, {path:?}, include_bytes!({absolute:?})),"
        )
        .unwrap();
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    fs::write(out_dir.join("templates.rs"), out).expect("cannot write templates.rs");
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("cannot read a directory entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// `templates/<language>/<path>` into the language and the `/`-separated path.
fn split(templates: &Path, file: &Path) -> (String, String) {
    let relative = file
        .strip_prefix(templates)
        .expect("collected under templates");
    let mut parts = relative
        .iter()
        .map(|p| p.to_str().expect("template paths are UTF-8"));
    let lang = parts.next().expect("a relative path has a first part");
    let path: Vec<&str> = parts.collect();
    assert!(
        !path.is_empty(),
        "{}: a template file belongs in templates/<language>/",
        file.display()
    );
    (lang.to_owned(), path.join("/"))
}
