//! Shared helpers for the integration tests: `plugin_paths!` (the example
//! plugins' paths, built by `build.rs`) and a host configured for tests.

use toolhost::{Call, CallContext, Host, HostBuilder, Settlement, Snapshot};

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
