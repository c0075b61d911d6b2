//! Project tasks: `cargo xtask demo` builds the example plugins and calls a
//! tool through the `toolhost` CLI; `cargo xtask plugins` only builds them;
//! `cargo xtask test` runs every test (see `test.rs`); `cargo xtask layers`
//! checks the library's module layering.

mod layers;
mod test;
mod wheel;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("plugins") => build_plugins().map(|_| ()),
        Some("test") => test::run(&args[1..]),
        Some("layers") => layers::check(&root()),
        Some("wheel") => wheel::run(),
        _ => {
            eprintln!(
                "usage: cargo xtask <demo|plugins|test|layers|wheel>\n  demo     build the example plugins, list text-tools and call echo\n  plugins  build the example plugins (wasm32-wasip2, release)\n  test     run every test: cargo test --workspace, the polyglot test and the\n           MCP client suite (tests/mcp), in a Python venv at target/venv\n           (`cargo xtask test mcp [PYTEST ARGS...]`: only the MCP suite)\n  layers   check that no library module imports from a layer above it\n  wheel    build the CLI's Python wheel (maturin, dev profile) into target/wheels,\n           pip-install it in a fresh venv and run the installed toolhost"
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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Builds the example plugins exactly as the tests' build script does.
fn build_plugins() -> Result<PathBuf> {
    let root = root();
    let target = root.join("target").join("plugins");
    eprintln!("building the example plugins (wasm32-wasip2, release)...");
    run(cargo()
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(root.join("example-plugins/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target))
    .context("is the wasm32-wasip2 target installed? Run `rustup target add wasm32-wasip2`")?;
    Ok(target.join("wasm32-wasip2/release"))
}

fn demo() -> Result<()> {
    let plugins = build_plugins()?;
    let text_tools = plugins.join("text_tools.wasm");
    let toolhost = |args: &[&str]| {
        let mut cmd = cargo();
        cmd.args(["run", "--quiet", "--package", "toolhost-cli", "--"])
            .args(args);
        cmd
    };
    let text_tools = text_tools.to_str().context("non-UTF-8 path")?;
    eprintln!("\n$ toolhost list {text_tools}");
    run(&mut toolhost(&["list", text_tools]))?;
    eprintln!(
        "\n$ toolhost call {text_tools} echo --input '{{\"message\":\"hello from a wasm tool\"}}'"
    );
    run(&mut toolhost(&[
        "call",
        text_tools,
        "echo",
        "--input",
        r#"{"message":"hello from a wasm tool"}"#,
    ]))?;
    Ok(())
}
