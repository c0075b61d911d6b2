//! A plugin written in another language against wit/ loads and its tools
//! can be called: nothing in the WIT is Rust-only.
//!
//! Needs componentize-py (`pip install componentize-py`), so it is ignored
//! by default; CI installs it and runs
//! `cargo test --workspace --test polyglot -- --ignored`.

use std::path::Path;
use std::process::Command;

use serde_json::json;
use toolhost::{Outcome, PluginOptions};
use toolhost_tests::{host, settle};

#[tokio::test]
#[ignore = "needs componentize-py; CI runs it with --ignored"]
async fn a_python_plugin_registers_and_its_tool_is_called() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("bash")
        .arg(root.join("example-plugins/python-echo/build.sh"))
        .arg(out.path())
        .status()
        .expect("runs build.sh");
    assert!(
        status.success(),
        "building the Python plugin failed; is componentize-py installed?"
    );
    let wasm = out.path().join("python_echo.wasm");

    let (host, _outputs) = host();
    let location = host.location("/python");
    let _activation = location
        .load(&wasm, &PluginOptions::default())
        .await
        .unwrap();
    let snapshot = location.snapshot();
    let names: Vec<&str> = snapshot
        .definitions()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["py_echo"]);
    let s = settle(&snapshot, "py_echo", json!({"message": "from python"})).await;
    match &s.outcome {
        Outcome::Completed(c) => assert_eq!(c.output, Some(json!({"message": "from python"}))),
        other => panic!("{other:?}"),
    }
    let s = settle(&snapshot, "py_echo", json!({"message": 1})).await;
    assert_eq!(
        s.outcome.status(),
        "error",
        "the host validates input for every language"
    );
}
