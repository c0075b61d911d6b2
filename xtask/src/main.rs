//! Project tasks: `cargo xtask demo` builds the example plugins and calls a
//! tool through the `toolhost` CLI; `cargo xtask plugins` only builds them;
//! `cargo xtask test` runs every test, real agents included (see `test.rs`);
//! `cargo xtask layers` prints and checks the library's crate layering;
//! `cargo xtask package` packages the
//! SDK and the library and uses them outside the workspace; `cargo xtask
//! templates` builds and checks a project of each `toolhost new` template;
//! `cargo xtask wheel` builds, installs and runs the CLI's Python wheel.

mod agents;
mod conformance;
mod deploy;
mod layers;
mod package;
mod support;
mod system;
mod templates;
mod test;
mod venv;
mod wheel;

use std::process::{Command, ExitCode};

use anyhow::{Context, Result};

use crate::support::{build_plugins, cargo, root, run_step};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("plugins") => build_plugins().map(|_| ()),
        Some("test") => test::run(&args[1..]),
        Some("layers") => layers::check(&root()),
        Some("conformance") => conformance::run(&root(), &args[1..]),
        Some("package") => package::run(&root()),
        Some("templates") => templates::run(),
        Some("wheel") => wheel::run(),
        _ => {
            eprintln!(
                "usage: cargo xtask <demo|plugins|test|layers|conformance|package|templates|wheel>\n  demo     build the example plugins, list text-tools and call echo\n  plugins  build the example plugins (wasm32-wasip2, release)\n  test     run every test: cargo test --workspace, the polyglot tests, the\n           templates, the MCP client suite (tests/mcp), the MCP conformance\n           suite, real agents (tests/agents), the Kubernetes manifests, the packages and the wheel,\n           with a Python venv at target/venv\n           (`cargo xtask test mcp|agents [PYTEST ARGS...]`: only the MCP suite,\n           or only the real agents of tests/agents; `cargo xtask test deploy`:\n           only the Kubernetes manifests, rendered and validated)\n  layers   print the library's crates, bottom to top, with their lines and\n           dependencies, and check that none depends on a crate above it\n  conformance  run the pinned MCP conformance suite against toolhost serve --http,\n           both requirement sets, against tests/conformance's baselines\n           (`--rebaseline`: write the baselines from this run)\n  package  package the SDK and the library, then build a plugin and check an\n           embedder with them outside the workspace; call the plugin's tool\n  templates build a project of every `toolhost new` template and check its samples\n  wheel    build the CLI's Python wheel (maturin, dev profile) into target/wheels,\n           pip-install it in a fresh venv and run the installed toolhost"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds what the demo needs with cargo's progress shown, then lists
/// text-tools and calls `echo` through the CLI. The CLI is built without
/// what the demo does not show (`serve`, OCI registries and their C crypto
/// build, Postgres, Code Mode, the standard tools): about half the work of
/// the full one, which `cargo xtask test` builds.
fn demo() -> Result<()> {
    let started = std::time::Instant::now();
    system::ensure_for_build()?;
    let plugins = build_plugins()?;
    let root = root();
    eprintln!(
        "\nbuilding the toolhost CLI without the features the demo does not show (the first time this compiles wasmtime)..."
    );
    run_step(
        cargo()
            .args(["build", "-p", "toolhost-cli", "--no-default-features"])
            .current_dir(&root),
    )?;
    let toolhost = support::target_dir(&root).join("debug").join("toolhost");
    eprintln!("built in {:.0}s", started.elapsed().as_secs_f64());
    let text_tools = plugins.join("text_tools.wasm");
    let text_tools = text_tools.to_str().context("non-UTF-8 path")?;
    eprintln!("\n$ toolhost list {text_tools}");
    run_step(Command::new(&toolhost).args(["list", text_tools]))?;
    eprintln!(
        "\n$ toolhost call {text_tools} echo --input '{{\"message\":\"hello from a wasm tool\"}}'"
    );
    run_step(Command::new(&toolhost).args([
        "call",
        text_tools,
        "echo",
        "--input",
        r#"{"message":"hello from a wasm tool"}"#,
    ]))?;
    Ok(())
}
