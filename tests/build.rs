//! Builds the example plugins for wasm32-wasip2 into the shared target dir
//! (`target/plugins`) and exposes their paths as `PLUGIN_<NAME>` variables,
//! the pattern wasmtime's own test-programs use.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugins the tests drive: crate name as built.
const PLUGINS: &[&str] = &[
    "text_tools",
    "bulk_output",
    "chaos",
    "fs_tools",
    "search_one",
    "search_two",
    "other_world",
    "future_version",
    "progress_in_activate",
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap();
    for watched in [
        "example-plugins",
        "guest-sdk/src",
        "guest-sdk/Cargo.toml",
        "wit",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");
    build(root, &target);
    let out = target.join("wasm32-wasip2").join("release");
    for name in PLUGINS {
        let path = out.join(format!("{name}.wasm"));
        assert!(
            path.exists(),
            "the build did not produce {}",
            path.display()
        );
        println!(
            "cargo:rustc-env=PLUGIN_{}={}",
            name.to_uppercase(),
            path.display()
        );
    }
}

fn build(root: &Path, target: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(root.join("example-plugins").join("Cargo.toml"))
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
        .expect("cannot run cargo to build the example plugins");
    assert!(
        status.success(),
        "building the example plugins failed; is the wasm32-wasip2 target installed? Run `rustup target add wasm32-wasip2`"
    );
}
