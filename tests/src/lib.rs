//! Shared helpers for the integration tests: paths of the example plugins
//! (built by `build.rs`) and a host configured for tests.

use toolhost::{Call, CallContext, Host, HostBuilder, Settlement, Snapshot};

/// text-tools: echo, word_count, regex_search.
pub const TEXT_TOOLS: &str = env!("PLUGIN_TEXT_TOOLS");
/// bulk-output: generate.
pub const BULK_OUTPUT: &str = env!("PLUGIN_BULK_OUTPUT");
/// chaos: misbehaving tools.
pub const CHAOS: &str = env!("PLUGIN_CHAOS");
/// fs-tools: read_file, write_file, grep.
pub const FS_TOOLS: &str = env!("PLUGIN_FS_TOOLS");
/// Registers `search` answering {"source": "one"}.
pub const SEARCH_ONE: &str = env!("PLUGIN_SEARCH_ONE");
/// Registers `search` answering {"source": "two"}.
pub const SEARCH_TWO: &str = env!("PLUGIN_SEARCH_TWO");
/// A valid component of another world (a greeter).
pub const OTHER_WORLD: &str = env!("PLUGIN_OTHER_WORLD");
/// A plugin built against toolhost:plugin@0.2.0.
pub const FUTURE_VERSION: &str = env!("PLUGIN_FUTURE_VERSION");
/// A plugin that reports progress from `activate`.
pub const PROGRESS_IN_ACTIVATE: &str = env!("PLUGIN_PROGRESS_IN_ACTIVATE");

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
        .load(plugin, &toolhost::PluginOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading {plugin}: {e}"))
}
