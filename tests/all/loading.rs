//! Loading: every bad plugin file is a clear, typed error, never a panic;
//! a plugin of an incompatible WIT version is refused before instantiation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{CHAOS, FUTURE_VERSION, OTHER_WORLD, TEXT_TOOLS};
use toolhost::config::PluginOptions;
use toolhost::{Error, LoadError, PluginSource, Unsupported};
use toolhost_tests::{host, load, settle};

async fn load_error(path: &std::path::Path) -> LoadError {
    let (host, _out) = host();
    match host.compile(path, &PluginOptions::default()).await {
        Err(Error::Load(e)) => e,
        other => panic!("{}: expected a load error, got {other:?}", path.display()),
    }
}

#[tokio::test]
async fn bad_files_are_typed_load_errors_that_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "not wasm").unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let truncated = dir.path().join("truncated.wasm");
    let bytes = std::fs::read(TEXT_TOOLS).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();

    assert!(matches!(
        load_error(&dir.path().join("missing.wasm")).await,
        LoadError::Read { .. }
    ));
    assert!(matches!(load_error(&text).await, LoadError::NotWasm { .. }));
    let e = load_error(&core).await;
    assert!(matches!(e, LoadError::CoreModule { .. }));
    assert!(e.to_string().contains("wasm32-wasip2"), "{e}");
    assert!(matches!(
        load_error(&truncated).await,
        LoadError::Invalid { .. }
    ));
}

