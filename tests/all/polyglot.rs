//! Plugins written in other languages against wit/ load and their tools can
//! be called: nothing in the WIT is Rust-only. Python (componentize-py),
//! JavaScript (componentize-js on StarlingMonkey, and jco's QuickJS
//! backend) and C (wit-bindgen c, zig cc, wasm-tools).
//!
//! Each needs its language's toolchain on PATH, so these tests are ignored
//! by default; `cargo xtask test` installs the pinned tools and runs
//! `cargo test -p toolhost-cli --test all polyglot -- --ignored` with
//! target/venv/bin and target/tools/bin on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use serde_json::json;
use toolhost::config::{Grants, PluginOptions};
use toolhost::outcome::ErrorKind;
use toolhost::{Call, ContentPart, Outcome, Settlement};
use toolhost_tests::{builder, completed, context, host, names, settle};

use crate::http::{Answer, serve};

/// Runs an example plugin's `build.sh` with `args` after the output
/// directory, once per test run, and returns that directory (under cargo's
/// temporary directory for integration tests). Builds run one at a time, so
/// that tests sharing a plugin share one build.
fn build(plugin: &str, args: &[&str], needs: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let key = std::iter::once(plugin)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join("-");
    if let Some(out) = built.get(&key) {
        return out.clone();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("polyglot")
        .join(&key);
    let status = Command::new("bash")
        .arg(root.join("example-plugins").join(plugin).join("build.sh"))
        .arg(&out)
        .args(args)
        .status()
        .expect("runs build.sh");
    assert!(
        status.success(),
        "building example-plugins/{plugin} {args:?} failed; it needs {needs} on PATH"
    );
    built.insert(key, out.clone());
    out
}

/// The JavaScript plugin built with `engine`.
fn js_echo(engine: &str) -> PathBuf {
    let file = match engine {
        "starlingmonkey" => "js_echo.wasm",
        "quickjs" => "js_echo_qjs.wasm",
        "quickjs-async" => "js_echo_qjs_async.wasm",
        other => panic!("no engine {other}"),
    };
    build("js-echo", &[engine], "Node 20.19+ and npm").join(file)
}

/// The message of a tool failure; panics on any other outcome.
fn tool_failure(s: &Settlement) -> &str {
    match &s.outcome {
        Outcome::Error {
            message,
            kind: ErrorKind::ToolFailure,
            ..
        } => message,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs componentize-py; CI runs it with --ignored"]
async fn a_python_plugin_registers_and_its_tool_is_called() {
    let wasm = build("python-echo", &[], "componentize-py").join("python_echo.wasm");
    let (snapshot, _keep) = load(&wasm, &PluginOptions::default()).await;
    assert_eq!(names(&snapshot), ["py_echo"]);
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

#[tokio::test]
#[ignore = "needs componentize-py; CI runs it with --ignored"]
async fn a_python_plugin_that_drops_its_registration_is_told_to_keep_it() {
    let wasm = build("python-echo", &[], "componentize-py").join("python_echo.wasm");
    let (host, _outputs) = host();
    let options = PluginOptions {
        config: json!({"forget_registration": true}),
        ..Default::default()
    };
    let error = host
        .location("/python")
        .load(&wasm, &options)
        .await
        .map(|_| ())
        .expect_err("no tool stays registered");
    assert!(
        matches!(
            &error,
            toolhost::Error::RegistrationsDropped { tools: 1, .. }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("keep"), "{error}");
}

/// Loads `wasm` with `options` into a fresh host and returns the snapshot,
/// with what must outlive it.
///
/// The hosts share one compile cache and load one at a time, so that the
/// StarlingMonkey plugin (12 MB, tens of seconds to compile in a debug
/// build) is compiled once rather than by each test at the same time.
async fn load(
    wasm: &Path,
    options: &PluginOptions,
) -> (
    toolhost::Snapshot,
    (toolhost::Host, toolhost::Activation, tempfile::TempDir),
) {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    static LOADING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let cache = CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path();
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).cache_dir(cache).build().unwrap();
    let location = host.location("/polyglot");
    let activation = {
        let _one_at_a_time = LOADING.lock().await;
        location
            .load(wasm, options)
            .await
            .unwrap_or_else(|e| panic!("loading {}: {e}", wasm.display()))
    };
    (location.snapshot(), (host, activation, outputs))
}

#[tokio::test]
#[ignore = "needs Node and npm; CI runs it with --ignored"]
async fn a_javascript_plugin_on_starlingmonkey_registers_and_echoes() {
    let (snapshot, _keep) = load(&js_echo("starlingmonkey"), &PluginOptions::default()).await;
    assert_eq!(names(&snapshot), ["js_echo", "js_fetch"]);
    let s = settle(&snapshot, "js_echo", json!({"message": "from javascript"})).await;
    let c = completed(&s);
    assert_eq!(c.output, Some(json!({"message": "from javascript"})));
    assert_eq!(c.content, [ContentPart::text("from javascript")]);
    let s = settle(&snapshot, "js_echo", json!({})).await;
    assert_eq!(
        s.outcome.status(),
        "error",
        "the host validates input for every language"
    );
}

#[tokio::test]
#[ignore = "needs Node and npm; CI runs it with --ignored"]
async fn a_javascript_plugin_fetches_from_a_granted_origin() {
    let (addr, seen) = serve(
        Answer::Json(r#"{"zen":"Keep it logically awesome."}"#),
        None,
    )
    .await;
    let options = PluginOptions {
        grants: Grants {
            http: vec![format!("GET http://{addr}/*").parse().unwrap()],
            ..Default::default()
        },
        ..Default::default()
    };
    let (snapshot, _keep) = load(&js_echo("starlingmonkey"), &options).await;
    let url = format!("http://{addr}/zen.json");
    let s = settle(&snapshot, "js_fetch", json!({ "url": url })).await;
    assert_eq!(
        completed(&s).output,
        Some(json!({"zen": "Keep it logically awesome."}))
    );
    assert_eq!(s.usage.http_requests, 1);
    assert_eq!(*seen.requests.lock().unwrap(), ["GET /zen.json HTTP/1.1"]);
}

#[tokio::test]
#[ignore = "needs Node and npm; CI runs it with --ignored"]
async fn a_javascript_plugin_cannot_fetch_without_a_grant() {
    let (addr, seen) = serve(Answer::Json(r#"{"zen":"unreachable"}"#), None).await;
    let (snapshot, _keep) = load(&js_echo("starlingmonkey"), &PluginOptions::default()).await;
    let url = format!("http://{addr}/zen.json");
    let s = settle(&snapshot, "js_fetch", json!({ "url": url })).await;
    // The host refuses inside the guest; fetch() rejects and the plugin's
    // thrown tool-failure record is what the model sees.
    assert_eq!(
        tool_failure(&s),
        format!("GET {url} failed: TypeError: NetworkError when attempting to fetch resource")
    );
    assert!(
        seen.requests.lock().unwrap().is_empty(),
        "nothing reached the server"
    );
}

#[tokio::test]
#[ignore = "needs Node and npm; CI runs it with --ignored"]
async fn a_javascript_plugin_on_quickjs_without_async_registers_and_echoes() {
    let (snapshot, _keep) = load(&js_echo("quickjs"), &PluginOptions::default()).await;
    assert_eq!(names(&snapshot), ["js_echo", "js_fetch"]);
    let s = settle(&snapshot, "js_echo", json!({"message": "from quickjs"})).await;
    let c = completed(&s);
    assert_eq!(c.output, Some(json!({"message": "from quickjs"})));
    assert_eq!(c.content, [ContentPart::text("from quickjs")]);
    let s = settle(
        &snapshot,
        "js_fetch",
        json!({"url": "http://127.0.0.1:9/x"}),
    )
    .await;
    assert_eq!(
        tool_failure(&s),
        "fetch() is not available in this build of js-echo; build it with StarlingMonkey"
    );
}

#[tokio::test]
#[ignore = "needs Node and npm; CI runs it with --ignored"]
async fn a_javascript_plugin_on_quickjs_with_async_is_refused_at_load() {
    let wasm = js_echo("quickjs-async");
    let (host, _outputs) = host();
    let error = host
        .location("/polyglot")
        .load(&wasm, &PluginOptions::default())
        .await
        .map(|_| ())
        .expect_err("the host does not enable the component-model async ABI");
    // The wording belongs to the host's load checks; what must hold is that
    // it names the file and says why.
    let message = error.to_string();
    assert!(message.contains("js_echo_qjs_async.wasm"), "{message}");
    assert!(message.contains("uses `task.cancel`"), "{message}");
    assert!(
        message.contains("--backend-qjs-disable-async"),
        "the hint names jco's flag: {message}"
    );
}

#[tokio::test]
#[ignore = "needs wit-bindgen, wasm-tools and zig; CI runs it with --ignored"]
async fn a_c_plugin_registers_and_its_tool_is_called() {
    let wasm = build(
        "c-echo",
        &[],
        "wit-bindgen 0.63.0, wasm-tools 1.263.0 and zig (PyPI ziglang)",
    )
    .join("c_echo.wasm");
    let (snapshot, _keep) = load(&wasm, &PluginOptions::default()).await;
    assert_eq!(names(&snapshot), ["c_echo"]);
    let definition = &snapshot.definitions()[0];
    assert_eq!(definition.description, "Repeat a message back unchanged.");
    assert!(definition.output_schema.is_some());

    let s = settle(&snapshot, "c_echo", json!({"message": "from c"})).await;
    let c = completed(&s);
    assert_eq!(c.output, Some(json!({"message": "from c"})));
    assert_eq!(c.content, [ContentPart::text("from c")]);

    // The plugin reads JSON itself: escapes (a surrogate pair included) are
    // decoded, members before `message` are skipped, and the output is
    // re-escaped so that it stays the same string.
    let input = r#"{"skip":{"a":["}\"",1]},"message":"tab\t \"q\" \u00e9 \ud83d\ude00 \u0001"}"#;
    let s = snapshot
        .settle(Call::new("c_echo", input, context("c_echo")))
        .await;
    let expected = "tab\t \"q\" é 😀 \u{1}";
    let c = completed(&s);
    assert_eq!(c.output, Some(json!({ "message": expected })));
    assert_eq!(c.content, [ContentPart::text(expected)]);

    let s = settle(&snapshot, "c_echo", json!({"message": 1})).await;
    assert_eq!(
        s.outcome.status(),
        "error",
        "the host validates input for every language"
    );
}
