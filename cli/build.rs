//! Embeds `templates/` (the projects `toolhost new` writes) in the binary;
//! with the `code-mode` feature (on by default), the Code Mode interpreter
//! built from `code-mode/` for wasm32-wasip2; and with the `std-tools`
//! feature (on by default), the standard toolset's two components built
//! from `std-tools/` (`--std DIR`).
//!
//! Generates `$OUT_DIR/templates.rs`: one `(language, path, contents)` entry
//! per file of `templates/<language>/`, each contents an `include_bytes!`, so
//! editing a template rebuilds the CLI. Watching the directory makes cargo
//! rerun this script when a file is added or removed, which an embedding
//! macro alone cannot notice on stable Rust.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    let root = manifest_dir.parent().expect("the CLI is in the workspace");
    if env::var_os("CARGO_FEATURE_CODE_MODE").is_some() {
        let watched = ["src", "wit", "build.rs", "Cargo.toml", "Cargo.lock"]
            .map(|w| format!("code-mode/{w}"));
        let built = build_guest(root, "code-mode", &watched, "the Code Mode interpreter");
        copy(
            &built.join("toolhost_interpreter.wasm"),
            &out_dir.join("interpreter.wasm"),
        );
    }
    if env::var_os("CARGO_FEATURE_STD_TOOLS").is_some() {
        // Built with the SDK, so a change there rebuilds it too.
        let watched = [
            "std-tools",
            "guest-sdk/src",
            "guest-sdk/Cargo.toml",
            "guest-sdk/wit",
        ];
        let built = build_guest(root, "std-tools", &watched, "the standard toolset");
        for name in ["toolhost_std_read.wasm", "toolhost_std_edit.wasm"] {
            copy(&built.join(name), &out_dir.join(name));
        }
    }
}

fn copy(from: &Path, to: &Path) {
    fs::copy(from, to).unwrap_or_else(|e| panic!("cannot copy {}: {e}", from.display()));
}

/// Builds the guest workspace `dir` in release into the shared target
/// directory's `plugins/` (where the tests build it too) and returns the
/// directory its components are in. `watched` (relative to `root`) are
/// what it is built from.
fn build_guest(root: &Path, dir: &str, watched: &[impl AsRef<str>], what: &str) -> PathBuf {
    let source = root.join(dir);
    for path in watched {
        println!(
            "cargo:rerun-if-changed={}",
            root.join(path.as_ref()).display()
        );
    }
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(source.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    // The outer build's settings are for the host target, not for wasm.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {what}: {e}"));
    assert!(
        status.success(),
        "building {what} ({dir}/) failed; is the wasm32-wasip2 target installed? Run \
         `rustup target add wasm32-wasip2`, or build the CLI with `--no-default-features` to \
         leave Code Mode and the standard toolset out"
    );
    target.join("wasm32-wasip2/release")
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