#[tokio::test]
async fn a_component_of_another_world_is_refused() {
    let e = load_error(OTHER_WORLD.as_ref()).await;
    match &e {
        LoadError::WrongWorld { exports, .. } => {
            assert!(exports.contains("example:greeter/greet@1.0.0"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_incompatible_wit_version_is_refused_with_both_versions_named() {
    let e = load_error(FUTURE_VERSION.as_ref()).await;
    match &e {
        LoadError::IncompatibleVersion {
            found, expected, ..
        } => {
            assert_eq!(found, "toolhost:plugin/plugin@0.2.0");
            assert_eq!(*expected, "0.1.0");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("rebuild the plugin"), "{e}");
}

#[tokio::test]
async fn a_plugin_loads_from_bytes_in_memory_named_by_its_source() {
    let (host, _out) = host();
    let wasm = std::fs::read(TEXT_TOOLS).unwrap();
    let location = host.location("/from-bytes");
    let source = PluginSource::bytes("embedded-text", wasm);
    let activation = location
        .load(&source, &PluginOptions::default())
        .await
        .unwrap();
    assert_eq!(activation.plugin().info().name, "embedded-text");
    assert_eq!(
        activation.plugin().info().path,
        std::path::Path::new("embedded-text")
    );
    let s = settle(
        &location.snapshot(),
        "word_count",
        serde_json::json!({"text": "a b c"}),
    )
    .await;
    assert!(
        matches!(s.outcome, toolhost::Outcome::Completed(_)),
        "{:?}",
        s.outcome
    );
    // Bytes that are no component are the same typed error a file gets,
    // naming the source.
    let bad = PluginSource::bytes("not-a-plugin", &b"hello"[..]);
    match host.compile(bad, &PluginOptions::default()).await {
        Err(Error::Load(LoadError::NotWasm { path })) => {
            assert_eq!(path, std::path::Path::new("not-a-plugin"))
        }
        other => panic!("expected NotWasm, got {other:?}"),
    }
}

#[tokio::test]
async fn plugin_identity_and_configuration() {
    let (host, _out) = host();
    let plugin = host
        .compile(TEXT_TOOLS, &PluginOptions::default())
        .await
        .unwrap();
    let info = plugin.info();
    assert_eq!(info.name, "text_tools");
    assert_eq!(info.digest.len(), 64);
    assert_eq!(info.version, format!("blake3:{}", &info.digest[..12]));
    assert!(!info.from_cache);

    // The configuration reaches activate and every call, though each call
    // runs in a fresh instance.
    let config = serde_json::json!({"base_url": "https://tools.invalid", "retries": [1, 2]});
    let options = PluginOptions {
        config: config.clone(),
        ..Default::default()
    };
    let location = host.location("/identity");
    let _activation = location.load(CHAOS, &options).await.unwrap();
    let s = settle(&location.snapshot(), "read_config", serde_json::json!({})).await;
    match s.outcome {
        toolhost::Outcome::Completed(c) => {
            assert_eq!(c.output, Some(serde_json::json!({ "config": config })))
        }
        other => panic!("{other:?}"),
    }
    // Without configuration a plugin sees an empty object.
    let other = host.location("/identity-default");
    let _default = load(&other, CHAOS).await;
    let s = settle(&other.snapshot(), "read_config", serde_json::json!({})).await;
    match s.outcome {
        toolhost::Outcome::Completed(c) => {
            assert_eq!(c.output, Some(serde_json::json!({"config": {}})))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_compile_cache_is_used_and_a_corrupt_entry_is_rebuilt() {
    let outputs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = toolhost::Host::builder()
        .state_dir(outputs.path())
        .cache_dir(cache.path())
        .build()
        .unwrap();
    assert!(
        !host
            .compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap()
            .info()
            .from_cache
    );
    assert!(
        host.compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap()
            .info()
            .from_cache
    );
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::fs::write(&entry, &bytes).unwrap();
    assert!(
        !host
            .compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap()
            .info()
            .from_cache,
        "corrupt entries are never trusted"
    );
    assert!(
        host.compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap()
            .info()
            .from_cache,
        "and are rebuilt"
    );
    std::fs::write(&entry, b"garbage").unwrap();
    assert!(
        !host
            .compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap()
            .info()
            .from_cache
    );
}

/// Whether a thread the host named for compiling (`toolhost-compile`, which
/// Linux shortens to 15 bytes) is running in this process.
fn a_compile_thread_is_running() -> bool {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .any(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == &"toolhost-compile"[..15])
        })
}

#[test]
fn compiling_runs_off_the_async_workers() {
    // One worker thread: were the compile on it, no other task of the
    // runtime could run while the compile thread works.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (host, _out) = host();
        let compiled = Arc::new(AtomicBool::new(false));
        // Another task of this runtime: it ends, saying so, once it has run
        // while the compile thread was at work and the compile unfinished.
        let beside = tokio::spawn({
            let compiled = compiled.clone();
            async move {
                while !compiled.load(Ordering::SeqCst) {
                    if a_compile_thread_is_running() {
                        return true;
                    }
                    tokio::task::yield_now().await;
                }
                false
            }
        });
        let plugin = host
            .compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap();
        compiled.store(true, Ordering::SeqCst);
        assert!(!plugin.info().from_cache, "this load compiled");
        assert!(
            beside.await.unwrap(),
            "no other task ran while the plugin compiled: the compile blocked the worker"
        );
    });
}

#[tokio::test]
async fn the_compile_cache_evicts_the_least_recently_used_entry_beyond_its_cap() {
    let outputs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .collect()
    };
    let measure = toolhost::Host::builder()
        .state_dir(outputs.path())
        .cache_dir(cache.path())
        .build()
        .unwrap();
    let options = PluginOptions::default();
    measure.compile(TEXT_TOOLS, &options).await.unwrap();
    let text_entry = entries().remove(0);
    let one = std::fs::metadata(&text_entry).unwrap().len();
    // The key is stable: BLAKE3 hex, the same on every build of the host.
    let stem = text_entry.file_stem().unwrap().to_str().unwrap().to_owned();
    assert_eq!(stem.len(), 64);
    assert!(stem.bytes().all(|b| b.is_ascii_hexdigit()));

    // A cap that holds one entry but not two.
    let host = toolhost::Host::builder()
        .state_dir(outputs.path())
        .cache_dir(cache.path())
        .cache_limit(one + one / 2)
        .build()
        .unwrap();
    assert!(
        host.compile(TEXT_TOOLS, &options)
            .await
            .unwrap()
            .info()
            .from_cache
    );
    assert!(
        !host
            .compile(CHAOS, &options)
            .await
            .unwrap()
            .info()
            .from_cache
    );
    let left = entries();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_ne!(left[0], text_entry, "the older entry was evicted");
    assert!(
        host.compile(CHAOS, &options)
            .await
            .unwrap()
            .info()
            .from_cache
    );
    assert!(
        !host
            .compile(TEXT_TOOLS, &options)
            .await
            .unwrap()
            .info()
            .from_cache
    );
}

/// A component that links nothing it asks for: unprovided imports, written
/// as text, next to a large body of code the refusal must not compile.
fn unprovided_imports_component() -> Vec<u8> {
    let functions: String = (0..2_000)
        .map(|i| format!("(func (export \"f{i}\") (param i32) (result i32) local.get 0 i32.const {i} i32.add)"))
        .collect();
    wat::parse_str(format!(
        r#"(component
            (import "wasi:keyvalue/store@0.2.0-draft" (instance))
            (import "wasi:clocks/timezone@0.2.0" (instance))
            (import "wasi:cli/environment@0.3.0" (instance))
            (import "wasi:io/streams@0.2.3" (instance))
            (core module {functions})
        )"#
    ))
    .unwrap()
}

#[tokio::test]
async fn unprovided_imports_are_refused_before_compiling_each_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("needs-more.wasm");
    std::fs::write(&path, unprovided_imports_component()).unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = toolhost::Host::builder()
        .state_dir(outputs.path())
        .cache_dir(cache.path())
        .build()
        .unwrap();
    let e = match host.compile(&path, &PluginOptions::default()).await {
        Err(Error::Load(e)) => e,
        other => panic!("expected a load error, got {other:?}"),
    };
    let LoadError::Unsupported { needs, hint, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        needs,
        &[
            Unsupported::Import("wasi:keyvalue/store@0.2.0-draft".into()),
            Unsupported::WasiInterface("wasi:clocks/timezone@0.2.0".into()),
            Unsupported::Wasi03("wasi:cli/environment@0.3.0".into()),
        ],
        "wasi:io/streams@0.2.3 is linked, so it is not listed"
    );
    assert!(hint.is_some(), "WASI 0.3 gets a build hint");
    let message = e.to_string();
    for expected in [
        "wasi:keyvalue/store@0.2.0-draft: not an interface Toolhost provides",
        "wasi:clocks/timezone@0.2.0: a WASI 0.2 interface Toolhost deliberately does not provide",
        "wasi:cli/environment@0.3.0: WASI 0.3 needs the component-model async ABI",
    ] {
        assert!(message.contains(expected), "{message}");
    }
    // Refused before compiling: the compile cache never saw it.
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn the_async_abi_is_refused_with_each_builtin_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("async.wasm");
    let wasm = wat::parse_str(
        r#"(component
            (core func (canon task.cancel))
            (core func (canon waitable-set.new))
        )"#,
    )
    .unwrap();
    std::fs::write(&path, wasm).unwrap();
    let e = load_error(&path).await;
    let LoadError::Unsupported { needs, hint, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        needs,
        &[
            Unsupported::AsyncAbi("task.cancel"),
            Unsupported::AsyncAbi("waitable-set"),
        ]
    );
    let hint = hint.as_deref().unwrap();
    assert!(hint.contains("--backend-qjs-disable-async"), "{hint}");
    assert!(e.to_string().contains("uses `task.cancel`"), "{e}");
}
