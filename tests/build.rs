//! Builds the example plugins for wasm32-wasip2 into the shared target dir
//! (`target/plugins`) and generates `plugin_paths!`, which defines one path
//! constant per plugin in the crate that invokes it — the pattern wasmtime's
//! own test-programs use. Every plugin is listed once, below: a plugin of
//! the example workspace missing from the list fails this build, and a
//! listed plugin no test uses fails the test binary's build (dead code is
//! denied there).

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugins the tests drive: crate name as built, and what it is.
const PLUGINS: &[(&str, &str)] = &[
    ("text_tools", "text-tools: echo, word_count, regex_search."),
    ("bulk_output", "bulk-output: generate."),
    ("chaos", "chaos: misbehaving tools."),
    ("fs_tools", "fs-tools: read_file, write_file, grep."),
    ("http_tools", "http-tools: fetch_json, over wasi:http."),
    (
        "search_one",
        "Registers `search` answering {\"source\": \"one\"}.",
    ),
    (
        "search_two",
        "Registers `search` answering {\"source\": \"two\"}.",
    ),
    (
        "other_world",
        "A valid component of another world (a greeter).",
    ),
    (
        "future_version",
        "A plugin built against toolhost:plugin@0.2.0.",
    ),
    (
        "progress_in_activate",
        "A plugin that reports progress from `activate`.",
    ),
    (
        "hostile",
        "hostile: oversized registrations, messages, content, outputs and handles.",
    ),
    (
        "wit_v0_1",
        "Built against wit/v0.1 directly: every function and type of toolhost:plugin@0.1.0.",
    ),
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap();
    for watched in [
        "example-plugins",
        "code-mode/src",
        "code-mode/build.rs",
        "code-mode/Cargo.toml",
        "code-mode/wit",
        "std-tools",
        "guest-sdk/src",
        "guest-sdk/Cargo.toml",
        "guest-sdk/wit",
        "wit",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    check_listed(&root.join("example-plugins"));
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");
    build(
        &root.join("example-plugins"),
        &target,
        "the example plugins",
    );
    build(
        &root.join("code-mode"),
        &target,
        "the Code Mode interpreter",
    );
    build(&root.join("std-tools"), &target, "the standard toolset");
    let out = target.join("wasm32-wasip2").join("release");
    let mut consts = String::new();
    writeln!(
        consts,
        "        /// The Code Mode interpreter component.\n        pub(crate) const INTERPRETER: &str = {:?};",
        out.join("toolhost_interpreter.wasm").display().to_string()
    )
    .unwrap();
    for (name, what) in [
        (
            "toolhost_std_read",
            "The standard toolset's looking tools: read, glob, grep, list, webfetch.",
        ),
        (
            "toolhost_std_edit",
            "The standard toolset's editing tools: write, edit, apply_patch.",
        ),
    ] {
        writeln!(
            consts,
            "        #[doc = {what:?}]\n        pub(crate) const {}: &str = {:?};",
            name.trim_start_matches("toolhost_").to_uppercase(),
            out.join(format!("{name}.wasm")).display().to_string()
        )
        .unwrap();
    }
    for (name, what) in PLUGINS {
        let path = out.join(format!("{name}.wasm"));
        assert!(
            path.exists(),
            "the build did not produce {}",
            path.display()
        );
        writeln!(
            consts,
            "        #[doc = {what:?}]\n        pub(crate) const {}: &str = {:?};",
            name.to_uppercase(),
            path.display().to_string()
        )
        .unwrap();
    }
    let generated = format!(
        "/// Defines a path constant for every example plugin the tests use.\n#[macro_export]\nmacro_rules! plugin_paths {{\n    () => {{\n{consts}    }};\n}}\n"
    );
    let dest = PathBuf::from(env::var("OUT_DIR").unwrap()).join("plugins.rs");
    std::fs::write(dest, generated).unwrap();
}

/// Every crate of the example workspace must be listed in [`PLUGINS`].
fn check_listed(workspace: &Path) {
    let text = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    for member in members {
        let dir = workspace.join(member.as_str().unwrap());
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let package: toml::Table = toml::from_str(&text).unwrap();
        let name = package["package"]["name"]
            .as_str()
            .unwrap()
            .replace('-', "_");
        assert!(
            PLUGINS.iter().any(|(listed, _)| *listed == name),
            "example plugin `{name}` ({}) is not listed in tests/build.rs PLUGINS; list it and use it in a test",
            dir.display()
        );
    }
}

/// Builds the workspace at `dir` for wasm32-wasip2 into `target`.
fn build(dir: &Path, target: &Path, what: &str) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(dir.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(target);
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
        "building {what} failed; is the wasm32-wasip2 target installed? Run `rustup target add wasm32-wasip2`"
    );
}
