//! Shared helpers for the tests (`tests/all`, the host crate's tests and
//! the benches): `plugin_paths!` (the example plugins' paths, built by
//! `build.rs`), a host configured for tests, what a settlement holds
//! ([`outcomes`]), waiting on events with a bound ([`wait`]), and what
//! `/proc` says of a process or thread ([`procfs`]). A helper
//! two test modules need lives here, once; see `tests/README.md`.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use toolhost::{Call, CallContext, Host, HostBuilder, Settlement, Snapshot, Tool, ToolResponse};

pub mod outcomes;
pub mod postgres;
pub mod procfs;
pub mod registry;
pub mod sigstore;
pub mod wait;

pub use outcomes::{completed, error_message, names, output, text, texts};
pub use wait::{Recorded, Recorder, eventually, wait_until, within};

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// A host builder for tests: its state (the embedded store) in a fresh
/// temporary directory, no compile cache.
pub fn builder(state: &tempfile::TempDir) -> HostBuilder {
    Host::builder().state_dir(state.path())
}

/// A host for tests, with its temporary state directory.
pub fn host() -> (Host, tempfile::TempDir) {
    let outputs = tempfile::tempdir().expect("temp dir");
    let host = builder(&outputs).build().expect("host builds");
    (host, outputs)
}

/// A call context whose ids derive from `call`, its message id unique in
/// this process: the store replays ids it has an outcome for, so each call
/// made with this context runs.
pub fn context(call: &str) -> CallContext {
    static MESSAGES: AtomicU64 = AtomicU64::new(0);
    let message = MESSAGES.fetch_add(1, Ordering::Relaxed);
    CallContext::new(
        format!("ses-{call}"),
        "tester",
        format!("msg-{call}-{message}"),
        call,
    )
}

/// Settles `tool` with JSON `input` on `snapshot`.
pub async fn settle(snapshot: &Snapshot, tool: &str, input: serde_json::Value) -> Settlement {
    snapshot
        .settle(Call::new(tool, input.to_string(), context(tool)))
        .await
}

/// The full text retained as part `i` of a completed `settlement`, read
/// back from `host`'s store as the call's session.
pub async fn retained(host: &Host, settlement: &Settlement, i: usize) -> String {
    let toolhost::Outcome::Completed(completed) = &settlement.outcome else {
        panic!("not completed: {:?}", settlement.outcome)
    };
    let reference = &completed.retained[i].reference;
    host.retained(&settlement.context.session_id, reference)
        .await
        .expect("the store reads")
        .unwrap_or_else(|| panic!("{reference} is kept"))
}

/// Loads and activates `plugin` (a path constant above) with default options.
pub async fn load(location: &toolhost::Location, plugin: &str) -> toolhost::Activation {
    location
        .load(plugin, &toolhost::config::PluginOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading {plugin}: {e}"))
}

/// A native tool answering `{"source": tag}` whatever its input: which of
/// several registrations of one name a call reached.
pub fn tagged(tag: &'static str) -> Tool {
    Tool::native(
        format!("answers {tag}"),
        json!({"type": "object"}),
        Some(json!({"type": "object", "properties": {"source": {"type": "string"}}})),
        move |_, _| async move {
            Ok(ToolResponse {
                output: Some(json!({ "source": tag })),
                ..Default::default()
            })
        },
    )
    .expect("a valid native tool")
}

/// The repository's root directory.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the repository")
}

/// A finished command's exit code, stdout and stderr (each UTF-8).
pub fn exited(out: Output) -> (i32, String, String) {
    (
        out.status.code().expect("exited, not killed by a signal"),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

// The Rust examples of the README and the docs compile (as doctests of this
// crate, which has the library's features and the SDK); none runs, as each
// needs plugins, a model or a client.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeExamples;

#[doc = include_str!("../../docs/languages.md")]
#[cfg(doctest)]
pub struct LanguagesExamples;

#[doc = include_str!("../../docs/mcp.md")]
#[cfg(doctest)]
pub struct McpExamples;

#[doc = include_str!("../../docs/embedding.md")]
#[cfg(doctest)]
pub struct EmbeddingExamples;
