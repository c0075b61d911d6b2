//! Shared helpers for the tests (`tests/all`, the host crate's tests and
//! the benches): `plugin_paths!` (the example plugins' paths, built by
//! `build.rs`), a host configured for tests, what a settlement holds
//! ([`outcomes`]), and waiting on events with a bound ([`wait`]). A helper
//! two test modules need lives here, once; see `tests/README.md`.

use std::path::Path;
use std::process::Output;

use serde_json::json;
use toolhost::{Call, CallContext, Host, HostBuilder, Settlement, Snapshot, Tool, ToolResponse};

pub mod outcomes;
pub mod postgres;
pub mod wait;

pub use outcomes::{completed, error_message, names, output, text, texts};
pub use wait::{Recorded, Recorder, eventually, wait_until, within};

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// A host builder for tests: outputs in a fresh temporary directory, no
/// compile cache.
pub fn builder(outputs: &tempfile::TempDir) -> HostBuilder {
    Host::builder().output_dir(outputs.path())
}

/// A host for tests, with its temporary output directory.
pub fn host() -> (Host, tempfile::TempDir) {
    let outputs = tempfile::tempdir().expect("temp dir");
    let host = builder(&outputs).build().expect("host builds");
    (host, outputs)
}

/// A call context whose ids all derive from `call`.
pub fn context(call: &str) -> CallContext {
    CallContext {
        session_id: format!("ses-{call}"),
        agent: "tester".into(),
        message_id: format!("msg-{call}"),
        call_id: call.into(),
    }
}

/// Settles `tool` with JSON `input` on `snapshot`.
pub async fn settle(snapshot: &Snapshot, tool: &str, input: serde_json::Value) -> Settlement {
    snapshot
        .settle(Call::new(tool, input.to_string(), context(tool)))
        .await
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
